"""``RandomColorAdjust``: random brightness, contrast, saturation and hue, per image.

Brightness, contrast and saturation follow Pillow's ``ImageEnhance`` (a blend of the image
with black, with its mean grey, with its grey version; grey is Pillow's ITU-R 601 "L"
conversion; 8-bit results are truncated and clipped as Pillow's blend does). Hue rotates
the HSV hue by ``factor`` turns. Each image gets its own factors, brightness/contrast/
saturation from ``[max(0, 1 - v), 1 + v]`` (or the given ``(min, max)``), hue from ``[-v, v]``
(``v <= 0.5``), and its own random order of the four steps, as MindSpore's C++ op (which
shuffles them per image) and torchvision's ColorJitter do. A step whose range is the identity
(``(1, 1)``, hue ``(0, 0)``) is skipped, as MindSpore skips it.
"""
import numpy as np

from .base import RandomImageTransform
from .checks import check_range

RGB = "(H, W, 3) RGB"


def _factor_range(name, value, centre):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"RandomColorAdjust: {name} must be non-negative, got {value!r}")
        if centre == 0:
            if value > 0.5:
                raise ValueError(f"RandomColorAdjust: hue must be in [0, 0.5], got {value!r}")
            return -float(value), float(value)
        return max(0.0, centre - value), centre + float(value)
    if centre == 0:
        return check_range("RandomColorAdjust", name, value, low=-0.5, high=0.5)
    return check_range("RandomColorAdjust", name, value)


def grey(images):
    """Pillow's ``convert("L")``: (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 for uint8."""
    r, g, b = (images[..., i].astype(np.float64) for i in range(3))
    if images.dtype == np.uint8:
        return np.floor((r * 19595 + g * 38470 + b * 7471 + 0x8000) / 65536)
    return r * 0.299 + g * 0.587 + b * 0.114


def blend(degenerate, images, factors):
    """Pillow's ``Image.blend(degenerate, image, factor)``, one factor per image."""
    f = np.asarray(factors, np.float32).reshape(-1, 1, 1, 1)      # Pillow's alpha is a float
    base = np.asarray(degenerate, np.float32)
    out = base + f * (images.astype(np.float32) - base)
    if images.dtype == np.uint8:
        return np.clip(np.trunc(out), 0, 255)
    return out


def rotate_hue(images, turns):
    """Shift the HSV hue of RGB ``images`` by ``turns`` (per image), keeping S and V."""
    x = images.astype(np.float64)
    top, bottom = x.max(-1), x.min(-1)
    span = top - bottom
    safe = np.where(span == 0, 1.0, span)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    hue = np.where(top == r, (g - b) / safe, np.where(top == g, 2.0 + (b - r) / safe,
                                                      4.0 + (r - g) / safe)) / 6.0
    hue = (hue + np.asarray(turns, np.float64).reshape(-1, 1, 1)) % 1.0
    sector = np.floor(hue * 6.0)
    frac = hue * 6.0 - sector
    p, q, t = top - span, top - span * frac, top - span * (1.0 - frac)
    choices = [np.stack(c, -1) for c in ((top, t, p), (q, top, p), (p, top, t), (p, q, top),
                                         (t, p, top), (top, p, q))]
    out = np.select([(sector % 6 == k)[..., None] for k in range(6)], choices)
    out = np.where((span == 0)[..., None], x, out)
    return np.clip(np.rint(out), 0, 255) if images.dtype == np.uint8 else out


def _brightness(images, factors):
    return blend(np.zeros_like(images), images, factors)


def _contrast(images, factors):
    means = grey(images).mean(axis=(1, 2))
    if images.dtype == np.uint8:
        means = np.floor(means + 0.5)          # Pillow's mean grey is rounded to an int
    return blend(np.broadcast_to(means.reshape(-1, 1, 1, 1), images.shape), images, factors)


def _saturation(images, factors):
    return blend(grey(images)[..., None], images, factors)


STEPS = (_brightness, _contrast, _saturation, rotate_hue)    # columns of the factors
IDENTITY = (1.0, 1.0, 1.0, 0.0)


class RandomColorAdjust(RandomImageTransform):
    """Random brightness, contrast, saturation and hue in a random order (see the module)."""

    expected = RGB
    draws = 8                                  # four factors, then four keys of the order

    def __init__(self, brightness=(1, 1), contrast=(1, 1), saturation=(1, 1), hue=(0, 0)):
        self.brightness = _factor_range("brightness", brightness, 1.0)
        self.contrast = _factor_range("contrast", contrast, 1.0)
        self.saturation = _factor_range("saturation", saturation, 1.0)
        self.hue = _factor_range("hue", hue, 0.0)

    def _ranges(self):
        return np.array([self.brightness, self.contrast, self.saturation, self.hue])

    def parameters(self, count):
        """``(factors, order)`` per image: ``(count, 4)`` brightness, contrast, saturation and
        hue factors, and ``(count, 4)`` step indices in the order they run."""
        u = self.uniforms(count)
        ranges = self._ranges()
        factors = ranges[:, 0] + u[:, :4] * (ranges[:, 1] - ranges[:, 0])
        return factors, np.argsort(u[:, 4:], axis=1, kind="stable")

    def factors(self, count):
        """The factors of ``parameters`` alone (draws the same numbers)."""
        return self.parameters(count)[0]

    def _run(self, images):
        if images.shape[-1] != 3:
            raise ValueError(f"RandomColorAdjust: expected an image of shape {RGB}, got "
                             f"{images.shape[-1]} channel(s) (shape {images.shape[1:]})")
        factors, order = self.parameters(len(images))
        active = [step for step, (lo, hi) in enumerate(self._ranges())
                  if not lo == hi == IDENTITY[step]]
        out = images.copy()
        for position in range(len(STEPS)):
            for step in active:
                chosen = order[:, position] == step
                if chosen.any():
                    done = STEPS[step](out[chosen], factors[chosen, step])
                    out[chosen] = done.astype(images.dtype)
        return out
