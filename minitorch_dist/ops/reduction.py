"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, Argmax and Argmin.

The classes follow MindSpore: ``ops.ReduceMean(keep_dims=True)(x, axis)``, where ``axis``
is an int, a tuple of ints, or ``()``/``None`` for every axis. The functional forms follow
NumPy: ``ops.sum(x, axis=None, keepdims=False)``. The backward of sum and mean is a
read-only broadcast view of the (small) output gradient, not an input-sized copy: gradients
are never updated in place by their consumers, and autograd copies a read-only gradient
before it becomes a leaf's ``.grad``.
"""
from ..backend import dtypes
from .axes import normalize_axes, normalize_axis
from .primitive import Primitive

__all__ = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "Argmax", "Argmin",
           "sum", "mean", "max", "min", "argmax", "argmin"]


def kept_shape(shape, axes):
    """``shape`` with each reduced axis set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class _Reduce(Primitive):
    """Shared call convention: ``op(x, axis=())`` with ``keep_dims`` fixed at construction."""

    def __init__(self, keep_dims=False):
        if not isinstance(keep_dims, bool):
            raise TypeError(f"{type(self).__name__}: keep_dims must be a bool, got {keep_dims!r}")
        self.keep_dims = keep_dims

    def __call__(self, x, axis=()):
        return self.apply(x, axis=axis, keepdims=self.keep_dims)

    def forward(self, ctx, x, axis=(), keepdims=False):
        axes = normalize_axes(axis, x.ndim, self.name, x.shape)
        ctx.in_shape = x.shape
        ctx.axes = axes
        ctx.kept = kept_shape(x.shape, axes)
        return self.reduce(ctx, x, axes, keepdims)


class ReduceSum(_Reduce):
    """Sum over ``axis`` (all axes for ``()``), keeping them as size 1 with ``keep_dims``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.ReduceSum(keep_dims=True)(ms.Tensor([[1.0, 2.0], [3.0, 4.0]]), 1).asnumpy().tolist()
    [[3.0], [7.0]]
    """

    def reduce(self, ctx, x, axes, keepdims):
        return ctx.xp.sum(x, axis=axes, keepdims=keepdims)

    def backward(self, ctx, g):
        return (ctx.xp.broadcast_to(g.reshape(ctx.kept), ctx.in_shape),)


class ReduceMean(_Reduce):
    """Mean over ``axis`` (all axes for ``()``), keeping them as size 1 with ``keep_dims``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.ReduceMean()(ms.Tensor([[1.0, 2.0], [3.0, 4.0]])).asnumpy().tolist()
    2.5
    """

    def reduce(self, ctx, x, axes, keepdims):
        count = 1
        for a in axes:
            count *= x.shape[a]
        ctx.count = count
        return ctx.xp.mean(x, axis=axes, keepdims=keepdims)

    def backward(self, ctx, g):
        share = g.reshape(ctx.kept) * (1.0 / (ctx.count or 1))
        return (ctx.xp.broadcast_to(share, ctx.in_shape),)


class _Extreme(_Reduce):
    """Max/min: the gradient goes to the elements equal to the result, split among ties."""

    def reduce(self, ctx, x, axes, keepdims):
        best = self.pick(x, axis=axes, keepdims=True)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, best)
        return best if keepdims else best.reshape([n for i, n in enumerate(x.shape) if i not in axes])

    def backward(self, ctx, g):
        x, best = ctx.saved
        xp = ctx.xp
        gx = xp.empty(x.shape, g.dtype)
        xp.equal(x, best, out=gx)                       # 1 where x attains the extreme
        share = gx.sum(axis=ctx.axes, keepdims=True)   # how many elements tie for the extreme
        gx *= g.reshape(ctx.kept) / share
        return (gx,)


class ReduceMax(_Extreme):
    """Maximum over ``axis``; tied maxima share the gradient equally."""

    @staticmethod
    def pick(x, **kwargs):
        return x.max(**kwargs)


class ReduceMin(_Extreme):
    """Minimum over ``axis``; tied minima share the gradient equally."""

    @staticmethod
    def pick(x, **kwargs):
        return x.min(**kwargs)


class _ArgExtreme(Primitive):
    """Index of the extreme value along one axis (MindSpore: ``ops.Argmax(axis)(x)``)."""

    differentiable = False

    def __init__(self, axis=-1, output_type=dtypes.int32):
        if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool)):
            raise TypeError(f"{type(self).__name__}: axis must be an int or None, got {axis!r}")
        self.axis = axis
        self.output_type = dtypes.to_dtype(output_type)
        if self.output_type.kind not in "iu":
            raise TypeError(f"{type(self).__name__}: output_type must be an integer dtype, "
                            f"got {self.output_type}")

    def __call__(self, x):
        return self.apply(x, axis=self.axis, keepdims=False, dtype=self.output_type)

    def forward(self, ctx, x, axis=-1, keepdims=False, dtype=dtypes.int64):
        if axis is not None:
            if x.ndim == 0 and axis in (0, -1):
                axis = None
            else:
                normalize_axis(axis, x.ndim, self.name, x.shape)
        if x.size == 0:
            raise ValueError(f"{self.name}: cannot take the index of an extreme of an empty tensor "
                             f"(shape {x.shape})")
        out = self.pick(x, axis=axis, keepdims=keepdims)
        return out if out.dtype == dtype else out.astype(dtype)


class Argmax(_ArgExtreme):
    """Index of the largest value along ``axis`` (first one on ties), as ``output_type``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Argmax()(ms.Tensor([[1.0, 5.0, 2.0]])).asnumpy().tolist()
    [1]
    """

    @staticmethod
    def pick(x, **kwargs):
        return x.argmax(**kwargs)


class Argmin(_ArgExtreme):
    """Index of the smallest value along ``axis`` (first one on ties), as ``output_type``."""

    @staticmethod
    def pick(x, **kwargs):
        return x.argmin(**kwargs)


# Functional forms share one instance per primitive, so they appear once in the placement report.
_sum, _mean, _max, _min = ReduceSum(), ReduceMean(), ReduceMax(), ReduceMin()
_argmax, _argmin = Argmax(None, dtypes.int64), Argmin(None, dtypes.int64)


def sum(x, axis=None, keepdims=False):  # noqa: A001 - mirrors NumPy's name
    """Sum over ``axis`` (None: all axes).

    >>> import minitorch_dist as ms
    >>> ms.ops.sum(ms.Tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0).asnumpy().tolist()
    [4.0, 6.0]
    """
    return _sum.apply(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (None: all axes)."""
    return _mean.apply(x, axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001 - mirrors NumPy's name
    """Maximum over ``axis`` (None: all axes); ties share the gradient."""
    return _max.apply(x, axis=axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001 - mirrors NumPy's name
    """Minimum over ``axis`` (None: all axes); ties share the gradient."""
    return _min.apply(x, axis=axis, keepdims=keepdims)


def argmax(x, axis=None, keepdims=False):
    """Index of the maximum (int64); ``axis=None`` indexes the flattened tensor, as in NumPy."""
    return _argmax.apply(x, axis=axis, keepdims=keepdims, dtype=dtypes.int64)


def argmin(x, axis=None, keepdims=False):
    """Index of the minimum (int64); ``axis=None`` indexes the flattened tensor, as in NumPy."""
    return _argmin.apply(x, axis=axis, keepdims=keepdims, dtype=dtypes.int64)
