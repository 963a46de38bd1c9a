"""Resizing as Pillow does it, as two matrix products per stack of images.

Pillow resamples separably: for every output column it weighs the input columns with a
filter (a triangle for bilinear, a cubic for bicubic, ...), stretched by the shrink factor
when shrinking (antialiasing), and normalises the weights; then the same for rows. Those
weights form a matrix, so resizing a stack is ``rows @ image @ columns.T`` per channel.
Each image may have its own crop box (``RandomResizedCrop``): the matrices then differ per
image and the products are batched. For 8-bit images the weights are rounded to Pillow's
22-bit fixed point and each pass rounds and clips to 0..255 as Pillow's does, so the result
equals Pillow's; other dtypes are computed in float64 and returned as float32.
"""
import numpy as np

PRECISION_BITS = 32 - 8 - 2     # Pillow's fixed point for 8-bit images


def _triangle(x):
    return np.clip(1.0 - np.abs(x), 0.0, None)


def _cubic(x, a=-0.5):
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _box(x):
    return ((x > -0.5) & (x <= 0.5)).astype(np.float64)


def _lanczos(x):
    return np.where(np.abs(x) < 3.0, np.sinc(x) * np.sinc(x / 3.0), 0.0)


# name -> (filter, support): Pillow's BILINEAR, BICUBIC, BOX (area), LANCZOS (antialias)
FILTERS = {"bilinear": (_triangle, 1.0), "bicubic": (_cubic, 2.0), "area": (_box, 0.5),
           "antialias": (_lanczos, 3.0)}


def weights(start, length, out_size, in_size, method):
    """``(N, out_size, in_size)`` weights sampling ``[start, start + length)`` of an axis of
    ``in_size`` pixels (per image: ``start``/``length`` are length-N arrays of ints)."""
    start = np.asarray(start, np.float64)[:, None, None]
    length = np.asarray(length, np.float64)[:, None, None]
    out = (np.arange(out_size, dtype=np.float64) + 0.5)[None, :, None]
    pixel = np.arange(in_size, dtype=np.float64)[None, None, :] - start   # within the crop
    scale = length / out_size
    if method == "nearest":
        chosen = np.minimum(np.floor(out * scale), length - 1)
        return (pixel == chosen).astype(np.float64)
    kernel, support = FILTERS[method]
    filter_scale = np.maximum(scale, 1.0)
    centre = out * scale
    reach = support * filter_scale
    low = np.maximum(np.trunc(centre - reach + 0.5), 0.0)      # Pillow's window, in C ints
    high = np.minimum(np.trunc(centre + reach + 0.5), length)
    inside = (pixel >= low) & (pixel < high)
    w = np.where(inside, kernel((pixel - centre + 0.5) / filter_scale), 0.0)
    total = w.sum(axis=2, keepdims=True)
    return w / np.where(total == 0.0, 1.0, total)


def _fixed_point(w):
    scaled = w * (1 << PRECISION_BITS)
    return np.where(scaled < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5))


def _pass(images, w, eight_bit):
    """Resample axis 2 (width) of ``images`` (N, H, W, C) with ``w`` (N or 1, out, W)."""
    if eight_bit:
        total = np.matmul(_fixed_point(w)[:, None], images.astype(np.float64))
        total = np.floor((total + (1 << (PRECISION_BITS - 1))) / (1 << PRECISION_BITS))
        return np.clip(total, 0, 255)
    return np.matmul(w[:, None], images.astype(np.float64))


def resize_stack(images, out_hw, method, boxes=None):
    """Resize a stack (N, H, W, C) to ``out_hw``; ``boxes`` (N, 4) = (top, left, height,
    width) crops each image first. uint8 stays uint8 (as Pillow); anything else -> float32."""
    n, h, w = images.shape[:3]
    if boxes is None:
        boxes = np.array([[0, 0, h, w]])
    top, left, height, width = (np.asarray(boxes)[:, i] for i in range(4))
    eight_bit = images.dtype == np.uint8
    columns = weights(left, width, out_hw[1], w, method)
    rows = weights(top, height, out_hw[0], h, method)
    if method == "nearest":
        eight_bit = False                          # picks pixels: exact in any dtype
    out = _pass(images, columns, eight_bit)                          # (N, H, out_w, C)
    out = _pass(out.transpose(0, 2, 1, 3), rows, eight_bit)          # (N, out_w, out_h, C)
    out = out.transpose(0, 2, 1, 3)
    if images.dtype == np.uint8:
        return out.astype(np.uint8)
    return out.astype(np.float32)
