"""Inverted dropout: keep each element with probability ``keep_prob`` and scale it by 1/keep_prob.

The mask comes from the framework's random state (``ms.set_seed``): on the host the NumPy
``Generator`` of :func:`minitorch_dist.random.rng`, on a CuPy device a CuPy generator seeded
from it, so the mask is drawn where the data lives and never crosses the bus. The scaled mask
is kept for backward, which multiplies the gradient by the same mask.
"""
from .. import random as _random
from .primitive import Primitive

__all__ = ["Dropout", "dropout"]

_device_generators = {}   # xp module name -> (host generator it was seeded from, device generator)


def _uniform(xp, shape, dtype):
    """Uniform [0, 1) samples of ``shape`` drawn on the device of ``xp``."""
    host = _random.rng()
    if xp.__name__ == "numpy":
        return host.random(shape, dtype=dtype)
    source, gen = _device_generators.get(xp.__name__, (None, None))
    if source is not host:   # first use, or ms.set_seed replaced the host generator
        gen = xp.random.default_rng(int(host.integers(2 ** 63)))
        _device_generators[xp.__name__] = (host, gen)
    return gen.random(shape, dtype=dtype)


class Dropout(Primitive):
    """``Dropout(keep_prob=0.5)(x)``: zero elements with probability ``1 - keep_prob``.

    MindSpore 1.x spelling (the primitive always drops; ``nn.Dropout`` and :func:`dropout`
    decide whether the network is training). ``keep_prob=1`` is the identity. Masks come from
``ms.set_seed``; per-operator seeds (``seed0``/``seed1`` other than 0) are refused.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ms.set_seed(0)
    >>> y = ops.Dropout(keep_prob=0.5)(ms.Tensor(np.ones(8, np.float32)))
    >>> sorted(set(y.asnumpy().tolist())) == [0.0, 2.0]
    True
    """

    def __init__(self, keep_prob=0.5, seed0=0, seed1=0):
        if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float)) \
                or not 0.0 < keep_prob <= 1.0:
            raise ValueError(f"Dropout: keep_prob must be a number in (0, 1], got {keep_prob!r}")
        self.keep_prob = float(keep_prob)
        if seed0 != 0 or seed1 != 0:
            # A per-operator stream would need its own generator on every device; masks come
            # from the one seeded framework stream instead.
            raise NotImplementedError(f"Dropout: per-operator seeds (seed0={seed0!r}, "
                                      f"seed1={seed1!r}) are not supported; masks come from "
                                      "ms.set_seed(...). Pass seed0=0, seed1=0 and seed the "
                                      "framework")

    def forward(self, ctx, x):
        if x.dtype.kind != "f":
            raise TypeError(f"{self.name}: input must be floating point, got {x.dtype}")
        xp = ctx.xp
        if self.keep_prob == 1.0:
            ctx.mask = None
            return x.copy()
        sample_dtype = x.dtype if x.dtype.itemsize >= 4 else xp.float32
        mask = _uniform(xp, x.shape, sample_dtype) < self.keep_prob
        scaled = mask.astype(x.dtype)          # reuse the one new float array for the scaled mask
        scaled *= 1.0 / self.keep_prob
        ctx.mask = scaled
        return x * scaled

    def backward(self, ctx, grad):
        return (grad if ctx.mask is None else grad * ctx.mask,)


_shared = {}


def dropout(x, p=0.5, training=True):
    """PyTorch-style dropout: drop with probability ``p`` when ``training``, else return ``x``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor([1.0, 2.0])
    >>> ops.dropout(x, p=0.5, training=False) is x
    True
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p!r}")
    if not training or p == 0.0:
        return x
    if p == 1.0:   # everything dropped: zeros, with a zero gradient
        from .arithmetic import mul
        return mul(x, 0.0)
    op = _shared.get(p)
    if op is None:
        op = _shared[p] = Dropout(keep_prob=1.0 - p)
    return op(x)
