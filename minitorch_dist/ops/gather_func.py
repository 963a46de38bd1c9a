"""Gathering and reordering along an axis: ``GatherD``, ``Sort``, ``CumProd``,
``UnsortedSegmentSum`` and ``RepeatElements``, each a primitive with its own backward.
"""

import numpy as np

from ..tensor import Tensor
from .array_func import (_F, _constant, _host, _tensor, atleast_2d, cat, index_select, moveaxis,  # noqa: F401
                         narrow, zeros_like)
from .axes import normalize_axis
from .primitive import Primitive

__all__ = ['CumProd', 'GatherD', 'RepeatElements', 'Sort', 'UnsortedSegmentSum', 'argsort', 'cumprod', 'gather_d', 'gather_elements', 'repeat_elements', 'repeat_interleave', 'sort', 'top_k', 'topk', 'unsorted_segment_max', 'unsorted_segment_min', 'unsorted_segment_prod', 'unsorted_segment_sum']


# ---- gathering along an axis ------------------------------------------------------------
class GatherD(Primitive):
    """``GatherD()(x, dim, index)``: ``out[i][j] = x[index[i][j]][j]`` for ``dim=0`` (NumPy's
    ``take_along_axis``); the gradient scatters back, adding at repeated indices."""

    def __call__(self, x, dim, index):
        return self.apply(x, _tensor(index, "index"), dim=int(dim))

    def forward(self, ctx, x, index, dim):
        if index.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: index must be integers, got {index.dtype}")
        dim = normalize_axis(dim, x.ndim, self.name, x.shape)
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, x.shape
        return ctx.xp.take_along_axis(x, index, dim)

    def backward(self, ctx, g):
        (index,) = ctx.saved
        grad = ctx.xp.zeros(ctx.shape, g.dtype)
        _add_along_axis(ctx.xp, grad, index, g, ctx.dim)
        return grad, None


def _add_along_axis(xp, target, index, values, axis):
    grid = list(xp.indices(index.shape, sparse=True))
    grid[axis] = index
    xp.add.at(target, tuple(grid), values)


_gather_d = GatherD()


def gather_d(x, dim, index):
    return _gather_d(x, dim, index)


def gather_elements(input, dim, index):   # noqa: A002
    return _gather_d(input, dim, index)


class Sort(Primitive):
    """``Sort(axis=-1, descending=False)(x)``: (sorted values, their int64 indices); the
    values' gradient goes back to where each value came from."""

    def __init__(self, axis=-1, descending=False):
        self.axis, self.descending = int(axis), bool(descending)

    def forward(self, ctx, x):
        xp = ctx.xp
        axis = normalize_axis(self.axis, x.ndim, self.name, x.shape)
        index = xp.argsort(-x if self.descending else x, axis=axis, kind="stable")
        ctx.save_for_backward(index)
        ctx.axis, ctx.shape = axis, x.shape
        return xp.take_along_axis(x, index, axis), index.astype(np.int64)

    def backward(self, ctx, g, g_index=None):
        (index,) = ctx.saved
        grad = ctx.xp.zeros(ctx.shape, g.dtype)
        _add_along_axis(ctx.xp, grad, index, g, ctx.axis)
        return (grad,)


def sort(input_x, axis=-1, descending=False):   # noqa: A002
    return Sort(axis, descending)(input_x)


def argsort(input, axis=-1, descending=False):   # noqa: A002
    return sort(input, axis, descending)[1]


def topk(input, k, dim=None, largest=True, sorted=True):   # noqa: A002
    dim = -1 if dim is None else dim
    values, index = sort(input, dim, descending=largest)
    return narrow(values, dim % input.ndim, 0, k), narrow(index, dim % input.ndim, 0, k)


def top_k(input_x, k, sorted=True):   # noqa: A002
    return topk(input_x, k)


class CumProd(Primitive):
    """``CumProd(exclusive=False, reverse=False)(x, axis)``: running product; the gradient
    is ``reverse_cumsum(g * out) / x`` (inputs must be non-zero for it)."""

    def __init__(self, exclusive=False, reverse=False):
        if exclusive or reverse:
            raise ValueError("CumProd: exclusive and reverse are not supported here (only False)")

    def __call__(self, x, axis):
        return self.apply(x, axis=int(axis))

    def forward(self, ctx, x, axis):
        axis = normalize_axis(axis, x.ndim, self.name, x.shape)
        out = ctx.xp.cumprod(x, axis=axis)
        ctx.save_for_backward(x, out)
        ctx.axis = axis
        return out

    def backward(self, ctx, g):
        xp = ctx.xp
        x, out = ctx.saved
        rev = xp.flip(xp.cumsum(xp.flip(g * out, ctx.axis), ctx.axis), ctx.axis)
        return (rev / x,)


def cumprod(input, dim, dtype=None):   # noqa: A002
    out = CumProd()(input, dim)
    return out.astype(dtype) if dtype is not None else out


class UnsortedSegmentSum(Primitive):
    """``UnsortedSegmentSum()(x, segment_ids, num_segments)``: sums of the rows of ``x`` per
    segment id; the gradient gathers the segment's gradient back to each row."""

    def __call__(self, x, segment_ids, num_segments):
        return self.apply(x, _tensor(segment_ids, "segment_ids"), n=int(num_segments))

    def forward(self, ctx, x, ids, n):
        out = ctx.xp.zeros((n,) + x.shape[ids.ndim:], x.dtype)
        ctx.xp.add.at(out, ids, x)
        ctx.save_for_backward(ids)
        return out

    def backward(self, ctx, g):
        (ids,) = ctx.saved
        return g[ids], None


def unsorted_segment_sum(input_x, segment_ids, num_segments):   # noqa: A002
    return UnsortedSegmentSum()(input_x, segment_ids, num_segments)


def _segment_reduce(ufunc, fill, x, segment_ids, num_segments):
    data, ids = _host(x), _host(segment_ids)
    out = np.full((int(num_segments),) + data.shape[ids.ndim:], fill, data.dtype)
    ufunc.at(out, ids, data)
    return _constant(out, x)


def unsorted_segment_max(x, segment_ids, num_segments):
    lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return _segment_reduce(np.maximum, lowest, x, segment_ids, num_segments)


def unsorted_segment_min(x, segment_ids, num_segments):
    highest = np.finfo(x.dtype).max if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    return _segment_reduce(np.minimum, highest, x, segment_ids, num_segments)


def unsorted_segment_prod(x, segment_ids, num_segments):
    return _segment_reduce(np.multiply, 1, x, segment_ids, num_segments)


class RepeatElements(Primitive):
    """``RepeatElements(rep, axis)(x)``: each slice repeated ``rep`` times along ``axis``;
    the gradient sums each group of copies."""

    def __init__(self, rep, axis=0):
        if int(rep) < 1:
            raise ValueError(f"RepeatElements: rep must be a positive int, got {rep!r}")
        self.rep, self.axis = int(rep), int(axis)

    def forward(self, ctx, x):
        axis = normalize_axis(self.axis, x.ndim, self.name, x.shape)
        ctx.axis, ctx.shape = axis, x.shape
        return ctx.xp.repeat(x, self.rep, axis)

    def backward(self, ctx, g):
        a, shape = ctx.axis, ctx.shape
        return (g.reshape(shape[:a] + (shape[a], self.rep) + shape[a + 1:]).sum(a + 1),)


def repeat_elements(x, rep, axis=0):
    return RepeatElements(rep, axis)(x)


def repeat_interleave(input, repeats, axis=None):   # noqa: A002
    if axis is None:
        input, axis = input.reshape(-1), 0
    if isinstance(repeats, int):
        return repeat_elements(input, repeats, axis)
    counts = _host(repeats)
    return index_select(input, axis, Tensor(np.repeat(np.arange(len(counts)), counts)))


