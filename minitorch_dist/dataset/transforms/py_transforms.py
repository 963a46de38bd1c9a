"""MindSpore 1.x's ``mindspore.dataset.transforms.py_transforms`` names (the Python forms):
``Compose`` and ``OneHotOp``."""
from .core import Compose
from .one_hot import OneHot as OneHotOp

__all__ = ["Compose", "OneHotOp"]
