"""Geometric transforms: Resize, crops, flips, padding and patches, on HWC images or stacks.

Random ones draw per image (``base.RandomImageTransform``) and then work on the whole stack
with one gather; resizing follows Pillow (``resample``).
"""
import math

import numpy as np

from .base import ImageTransform, RandomImageTransform
from .checks import as_image, check_range, check_size, image_size
from .options import Border, Inter, check_enum
from .resample import resize_stack


def _method(what, interpolation):
    return check_enum(what, "interpolation", interpolation, Inter)


def _target_size(size, height, width):
    """Resize's output (h, w): an int resizes the shorter side, keeping the aspect ratio."""
    if len(size) == 2:
        return size
    short = size[0]
    if height <= width:
        return short, max(1, int(short * width / height))
    return max(1, int(short * height / width)), short


class Resize(ImageTransform):
    """Resize to ``size`` ((height, width), or an int for the shorter side) as Pillow does.

    uint8 images stay uint8 (equal to Pillow's, see ``resample``); others become float32.
    MindSpore's C++ Resize uses OpenCV, which does not antialias when shrinking: enlarging
    (as the CIFAR-10 samples do, 32 -> 224) gives the same pixels up to rounding.
    """

    def __init__(self, size, interpolation=Inter.LINEAR):
        self.size = check_size("Resize", size)
        self.interpolation = interpolation
        self._method = _method("Resize", interpolation)

    def _run(self, images):
        out_hw = _target_size(self.size, *image_size(images, True))
        return resize_stack(images, out_hw, self._method)


def _check_fits(what, crop, images):
    height, width = image_size(images, True)
    if crop[0] > height or crop[1] > width:
        raise ValueError(f"{what}: crop size (height, width) = {crop} is larger than the image "
                         f"(after padding), of shape (H, W, C) = {images.shape[1:]}; expected "
                         f"a size of at most ({height}, {width})")


def _crop_each(images, tops, lefts, crop):
    """Image i cut at (tops[i], lefts[i]) to ``crop``, for the whole stack in one gather."""
    rows = tops[:, None] + np.arange(crop[0])
    cols = lefts[:, None] + np.arange(crop[1])
    index = np.arange(len(images))[:, None, None]
    return images[index, rows[:, :, None], cols[:, None, :]]


class CenterCrop(ImageTransform):
    """The central ``size`` region; the offset is ``(H - h) // 2``, ``(W - w) // 2``.

    A side shorter than ``size`` is first padded with zeros up to it, as MindSpore's C++
    CenterCrop does: the odd pixel goes on top / on the left (torchvision puts it at the
    bottom / right).
    """

    def __init__(self, size):
        self.size = check_size("CenterCrop", size) * (2 // len(check_size("CenterCrop", size)))

    def _run(self, images):
        height, width = image_size(images, True)
        grow_h, grow_w = max(0, self.size[0] - height), max(0, self.size[1] - width)
        if grow_h or grow_w:
            sides = (grow_w - grow_w // 2, grow_h - grow_h // 2, grow_w // 2, grow_h // 2)
            images = _pad(images, sides, "constant", 0)
            height, width = image_size(images, True)
        top, left = (height - self.size[0]) // 2, (width - self.size[1]) // 2
        return images[:, top:top + self.size[0], left:left + self.size[1]].copy()


def _padding(what, padding):
    """``padding``: an int (all sides), (left/right, top/bottom) or (left, top, right, bottom)."""
    values = (padding,) if isinstance(padding, (int, np.integer)) else padding
    if (not isinstance(values, (tuple, list)) or len(values) not in (1, 2, 4)
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
                   for v in values)):
        raise ValueError(f"{what}: padding must be a non-negative int or a sequence of 2 or 4 "
                         f"of them (left, top, right, bottom), got {padding!r}")
    values = [int(v) for v in values]
    if len(values) == 1:
        values *= 4
    elif len(values) == 2:
        values *= 2
    return tuple(values)


def _pad(images, padding, mode, fill):
    left, top, right, bottom = padding
    widths = ((0, 0), (top, bottom), (left, right), (0, 0))
    if mode == "constant":
        if np.ndim(fill) == 0:
            return np.pad(images, widths, mode="constant", constant_values=fill)
        out = np.pad(images, widths, mode="constant")
        mask = np.ones(out.shape[1:3], bool)
        mask[top:top + images.shape[1], left:left + images.shape[2]] = False
        out[:, mask] = np.asarray(fill, images.dtype)[:out.shape[-1]]
        return out
    return np.pad(images, widths, mode=mode)


def _fill(what, fill_value):
    values = np.atleast_1d(np.asarray(fill_value))
    if values.dtype.kind not in "iu" or values.ndim != 1 or len(values) not in (1, 3) \
            or values.min() < 0 or values.max() > 255:
        raise ValueError(f"{what}: fill_value must be an int in 0..255 or three of them (R, G, B), "
                         f"got {fill_value!r}")
    return int(values[0]) if len(values) == 1 else tuple(int(v) for v in values)


class Pad(ImageTransform):
    """Pad the border by ``padding`` pixels (left, top, right, bottom)."""

    def __init__(self, padding, fill_value=0, padding_mode=Border.CONSTANT):
        self.padding = _padding("Pad", padding)
        self.fill_value = _fill("Pad", fill_value)
        self.padding_mode = padding_mode
        self._mode = check_enum("Pad", "padding_mode", padding_mode, Border)

    def _run(self, images):
        return _pad(images, self.padding, self._mode, self.fill_value)


class RandomCrop(RandomImageTransform):
    """Pad by ``padding``, then cut ``size`` at a random place (each place equally likely)."""

    draws = 2

    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0,
                 padding_mode=Border.CONSTANT):
        self.size = check_size("RandomCrop", size) * (2 // len(check_size("RandomCrop", size)))
        self.padding = (0, 0, 0, 0) if padding is None else _padding("RandomCrop", padding)
        if not isinstance(pad_if_needed, bool):
            raise TypeError(f"RandomCrop: pad_if_needed must be True or False, got {pad_if_needed!r}")
        self.pad_if_needed = pad_if_needed
        self.fill_value = _fill("RandomCrop", fill_value)
        self.padding_mode = padding_mode
        self._mode = check_enum("RandomCrop", "padding_mode", padding_mode, Border)

    def _run(self, images):
        padded = _pad(images, self.padding, self._mode, self.fill_value) if any(self.padding) \
            else images
        if self.pad_if_needed:
            height, width = image_size(padded, True)
            grow_h, grow_w = max(0, self.size[0] - height), max(0, self.size[1] - width)
            if grow_h or grow_w:
                padded = _pad(padded, (grow_w, grow_h, grow_w, grow_h), self._mode, self.fill_value)
        _check_fits("RandomCrop", self.size, padded)
        height, width = image_size(padded, True)
        u = self.uniforms(len(images))
        tops = np.floor(u[:, 0] * (height - self.size[0] + 1)).astype(np.intp)
        lefts = np.floor(u[:, 1] * (width - self.size[1] + 1)).astype(np.intp)
        return _crop_each(padded, tops, lefts, self.size)


class _RandomFlip(RandomImageTransform):
    axis = None

    def __init__(self, prob=0.5):
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 <= prob <= 1:
            raise ValueError(f"{type(self).__name__}: prob must be a number in [0, 1], got {prob!r}")
        self.prob = float(prob)

    def _run(self, images):
        flip = self.uniforms(len(images))[:, 0] < self.prob
        out = images.copy()
        out[flip] = np.flip(images[flip], axis=self.axis)
        return out


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``prob``."""
    axis = 2


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``prob``."""
    axis = 1


class RandomResizedCrop(RandomImageTransform):
    """A random region (area ``scale`` of the image, aspect ``ratio``) resized to ``size``.

    Up to ``max_attempts`` draws of (area, log aspect ratio) per image; the first region that
    fits is taken at a random place. If none fits, the centre region with the aspect ratio
    clamped to ``ratio`` (the whole image when that fits). Resizing follows Pillow.
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=Inter.BILINEAR, max_attempts=10):
        what = "RandomResizedCrop"
        self.size = check_size(what, size) * (2 // len(check_size(what, size)))
        self.scale = check_range(what, "scale", scale)
        self.ratio = check_range(what, "ratio", ratio)
        if self.ratio[0] <= 0:
            raise ValueError(f"{what}: ratio must be positive, got {ratio!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"{what}: max_attempts must be a positive int, got {max_attempts!r}")
        self.interpolation = interpolation
        self._method = _method(what, interpolation)
        self.max_attempts = max_attempts
        self.draws = 2 * max_attempts + 2

    def boxes(self, count, height, width):
        """``(count, 4)`` regions (top, left, height, width), one per image."""
        u = self.uniforms(count)
        attempts = u[:, :-2].reshape(count, self.max_attempts, 2)
        area = height * width * (self.scale[0] + attempts[..., 0] * (self.scale[1] - self.scale[0]))
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        aspect = np.exp(log_lo + attempts[..., 1] * (log_hi - log_lo))
        w = np.rint(np.sqrt(area * aspect)).astype(np.intp)
        h = np.rint(np.sqrt(area / aspect)).astype(np.intp)
        fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
        first = np.argmax(fits, axis=1)
        found = fits[np.arange(count), first]
        ch, cw = self._fallback(height, width)
        h = np.where(found, h[np.arange(count), first], ch)
        w = np.where(found, w[np.arange(count), first], cw)
        tops = np.where(found, np.floor(u[:, -2] * (height - h + 1)), (height - h) // 2)
        lefts = np.where(found, np.floor(u[:, -1] * (width - w + 1)), (width - w) // 2)
        return np.stack([tops, lefts, h, w], axis=1).astype(np.intp)

    def _fallback(self, height, width):
        aspect = width / height
        if aspect < self.ratio[0]:
            return int(round(width / self.ratio[0])), width
        if aspect > self.ratio[1]:
            return height, int(round(height * self.ratio[1]))
        return height, width

    def _run(self, images):
        boxes = self.boxes(len(images), *image_size(images, True))
        return resize_stack(images, self.size, self._method, boxes)


class SlicePatches(ImageTransform):
    """Cut each image into ``num_height x num_width`` patches, returned as that many arrays
    (row by row). A size not divisible is padded at the bottom/right with ``fill_value``
    first (``SliceMode.PAD``, MindSpore's default)."""

    def __init__(self, num_height=1, num_width=1, fill_value=0):
        for name, value in (("num_height", num_height), ("num_width", num_width)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SlicePatches: {name} must be a positive int, got {value!r}")
        self.num_height, self.num_width = num_height, num_width
        self.fill_value = _fill("SlicePatches", fill_value)

    def __call__(self, image):
        image = as_image("SlicePatches", image, False, self.expected)
        return tuple(patch[0] for patch in self._stacked(image[None]))

    def _stacked(self, images):
        if images.ndim == 3:
            return tuple(p[..., 0] for p in self._run(images[..., None]))
        return self._run(images)

    def _run(self, images):
        height, width = image_size(images, True)
        ph, pw = -(-height // self.num_height), -(-width // self.num_width)
        grow = (0, 0, pw * self.num_width - width, ph * self.num_height - height)
        padded = _pad(images, grow, "constant", self.fill_value) if any(grow) else images
        return tuple(padded[:, i * ph:(i + 1) * ph, j * pw:(j + 1) * pw].copy()
                     for i in range(self.num_height) for j in range(self.num_width))
