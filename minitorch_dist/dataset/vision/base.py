"""Base classes of the image transforms: shape checks, stacks, and seeded randomness.

An image transform implements ``_run(images)`` on a stack ``(N, H, W, C)``; the base class
checks the input (naming the transform and the shape it expects), treats an (H, W) image as
one channel and a single image as a stack of one, so ``map`` gives the same images whether
it works on blocks of samples or on rows.

A random transform asks for ``draws`` uniform numbers per image. A stack of ``n`` images
draws an ``(n, draws)`` block, which is exactly what ``n`` single-image calls draw one after
another. As in MindSpore, each instance's stream starts from the dataset seed
(``ds.config.set_seed``, else ``ms.set_seed``) and its class: a pipeline built again under
the same seed draws the same numbers, while one instance keeps drawing new numbers epoch
after epoch; setting another seed restarts the stream.
"""
import zlib

import numpy as np

from ..config import get_seed
from ..transforms import Transform
from .checks import HWC, as_image

RANDOM_SALT = 7919             # apart from the shuffles' salts


class ImageTransform(Transform):
    """``__call__`` on one HWC/HW image, ``apply_batch`` on a stack; both run ``_run``."""

    expected = HWC

    def __call__(self, image):
        image = as_image(type(self).__name__, image, False, self.expected)
        return self._stacked(image[None])[0]

    def apply_batch(self, images):
        return self._stacked(as_image(type(self).__name__, images, True, self.expected))

    def _stacked(self, images):
        if images.ndim == 3:                       # (N, H, W): one channel
            return self._run(images[..., None])[..., 0]
        return self._run(images)

    def _run(self, images):
        raise NotImplementedError


class RandomImageTransform(ImageTransform):
    """An image transform whose parameters are drawn per image: ``self.uniforms(n)``."""

    draws = 1

    def uniforms(self, count):
        """``(count, draws)`` uniform numbers in [0, 1) from this transform's stream."""
        seed = get_seed()
        if seed != getattr(self, "_seed", None):
            kind = zlib.crc32(type(self).__name__.encode())
            self._rng = np.random.default_rng([seed, RANDOM_SALT, kind])
            self._seed = seed
        return self._rng.random((count, self.draws))
