"""Tile and Cumsum: a tensor repeated along its axes, and a running sum along one.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.Tile()(ms.Tensor([[1.0, 2.0]]), (2, 1)).asnumpy().tolist()
[[1.0, 2.0], [1.0, 2.0]]
>>> ops.CumSum()(ms.Tensor([1.0, 2.0, 3.0]), 0).asnumpy().tolist()
[1.0, 3.0, 6.0]
"""
import numpy as np

from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["Tile", "CumSum", "Cumsum", "tile", "cumsum"]


class Tile(Primitive):
    """``Tile()(x, multiples)``: ``x`` repeated ``multiples[i]`` times along axis ``i`` (a
    longer ``multiples`` adds leading axes); the gradient sums the copies."""

    def __call__(self, x, multiples):
        if not isinstance(multiples, (tuple, list)) or not all(
                isinstance(m, (int, np.integer)) and not isinstance(m, bool) and m >= 1
                for m in multiples):
            raise ValueError(f"{self.name}: multiples must be a tuple of positive ints, got "
                             f"{multiples!r}")
        return self.apply(x, multiples=tuple(int(m) for m in multiples))

    def forward(self, ctx, x, multiples):
        if len(multiples) < x.ndim:
            raise ValueError(f"{self.name}: multiples {multiples} has fewer entries than x has "
                             f"axes ({x.shape})")
        ctx.shape = (1,) * (len(multiples) - x.ndim) + x.shape
        ctx.in_shape, ctx.multiples = x.shape, multiples
        return ctx.xp.tile(x, multiples)

    def backward(self, ctx, g):
        split = []
        for m, n in zip(ctx.multiples, ctx.shape):
            split += [m, n]
        total = g.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return (total.reshape(ctx.in_shape),)


class CumSum(Primitive):
    """``CumSum(exclusive=False, reverse=False)(x, axis)``: the running sum along ``axis``;
    the gradient is the running sum of the gradient in the other direction."""

    def __init__(self, exclusive=False, reverse=False):
        self.exclusive, self.reverse = bool(exclusive), bool(reverse)

    def __call__(self, x, axis):
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ValueError(f"{self.name}: axis must be an int, got {axis!r}")
        return self.apply(x, axis=int(axis))

    def _scan(self, xp, x, axis, reverse):
        if reverse:
            x = xp.flip(x, axis)
        out = xp.cumsum(x, axis=axis)
        if self.exclusive:
            out = out - x
        return xp.flip(out, axis) if reverse else out

    def forward(self, ctx, x, axis):
        ctx.axis = normalize_axis(axis, x.ndim, self.name, x.shape)
        return self._scan(ctx.xp, x, ctx.axis, self.reverse)

    def backward(self, ctx, g):
        return (self._scan(ctx.xp, g, ctx.axis, not self.reverse),)


Cumsum = CumSum
_tile, _cumsum = Tile(), CumSum()


def tile(x, multiples):
    """``x`` repeated along its axes."""
    return _tile(x, multiples)


def cumsum(x, axis):
    """The running sum of ``x`` along ``axis``."""
    return _cumsum(x, axis)
