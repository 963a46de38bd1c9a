"""Shape and dtype checks shared by the image transforms.

Every message names the transform and the shape it expects, so a CHW image handed to an HWC
transform (a common slip after ``HWC2CHW``) says so instead of failing deep in NumPy.
"""
import numpy as np

HWC = "(H, W) or (H, W, C) with C in 1..4"


def as_image(what, image, batched, expected=HWC):
    """``image`` as an array with its per-image rank checked: 2 (H, W) or 3 (H, W, C)."""
    array = np.asarray(image)
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected a numeric image of shape {expected}, got dtype "
                        f"{array.dtype}{_where(array, batched)}")
    ndim = array.ndim - 1 if batched else array.ndim
    if ndim not in (2, 3) or min(array.shape[int(batched):], default=0) < 1:
        raise ValueError(f"{what}: expected an image of shape {expected}, got shape "
                         f"{array.shape}{_where(array, batched)}")
    if ndim == 3 and not 1 <= array.shape[-1] <= 4:
        hint = " (channels first? this transform works on HWC images, before HWC2CHW)" \
            if array.shape[-3] <= 4 else ""
        raise ValueError(f"{what}: expected an image of shape {expected}, got shape "
                         f"{array.shape}{_where(array, batched)}{hint}")
    return array


def _where(array, batched):
    return " for a stack of images" if batched else ""


def image_size(image, batched):
    """``(height, width)`` of an HWC/HW image or a stack of them."""
    first = 1 if batched else 0
    return image.shape[first], image.shape[first + 1]


def check_size(what, size, name="size"):
    """A size: an int (square, or the shorter side for Resize) or (height, width), positive."""
    values = (size,) if isinstance(size, (int, np.integer)) else size
    if (not isinstance(values, (tuple, list)) or len(values) not in (1, 2)
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1
                   for v in values)):
        raise ValueError(f"{what}: {name} must be a positive int or a sequence (height, width) "
                         f"of positive ints, got {size!r}")
    return tuple(int(v) for v in values)


def check_range(what, name, value, low=0.0, high=None, pair=True):
    """A pair ``(lo, hi)`` with ``low <= lo <= hi (<= high)``."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {name} must be a pair (min, max) of numbers, got {value!r}") from None
    if not low <= lo <= hi or (high is not None and hi > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{what}: {name} must be (min, max) with min <= max, both {bound}, "
                         f"got {value!r}")
    return lo, hi


def restore_dtype(result, like):
    """``result`` (float) in the dtype of ``like``: integer images are rounded and clipped."""
    if like.dtype.kind in "iu":
        info = np.iinfo(like.dtype)
        return np.clip(np.rint(result), info.min, info.max).astype(like.dtype)
    return result.astype(like.dtype, copy=False)
