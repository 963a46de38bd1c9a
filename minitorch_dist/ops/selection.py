"""Choosing elements: Select (``Where``), TopK, ArgMaxWithValue, Unique.

* ``Select()(cond, x, y)``: ``x`` where ``cond`` else ``y`` (broadcasting); the gradient goes
  to the branch that was taken. ``ops.where(cond, x, y)`` is the same.
* ``TopK(sorted=True)(x, k)``: the ``k`` largest values along the last axis and their indices;
  the gradient goes back to the chosen positions.
* ``ArgMaxWithValue(axis=0, keep_dims=False)(x)``: ``(index, value)`` of the maximum.
* ``Unique()(x)``: ``(unique values in order of first appearance, the index of each input
  element in them)``, as MindSpore returns them; not differentiable.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> values, indices = ops.TopK()(ms.Tensor([1.0, 5.0, 3.0]), 2)
>>> values.asnumpy().tolist(), indices.asnumpy().tolist()
([5.0, 3.0], [1, 2])
>>> y, idx = ops.Unique()(ms.Tensor([3, 1, 3, 2]))
>>> y.asnumpy().tolist(), idx.asnumpy().tolist()
([3, 1, 2], [0, 1, 0, 2])
"""
import numpy as np

from ..tensor import Tensor
from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["Select", "Where", "TopK", "ArgMaxWithValue", "Unique", "select", "where"]


class Select(Primitive):
    """``x`` where ``cond`` else ``y`` (see the module docstring)."""

    def forward(self, ctx, cond, x, y):
        if cond.dtype != np.bool_:
            raise TypeError(f"{self.name}: cond must be a bool tensor, got {cond.dtype}")
        ctx.cond = cond
        return ctx.xp.where(cond, x, y)

    def backward(self, ctx, g):
        # full-shaped gradients: the engine sums them back to broadcast inputs' shapes
        xp = ctx.xp
        zero = xp.zeros((), g.dtype)
        gx = xp.where(ctx.cond, g, zero) if ctx.needs_input_grad[1] else None
        gy = xp.where(ctx.cond, zero, g) if ctx.needs_input_grad[2] else None
        return None, gx, gy


Where = Select


class TopK(Primitive):
    """The ``k`` largest values along the last axis, with their indices."""

    def __init__(self, sorted=True):   # noqa: A002 (MindSpore's argument name)
        self.sorted = bool(sorted)

    def __call__(self, x, k):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"{self.name}: k must be a non-negative int, got {k!r}")
        return self.apply(x, k=int(k))

    def forward(self, ctx, x, k):
        xp = ctx.xp
        if x.ndim == 0 or k > x.shape[-1]:
            raise ValueError(f"{self.name}: k={k} exceeds the last axis of shape {x.shape}")
        # stable on the negated values: equal values keep the lower index first
        order = xp.argsort(-x, axis=-1, kind="stable")[..., :k]
        values = xp.take_along_axis(x, order, axis=-1)
        ctx.order, ctx.shape = order, x.shape
        return values, order.astype(np.int32)

    def backward(self, ctx, g_values, g_indices=None):
        xp = ctx.xp
        gx = xp.zeros(ctx.shape, g_values.dtype)
        xp.put_along_axis(gx, ctx.order, g_values, axis=-1)
        return (gx,)


class ArgMaxWithValue(Primitive):
    """``(index, value)`` of the maximum along ``axis``."""

    def __init__(self, axis=0, keep_dims=False):
        self.axis, self.keep_dims = int(axis), bool(keep_dims)

    def forward(self, ctx, x):
        xp = ctx.xp
        axis = normalize_axis(self.axis, x.ndim, self.name, x.shape)
        index = xp.expand_dims(xp.argmax(x, axis=axis), axis)
        value = xp.take_along_axis(x, index, axis=axis)
        ctx.index, ctx.axis, ctx.shape = index, axis, x.shape
        if not self.keep_dims:
            index, value = index.squeeze(axis), value.squeeze(axis)
        return index.astype(np.int32), value

    def backward(self, ctx, g_index, g_value):
        xp = ctx.xp
        gx = xp.zeros(ctx.shape, g_value.dtype)
        xp.put_along_axis(gx, ctx.index, g_value.reshape(ctx.index.shape), axis=ctx.axis)
        return (gx,)


class Unique(Primitive):
    """Unique values in order of first appearance and each element's index among them."""

    differentiable = False

    def forward(self, ctx, x):
        xp = ctx.xp
        flat = x.reshape(-1)
        values, first, inverse = xp.unique(flat, return_index=True, return_inverse=True)
        order = xp.argsort(first, kind="stable")          # by first appearance
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.size)
        return values[order], rank[inverse.reshape(-1)].astype(np.int32).reshape(x.shape)


_select = Select()


def select(cond, x, y):
    """``x`` where ``cond`` else ``y``."""
    cond = cond if isinstance(cond, Tensor) else Tensor(np.asarray(cond, np.bool_))
    return _select(cond, x, y)


where = select
