"""N-dimensional indexing: GatherNd and ScatterNd (MindSpore's semantics).

``GatherNd()(x, indices)``: ``indices`` of shape ``(..., q)`` address the first ``q`` axes of
``x``; the output has shape ``indices.shape[:-1] + x.shape[q:]``. ``ScatterNd()(indices,
updates, shape)``: a zero tensor of ``shape`` with ``updates`` added at ``indices``
(duplicates add up). Each is the other's gradient.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> x = ms.Tensor([[1.0, 2.0], [3.0, 4.0]])
>>> ops.GatherNd()(x, ms.Tensor([[1, 0], [0, 1]])).asnumpy().tolist()
[3.0, 2.0]
>>> ops.ScatterNd()(ms.Tensor([[1], [1]]), ms.Tensor([5.0, 6.0]), (3,)).asnumpy().tolist()
[0.0, 11.0, 0.0]
"""
import numpy as np

from .indexing import _as_index_array
from .primitive import Primitive

__all__ = ["GatherNd", "ScatterNd", "gather_nd", "scatter_nd"]


def _add_at(xp, out, where, values):
    """``out[where] += values`` with repeated indices adding up."""
    at = getattr(xp.add, "at", None)       # NumPy, and CuPy from 13 on
    if at is not None:
        at(out, where, values)
    else:
        import cupyx
        cupyx.scatter_add(out, where, values)


def _check(owner, indices, shape):
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{owner}: indices must be integers, got {indices.dtype}")
    if indices.ndim == 0 or indices.shape[-1] > len(shape):
        raise ValueError(f"{owner}: indices of shape {indices.shape} cannot address a tensor of "
                         f"shape {tuple(shape)} (the last axis holds one index per addressed axis)")
    q = indices.shape[-1]
    for axis in range(q):
        column = indices[..., axis]
        if column.size and (int(column.min()) < 0 or int(column.max()) >= shape[axis]):
            raise IndexError(f"{owner}: index {int(column.max())} is out of range for axis {axis} "
                             f"of size {shape[axis]}")
    return tuple(indices[..., axis] for axis in range(q))


class GatherNd(Primitive):
    """See the module docstring."""

    def __call__(self, x, indices):
        return self.apply(x, _as_index_array(indices))

    def forward(self, ctx, x, indices):
        where = _check(self.name, indices, x.shape)
        ctx.where, ctx.shape = where, x.shape
        return x[where]

    def backward(self, ctx, g):
        gx = ctx.xp.zeros(ctx.shape, g.dtype)
        _add_at(ctx.xp, gx, ctx.where, g)
        return (gx, None)


class ScatterNd(Primitive):
    """See the module docstring."""

    def __call__(self, indices, updates, shape):
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise ValueError(f"{self.name}: shape must be a tuple of non-negative ints, got {shape!r}")
        return self.apply(_as_index_array(indices), updates, shape=tuple(int(n) for n in shape))

    def forward(self, ctx, indices, updates, shape):
        where = _check(self.name, indices, shape)
        want = indices.shape[:-1] + tuple(shape[indices.shape[-1]:])
        if updates.shape != want:
            raise ValueError(f"{self.name}: updates must have shape {want}, got {updates.shape}")
        xp = ctx.xp
        out = xp.zeros(shape, updates.dtype)
        _add_at(xp, out, where, updates)
        ctx.where = where
        return out

    def backward(self, ctx, g):
        return (None, g[ctx.where])


_gather_nd, _scatter_nd = GatherNd(), ScatterNd()


def gather_nd(x, indices):
    """Slices of ``x`` at N-dimensional ``indices``."""
    return _gather_nd(x, indices)


def scatter_nd(indices, updates, shape):
    """A zero tensor of ``shape`` with ``updates`` added at ``indices``."""
    return _scatter_nd(indices, updates, shape)
