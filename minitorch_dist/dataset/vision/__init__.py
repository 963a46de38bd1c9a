"""Image transforms (``ds.vision``, MindSpore 2.x names; ``c_transforms``/``py_transforms``
hold the 1.x names).

Images are HWC arrays (height, width, channels), as the MNIST and CIFAR-10 readers produce;
a 2-D (H, W) image counts as one channel. Every transform also works on a stack of images
(``apply_batch``, leading axis = samples) with the same result per image, which is what
makes ``map`` over 60,000 images take milliseconds; random transforms draw their
parameters per image from a seeded stream (``base.py``).
"""
from .basic import HWC2CHW, Normalize, Rescale
from .options import Border, Inter
from .geometry import (CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomResizedCrop,
                       RandomVerticalFlip, Resize, SlicePatches)
from .color import RandomColorAdjust
from .decode import Decode, ToPIL, ToTensor
from . import c_transforms, py_transforms

__all__ = ["Rescale", "Normalize", "HWC2CHW", "Inter", "Border", "Resize", "CenterCrop", "Pad",
           "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomResizedCrop",
           "SlicePatches", "RandomColorAdjust", "Decode", "ToPIL", "ToTensor", "c_transforms",
           "py_transforms"]
