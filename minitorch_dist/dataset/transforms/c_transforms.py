"""MindSpore 1.x's ``mindspore.dataset.transforms.c_transforms`` names (the C++ forms)."""
from .core import Compose, TypeCast
from .one_hot import OneHot

__all__ = ["Compose", "TypeCast", "OneHot"]
