"""MindSpore 1.x's ``mindspore.dataset.vision.c_transforms`` names (the C++ forms): the same
transforms as ``ds.vision``, on HWC arrays, plus ``RandomCropDecodeResize``."""
from .basic import HWC2CHW, Normalize, Rescale
from .color import RandomColorAdjust
from .decode import Decode
from .geometry import (CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomResizedCrop,
                       RandomVerticalFlip, Resize, SlicePatches)
from .options import Border, Inter


class RandomCropDecodeResize(RandomResizedCrop):
    """``Decode`` then ``RandomResizedCrop`` (one transform in MindSpore's model zoo)."""

    batchable = False     # encoded files of one stack differ in length

    def __call__(self, data):
        return super().__call__(Decode()(data))

    def apply_batch(self, data):
        return super().apply_batch(Decode().apply_batch(data))


__all__ = ["Decode", "Resize", "CenterCrop", "Pad", "RandomCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomResizedCrop", "RandomCropDecodeResize", "SlicePatches",
           "RandomColorAdjust", "Rescale", "Normalize", "HWC2CHW", "Inter", "Border"]
