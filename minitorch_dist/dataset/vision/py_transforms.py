"""MindSpore 1.x's ``mindspore.dataset.vision.py_transforms`` names (the Python forms).

They work on Pillow images as MindSpore's do: ``Decode`` gives a Pillow image, the
geometric and colour transforms take and return Pillow images (arrays pass through as
arrays), ``ToTensor`` makes a CHW float32 array in [0, 1], and ``Normalize`` works on that
CHW array.
"""
import numpy as np

from . import basic, color, decode, geometry
from .basic import HWC2CHW
from .decode import ToPIL, ToTensor
from .options import Border, Inter


def _is_pil(image):
    from PIL import Image
    return isinstance(image, Image.Image)


def _pillow_form(cls):
    """``cls`` taking and returning Pillow images as well as arrays."""

    def __call__(self, image):
        if not _is_pil(image):
            return cls.__call__(self, image)
        from PIL import Image
        out = cls.__call__(self, np.asarray(image))
        if isinstance(out, tuple):
            return tuple(Image.fromarray(p) for p in out)
        return Image.fromarray(out)

    return type(cls.__name__, (cls,), {"__call__": __call__, "__doc__": cls.__doc__,
                                       "__module__": __name__})


class Decode(decode.Decode):
    """Encoded bytes -> a Pillow RGB image (1.x ``py_transforms.Decode``)."""

    def __init__(self):
        super().__init__(to_pil=True)


class Normalize(basic.Normalize):
    """``(image - mean) / std`` on the CHW float array that ``ToTensor`` makes."""

    def __init__(self, mean, std):
        super().__init__(mean, std, is_hwc=False)


Resize = _pillow_form(geometry.Resize)
CenterCrop = _pillow_form(geometry.CenterCrop)
Pad = _pillow_form(geometry.Pad)
RandomCrop = _pillow_form(geometry.RandomCrop)
RandomHorizontalFlip = _pillow_form(geometry.RandomHorizontalFlip)
RandomVerticalFlip = _pillow_form(geometry.RandomVerticalFlip)
RandomResizedCrop = _pillow_form(geometry.RandomResizedCrop)
RandomColorAdjust = _pillow_form(color.RandomColorAdjust)

__all__ = ["Decode", "ToTensor", "ToPIL", "Normalize", "HWC2CHW", "Resize", "CenterCrop", "Pad",
           "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomResizedCrop",
           "RandomColorAdjust", "Inter", "Border"]
