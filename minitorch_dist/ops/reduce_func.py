"""MindSpore's reductions beyond sum/mean/max/min: ``prod``, ``amax``, ``std``, ``var``,
``norm``, ``logsumexp``, ``median``, ``cummax``, ``all``, ``any``, ...

Differentiable ones are compositions (``std`` of ``mean`` and ``sqrt``; ``logsumexp`` of a
shifted ``exp``; ``prod`` of ``ReduceProd``), so PyTorch's gradients follow; the
boolean and index-valued ones are not differentiable.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> x = ms.Tensor([[1.0, 2.0], [3.0, 4.0]])
>>> ops.prod(x, 1).asnumpy().tolist(), round(ops.norm(x).item() ** 2, 4)
([2.0, 12.0], 30.0)
"""
import builtins

import numpy as np

from ..tensor import Tensor
from .array_func import _F, _constant, _host
from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["ReduceProd", "ReduceAll", "ReduceAny", "prod", "amax", "amin", "aminmax", "var",
           "std", "var_mean", "std_mean", "norm", "vector_norm", "matrix_norm", "logsumexp",
           "median", "nanmedian", "cummax", "cummin", "all", "any", "nansum", "nanmean",
           "square_sum_all", "renorm", "quantile", "mode"]


def _axes(axis, ndim):
    if axis is None or axis == ():
        return tuple(builtins.range(ndim))
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(normalize_axis(a, ndim, "reduction") for a in axis)


class ReduceProd(Primitive):
    """``ReduceProd(keep_dims=False)(x, axis=())``: the product; the gradient is
    ``g * prod / x`` (computed as products of the others where ``x`` holds zeros)."""

    def __init__(self, keep_dims=False):
        self.keep_dims = bool(keep_dims)

    def __call__(self, x, axis=()):
        return self.apply(x, axis=axis)

    def forward(self, ctx, x, axis):
        axes = _axes(axis, x.ndim)
        out = ctx.xp.prod(x, axis=axes, keepdims=True)
        ctx.save_for_backward(x, out)
        ctx.axes = axes
        return out if self.keep_dims else out.reshape([n for i, n in enumerate(out.shape)
                                                        if i not in axes])

    def backward(self, ctx, g):
        xp = ctx.xp
        x, out = ctx.saved
        g = g.reshape(out.shape)
        safe = xp.where(x == 0, 1, x)
        others = xp.prod(safe, axis=ctx.axes, keepdims=True)
        zeros = (x == 0).sum(axis=ctx.axes, keepdims=True)
        # with one zero, only that element has a non-zero gradient: the product of the others
        grad = xp.where(zeros == 0, out / safe, xp.where((zeros == 1) & (x == 0), others, 0))
        return (g * grad,)


class _BoolReduce:
    ufunc = None

    def __init__(self, keep_dims=False):
        self.keep_dims = keep_dims

    def __call__(self, x, axis=()):
        data = _host(x)
        axes = _axes(axis, data.ndim)
        return _constant(self.ufunc(data.astype(bool), axis=axes, keepdims=self.keep_dims), x)


class ReduceAll(_BoolReduce):
    ufunc = staticmethod(np.all)


class ReduceAny(_BoolReduce):
    ufunc = staticmethod(np.any)


def prod(input, axis=None, keep_dims=False):   # noqa: A002
    return ReduceProd(keep_dims)(input, () if axis is None else axis)


def all(input, axis=None, keep_dims=False):   # noqa: A001,A002
    return ReduceAll(keep_dims)(input, () if axis is None else axis)


def any(input, axis=None, keep_dims=False):   # noqa: A001,A002
    return ReduceAny(keep_dims)(input, () if axis is None else axis)


def amax(input, axis=None, keepdims=False):   # noqa: A002
    return _F().max(input, axis, keepdims)


def amin(input, axis=None, keepdims=False):   # noqa: A002
    return _F().min(input, axis, keepdims)


def aminmax(input, *, axis=0, keepdims=False):   # noqa: A002
    return amin(input, axis, keepdims), amax(input, axis, keepdims)


def mean_(x, axis=None, keep_dims=False):
    return _F().mean(x, axis, keep_dims)


def sum_(input, dim=None, keepdim=False):   # noqa: A002
    return _F().sum(input, dim, keepdim)


def nansum(input, axis=None, keepdims=False):   # noqa: A002
    clean = _F().select(_F().isnan(input), _F().zeros_like(input), input)
    return _F().sum(clean, axis, keepdims)


def nanmean(input, axis=None, keepdims=False):   # noqa: A002
    count = _F().sum(_F().logical_not(_F().isnan(input)).astype(input.dtype), axis, keepdims)
    return nansum(input, axis, keepdims) / count


def var(input, axis=None, ddof=0, keepdims=False):   # noqa: A002
    ddof = int(ddof)
    axes = _axes(axis, input.ndim)
    centred = input - _F().mean(input, axes, True)
    n = int(np.prod([input.shape[a] for a in axes]))
    return _F().sum(centred * centred, axes, keepdims) / builtins.max(n - ddof, 1)


def std(input, axis=None, ddof=0, keepdims=False):   # noqa: A002
    return _F().sqrt(var(input, axis, ddof, keepdims))


def var_mean(input, axis=None, ddof=0, keepdims=False):   # noqa: A002
    return var(input, axis, ddof, keepdims), _F().mean(input, axis, keepdims)


def std_mean(input, axis=None, ddof=0, keepdims=False):   # noqa: A002
    return std(input, axis, ddof, keepdims), _F().mean(input, axis, keepdims)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):   # noqa: A002
    """Vector or matrix norm: ``ord`` None/2 (Euclidean / Frobenius), 1, inf, -inf, 0,
    ``'fro'`` or any p > 0 for vectors."""
    x = A if dtype is None else A.astype(dtype)
    if ord in (None, "fro", 2) and (dim is None or isinstance(dim, int) or ord != 2):
        return _F().sqrt(_F().sum(x * x, dim, keepdim))
    return vector_norm(x, ord, dim, keepdim)


def vector_norm(x, ord=2, axis=None, keepdims=False, *, dtype=None):   # noqa: A002
    if ord == float("inf"):
        return _F().max(_F().abs(x), axis, keepdims)
    if ord == float("-inf"):
        return _F().min(_F().abs(x), axis, keepdims)
    if ord == 0:
        return _F().sum(_F().not_equal(x, 0).astype(x.dtype), axis, keepdims)
    if not isinstance(ord, (int, float)) or ord < 0:
        raise ValueError(f"norm: ord must be a number >= 0, inf or -inf, got {ord!r}")
    if ord == 1:
        return _F().sum(_F().abs(x), axis, keepdims)
    return _F().pow(_F().sum(_F().pow(_F().abs(x), float(ord)), axis, keepdims), 1.0 / ord)


def matrix_norm(A, ord="fro", axis=(-2, -1), keepdims=False):   # noqa: A002
    if ord != "fro":
        raise ValueError(f"matrix_norm: only ord='fro' is supported here, got {ord!r}")
    return _F().sqrt(_F().sum(A * A, axis, keepdims))


def logsumexp(input, axis, keep_dims=False):   # noqa: A002
    shift = _F().stop_gradient(_F().max(input, axis, True))
    out = _F().log(_F().sum(_F().exp(input - shift), axis, True)) + shift
    return out if keep_dims else _F().squeeze(out, axis)


def median(input, axis=-1, keepdims=False):   # noqa: A002
    """The lower median along ``axis`` and its index (as MindSpore and PyTorch return it)."""
    values, index = _F().sort(input, axis)
    k = (input.shape[axis] - 1) // 2
    pick = _F().narrow(values, axis % input.ndim, k, 1), _F().narrow(index, axis % input.ndim, k, 1)
    if keepdims:
        return pick
    return tuple(_F().squeeze(p, axis) for p in pick)


def nanmedian(input, axis=-1, keepdims=False):   # noqa: A002
    data = _host(input)
    return _constant(np.nanmedian(data, axis=axis, keepdims=keepdims).astype(data.dtype), input)


def quantile(input, q, axis=None, keepdims=False):   # noqa: A002
    data = _host(input)
    qv = _host(q) if isinstance(q, Tensor) else q
    return _constant(np.quantile(data, qv, axis=axis, keepdims=keepdims).astype(data.dtype), input)


def mode(input, axis=-1):   # noqa: A002
    data = np.moveaxis(_host(input), axis, -1)
    flat = data.reshape(-1, data.shape[-1])
    values = np.empty(len(flat), data.dtype)
    index = np.empty(len(flat), np.int64)
    for i, row in enumerate(flat):
        uniq, counts = np.unique(row, return_counts=True)
        values[i] = uniq[np.argmax(counts)]
        index[i] = np.nonzero(row == values[i])[0][-1]
    shape = data.shape[:-1]
    return _constant(values.reshape(shape), input), _constant(index.reshape(shape), input)


def _cumulative(pick, input, axis):
    data = np.moveaxis(_host(input), axis, -1)
    values = pick.accumulate(data, axis=-1)
    positions = np.broadcast_to(np.arange(data.shape[-1]), data.shape)
    # the index of the running extreme: the last position where the value equals it
    hit = np.where(data == values, positions, -1)
    index = np.maximum.accumulate(hit, axis=-1)
    return (_constant(np.moveaxis(values, -1, axis), input),
            _constant(np.moveaxis(index, -1, axis).astype(np.int64), input))


def cummax(input, axis):   # noqa: A002
    return _cumulative(np.maximum, input, axis)


def cummin(input, axis):   # noqa: A002
    return _cumulative(np.minimum, input, axis)


def square_sum_all(x, y):
    return _F().sum(x * x), _F().sum(y * y)


def renorm(input, p, axis, maxnorm):   # noqa: A002
    others = tuple(i for i in builtins.range(input.ndim) if i != axis % input.ndim)
    norms = vector_norm(input, p, others, True)
    scale = _F().select(_F().greater(norms, maxnorm), maxnorm / (norms + 1e-7),
                        _F().ones_like(norms))
    return input * _F().stop_gradient(scale)
