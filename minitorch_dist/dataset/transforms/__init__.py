"""Generic data transforms (``ds.transforms``): ``TypeCast``, ``OneHot``, ``Compose`` and the
base class; ``c_transforms``/``py_transforms`` hold MindSpore 1.x's names for them.

A transform is a callable on one sample's arrays. A transform that can also work on a
whole stack of samples (leading axis = samples) with the same result per sample defines
``apply_batch``; ``Dataset.map`` then applies it to thousands of samples per call.
"""
from .core import Compose, Transform, TypeCast, apply_operations, supports_batch
from .one_hot import OneHot
from . import c_transforms, py_transforms

__all__ = ["Transform", "supports_batch", "TypeCast", "Compose", "OneHot", "apply_operations",
           "c_transforms", "py_transforms"]
