"""Indexing primitives: Python/NumPy indexing (``x[...]``), Slice, StridedSlice, Gather, OneHot.

An index is a setting, not a differentiable input: it travels to ``forward`` as a keyword
attribute, and index arrays given as Tensors are read as plain arrays on the primitive's
device. Backward scatters the output gradient into zeros of the input's shape; integer
array indices may repeat, so they scatter with ``xp.add.at`` (repeats add up).
"""
import builtins
import numbers

import numpy as np

from ..backend import dtypes, host
from ..row_tensor import RowTensor
from ..tensor import Tensor
from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["GetItem", "Slice", "StridedSlice", "Gather", "OneHot",
           "getitem", "slice", "strided_slice", "gather", "one_hot"]

_slice = builtins.slice  # this module defines a functional ``slice``
_PLAIN = (int, type(None), type(Ellipsis))


def _is_basic(item):
    """True for the common index items NumPy takes as they are (the fast path)."""
    kind = type(item)
    if kind is _slice:
        return not (isinstance(item.start, Tensor) or isinstance(item.stop, Tensor)
                    or isinstance(item.step, Tensor))
    return kind in _PLAIN


def _on_device(array, device):
    """An index array (NumPy, CuPy or Tensor data) on ``device``."""
    if isinstance(array, Tensor):
        return array.data if array.device is device else device.copy_from(array.data, array.device)
    if device.xp is np or not isinstance(array, np.ndarray):
        return device.xp.asarray(array)
    return device.copy_from(array, host())


def _scalar(value):
    """A slice bound or single index given as a one-element Tensor, as an int."""
    return int(value.item()) if isinstance(value, Tensor) else value


def _prepare_index(index, device):
    """``index`` as a tuple NumPy/CuPy understands on ``device``; also whether it holds integer
    arrays (whose entries may repeat, so backward must accumulate)."""
    if not isinstance(index, tuple):
        index = (index,)
    if all(_is_basic(item) for item in index):
        return index, False
    items, accumulate = [], False
    for item in index:
        if isinstance(item, _slice):
            item = _slice(_scalar(item.start), _scalar(item.stop), _scalar(item.step))
        elif isinstance(item, (bool, np.bool_)) or not isinstance(item, (numbers.Integral, type(None),
                                                                          type(Ellipsis))):
            is_tensor = isinstance(item, Tensor)
            item = _on_device(item, device)
            if item.size == 0 and item.dtype.kind == "f" and not is_tensor:
                item = item.astype(dtypes.int64)   # x[[]] selects nothing
            if item.dtype.kind not in "iub":
                raise IndexError(f"index arrays must hold integers or booleans, got {item.dtype}")
            accumulate = accumulate or (item.dtype.kind in "iu" and item.ndim > 0)
        items.append(item)
    return tuple(items), accumulate


class GetItem(Primitive):
    """``x[index]`` with NumPy's rules: ints, slices (any step), None, Ellipsis, boolean masks
    and integer arrays, lists or Tensors (advanced indexing).

    >>> import minitorch_dist as ms
    >>> x = ms.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> x[:, ::-2].asnumpy().tolist()
    [[3.0, 1.0], [6.0, 4.0]]
    >>> x[ms.Tensor([1, 1]), 0].asnumpy().tolist()
    [4.0, 4.0]
    """

    def __call__(self, x, index):
        return self.apply(x, index=index)

    def forward(self, ctx, x, index):
        index, accumulate = _prepare_index(index, ctx.device)
        return self._take(ctx, x, index, accumulate)

    @staticmethod
    def _take(ctx, x, index, accumulate):
        out = x[index]
        ctx.in_shape = x.shape
        ctx.index = index
        ctx.accumulate = accumulate
        return out

    def backward(self, ctx, g):
        xp = ctx.xp
        grad = xp.zeros(ctx.in_shape, g.dtype)
        if ctx.accumulate:
            xp.add.at(grad, ctx.index, g)
        else:
            grad[ctx.index] = g   # basic indices and masks select each element at most once
        return (grad,)


class Slice(GetItem):
    """MindSpore's ``ops.Slice()(x, begin, size)``: the block starting at ``begin`` with
    ``size`` elements per axis (-1: up to the end).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> ops.Slice()(x, (0, 1), (-1, 2)).asnumpy().tolist()
    [[2.0, 3.0], [5.0, 6.0]]
    """

    def __call__(self, x, begin, size):
        return self.apply(x, begin=tuple(int(b) for b in begin), size=tuple(int(s) for s in size))

    def forward(self, ctx, x, begin, size):
        if len(begin) != x.ndim or len(size) != x.ndim:
            raise ValueError(f"{self.name}: begin {begin} and size {size} need one entry per axis of "
                             f"the input of shape {x.shape}")
        index = []
        for b, s, n in zip(begin, size, x.shape):
            stop = n if s == -1 else b + s
            if not 0 <= b <= n or s < -1 or stop > n:
                raise ValueError(f"{self.name}: begin {begin} with size {size} is outside the input of "
                                 f"shape {x.shape}")
            index.append(_slice(b, stop))
        return self._take(ctx, x, tuple(index), False)


class StridedSlice(GetItem):
    """MindSpore's ``ops.StridedSlice(masks...)(x, begin, end, strides)``.

    Entry ``i`` of ``begin``/``end``/``strides`` makes ``slice(begin[i], end[i], strides[i])``
    unless bit ``i`` of a mask says otherwise: ``begin_mask``/``end_mask`` ignore that bound,
    ``ellipsis_mask`` puts ``...``, ``new_axis_mask`` a new axis, ``shrink_axis_mask`` the
    single index ``begin[i]``. Axes past the entries are taken whole.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> ops.StridedSlice(shrink_axis_mask=1)(x, (1, 0), (2, 3), (1, 2)).asnumpy().tolist()
    [4.0, 6.0]
    """

    def __init__(self, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
        self.masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)

    def __call__(self, x, begin, end, strides):
        return self.apply(x, begin=tuple(begin), end=tuple(end), strides=tuple(strides))

    def forward(self, ctx, x, begin, end, strides):
        if not len(begin) == len(end) == len(strides):
            raise ValueError(f"{self.name}: begin {begin}, end {end} and strides {strides} must have "
                             "the same length")
        if 0 in strides:
            raise ValueError(f"{self.name}: strides {strides} must not contain 0")
        begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = self.masks
        index = []
        for i, (b, e, s) in enumerate(zip(begin, end, strides)):
            bit = 1 << i
            if ellipsis_mask & bit:
                index.append(Ellipsis)
            elif new_axis_mask & bit:
                index.append(None)
            elif shrink_mask & bit:
                index.append(int(b))
            else:
                index.append(_slice(None if begin_mask & bit else int(b), None if end_mask & bit else int(e),
                                    int(s)))
        return self._take(ctx, x, tuple(index), False)


def _as_index_array(indices):
    """Python ints and lists as an int64 array (dispatch would give a bare int the params' dtype)."""
    if isinstance(indices, (numbers.Integral, list, tuple)):
        return np.asarray(indices, dtype=dtypes.int64)
    return indices


class Gather(Primitive):
    """Pick slices of ``input_params`` along ``axis`` at ``input_indices`` (any shape):
    the output shape is ``params.shape[:axis] + indices.shape + params.shape[axis+1:]``.

    Indices may be negative (counted from the end) down to ``-size``; others out of range
    raise IndexError. With ``sparse_grad=True`` and ``axis=0`` the gradient of the params is
    a :class:`RowTensor` holding only the gathered rows (for sparse optimizer updates).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> table = ms.Tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    >>> ops.Gather()(table, ms.Tensor([2, 0]), 0).asnumpy().tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """

    settable_attrs = ("manual_split",)     # see EmbeddingLookup
    manual_split = None

    def __init__(self, batch_dims=0, *, sparse_grad=False):
        if batch_dims != 0:
            raise ValueError(f"Gather: batch_dims={batch_dims} is not supported (only 0)")
        self.sparse_grad = bool(sparse_grad)

    def __call__(self, input_params, input_indices, axis=0):
        return self.apply(input_params, _as_index_array(input_indices), axis=int(axis))

    def forward(self, ctx, params, indices, axis):
        if indices.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: indices must be integers, got {indices.dtype}")
        if params.ndim == 0:
            raise ValueError(f"{self.name}: input_params must have at least one axis, got a scalar")
        axis = normalize_axis(axis, params.ndim, self.name, params.shape)
        n = params.shape[axis]
        negative = False
        if indices.size:
            low, high = int(indices.min()), int(indices.max())
            if low < -n or high >= n:
                bad = high if high >= n else low
                raise IndexError(f"{self.name}: index {bad} is out of range for axis {axis} of size {n} "
                                 f"(input_params shape {params.shape})")
            negative = low < 0
        ctx.save_for_backward(indices)
        ctx.axis, ctx.in_shape, ctx.negative = axis, params.shape, negative
        return ctx.xp.take(params, indices, axis=axis)

    def backward(self, ctx, g):
        if not ctx.needs_input_grad[0]:
            return None, None
        xp = ctx.xp
        (indices,), axis, shape = ctx.saved, ctx.axis, ctx.in_shape
        if self.sparse_grad and axis == 0:
            # Copies (of the touched rows only): optimizers and reducers may update a gradient in
            # place, and these would otherwise alias the caller's ids and the incoming gradient.
            rows = indices.reshape(-1)
            rows = xp.where(rows < 0, rows + shape[0], rows) if ctx.negative else rows.copy()
            values = g.reshape((rows.size,) + shape[1:]).copy()
            return RowTensor(Tensor._make(rows, ctx.device), Tensor._make(values, ctx.device), shape), None
        grad = xp.zeros(shape, g.dtype)
        # A single array index keeps its axes in place, so grad[..., indices, ...] has g's shape.
        xp.add.at(grad, (_slice(None),) * axis + (indices,), g)
        return grad, None


class OneHot(Primitive):
    """MindSpore's ``ops.OneHot(axis=-1)(indices, depth, on_value, off_value)``: a new axis of
    length ``depth`` holding ``on_value`` at each index and ``off_value`` elsewhere (indices
    outside ``[0, depth)`` give an all-off row). Not differentiable.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.OneHot()(ms.Tensor([0, 2]), 3, 1.0, 0.0).asnumpy().tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """

    differentiable = False

    def __init__(self, axis=-1):
        self.axis = int(axis)

    def __call__(self, indices, depth, on_value=1.0, off_value=0.0):
        return self.apply(_as_index_array(indices), on_value, off_value, depth=int(depth), axis=self.axis)

    def forward(self, ctx, indices, on_value, off_value, depth, axis):
        if indices.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: indices must be integers, got {indices.dtype}")
        if depth < 0:
            raise ValueError(f"{self.name}: depth must be non-negative, got {depth}")
        if on_value.size != 1 or off_value.size != 1:
            raise ValueError(f"{self.name}: on_value and off_value must be scalars, got shapes "
                             f"{on_value.shape} and {off_value.shape}")
        if not -indices.ndim - 1 <= axis <= indices.ndim:
            raise ValueError(f"{self.name}: axis {axis} is out of range for indices of shape {indices.shape}")
        xp = ctx.xp
        hot = indices[..., None] == xp.arange(depth)
        out = xp.where(hot, on_value.reshape(()), off_value.reshape(())).astype(on_value.dtype, copy=False)
        if axis not in (-1, indices.ndim):
            out = xp.moveaxis(out, -1, axis)
        return out


# Functional forms share one instance per primitive, so they appear once in the placement report.
_getitem, _slice_op, _gather, _one_hot = GetItem(), Slice(), Gather(), OneHot()
_sparse_gather = Gather(sparse_grad=True)
_strided = {}


def getitem(x, index):
    """``x[index]`` (what ``Tensor.__getitem__`` calls); differentiable wrt ``x``."""
    return _getitem.apply(x, index=index)


def slice(x, begin, size):  # noqa: A001 - MindSpore's name
    """The block of ``x`` starting at ``begin`` with ``size`` elements per axis (-1: to the end)."""
    return _slice_op(x, begin, size)


def strided_slice(x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                  shrink_axis_mask=0):
    """Functional :class:`StridedSlice`."""
    masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    if masks not in _strided:
        _strided[masks] = StridedSlice(*masks)
    return _strided[masks](x, begin, end, strides)


def gather(params, indices, axis=0, sparse_grad=False):
    """Slices of ``params`` along ``axis`` at ``indices``; see :class:`Gather`."""
    return (_sparse_gather if sparse_grad else _gather)(params, indices, axis)


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype=dtypes.float32, axis=-1):
    """One-hot encoding of integer ``indices`` along a new last axis (or ``axis``), of ``dtype``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.one_hot(ms.Tensor([1]), 2).asnumpy().tolist()
    [[0.0, 1.0]]
    """
    dtype = dtypes.to_dtype(dtype)
    on = on_value if isinstance(on_value, Tensor) else np.asarray(on_value, dtype=dtype)
    off = off_value if isinstance(off_value, Tensor) else np.asarray(off_value, dtype=dtype)
    return _one_hot.apply(_as_index_array(indices), on, off, depth=int(depth), axis=int(axis))
