"""Image transforms (``ds.vision``): ``Rescale``, ``Normalize``, ``HWC2CHW``.

Images are HWC arrays (height, width, channels), as the MNIST and CIFAR-10 readers produce;
a 2-D (H, W) image counts as one channel. Every transform here also works on a stack of
images (``apply_batch``, leading axis = samples) with bit-identical results, which is what
makes ``map`` over 60,000 MNIST images take milliseconds.
"""
import numbers

import numpy as np

from ..transforms import Transform


def _as_float32(image):
    return np.asarray(image, dtype=np.float32)


class Rescale(Transform):
    """``image * rescale + shift`` in float32 (``Rescale(1 / 255, 0)`` maps bytes to [0, 1]).

    >>> import numpy as np
    >>> Rescale(1 / 255, 0)(np.array([[0, 255]], dtype=np.uint8)).tolist()
    [[0.0, 1.0]]
    """

    def __init__(self, rescale, shift):
        for name, value in (("rescale", rescale), ("shift", shift)):
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise TypeError(f"Rescale: {name} must be a real number, got {value!r}")
        self.rescale = float(rescale)
        self.shift = float(shift)

    def __call__(self, image):
        out = _as_float32(image) * np.float32(self.rescale)   # a new array: the input is untouched
        out += np.float32(self.shift)
        return out

    apply_batch = __call__   # elementwise: a stack is just a bigger array


class Normalize(Transform):
    """``(image - mean) / std`` per channel, in float32.

    ``mean``/``std`` have one value per channel; channels are the last axis (``is_hwc=True``)
    or the third from last (CHW).

    >>> import numpy as np
    >>> Normalize(mean=(1.0, 2.0), std=(2.0, 4.0))(np.array([[[3.0, 6.0]]])).tolist()
    [[[1.0, 1.0]]]
    """

    def __init__(self, mean, std, is_hwc=True):
        mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        std = np.atleast_1d(np.asarray(std, dtype=np.float64))
        if mean.ndim != 1 or std.ndim != 1 or len(mean) != len(std) or len(mean) == 0:
            raise ValueError(f"Normalize: mean and std must be equally long sequences of numbers "
                             f"(one per channel), got mean={mean.tolist()} and std={std.tolist()}")
        if not np.all(std > 0):
            raise ValueError(f"Normalize: every std must be positive, got {std.tolist()}")
        self.mean = tuple(mean.tolist())
        self.std = tuple(std.tolist())
        self.is_hwc = bool(is_hwc)
        # shaped to broadcast against the channel axis of an image or a stack of images
        shape = (-1,) if self.is_hwc else (-1, 1, 1)
        self._mean = mean.astype(np.float32).reshape(shape)
        self._std = std.astype(np.float32).reshape(shape)

    def __call__(self, image):
        return self._normalize(image, batched=False)

    def apply_batch(self, images):
        return self._normalize(images, batched=True)

    def _normalize(self, image, batched):
        image = np.asarray(image)
        image_ndim = image.ndim - 1 if batched else image.ndim
        if image_ndim == 2:                       # (H, W): a single channel
            channels = 1
        elif image_ndim == 3:
            channels = image.shape[-1] if self.is_hwc else image.shape[-3]
        else:
            raise ValueError(f"Normalize: expected an image of shape (H, W) or "
                             f"{'(H, W, C)' if self.is_hwc else '(C, H, W)'}, got shape {image.shape}"
                             f"{' for a stack of images' if batched else ''}")
        if channels != len(self.mean):
            raise ValueError(f"Normalize: the image has {channels} channel(s) (shape {image.shape}) "
                             f"but mean/std have {len(self.mean)} value(s)")
        mean, std = self._mean, self._std
        if image_ndim == 2 and not self.is_hwc:
            mean, std = mean.reshape(-1), std.reshape(-1)
        out = np.subtract(image, mean, dtype=np.float32)
        out /= std
        return out


class HWC2CHW(Transform):
    """Move channels first: (H, W, C) -> (C, H, W); an (H, W) image becomes (1, H, W).

    >>> import numpy as np
    >>> HWC2CHW()(np.zeros((28, 28, 1))).shape
    (1, 28, 28)
    """

    def __call__(self, image):
        return self._to_chw(np.asarray(image), batched=False)

    def apply_batch(self, images):
        return self._to_chw(np.asarray(images), batched=True)

    @staticmethod
    def _to_chw(image, batched):
        image_ndim = image.ndim - 1 if batched else image.ndim
        if image_ndim == 2:
            return np.expand_dims(image, -3)
        if image_ndim != 3:
            raise ValueError(f"HWC2CHW: expected an image of shape (H, W, C) or (H, W), got shape "
                             f"{image.shape}{' for a stack of images' if batched else ''}")
        # a view: the later batch copy makes it contiguous at no extra cost
        return np.moveaxis(image, -1, -3)
