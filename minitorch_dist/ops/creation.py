"""Tensors made from a shape, and a tensor's facts: Fill, Ones, Zeros, DType, Shape, Rank, Size.

As in MindSpore, ``Shape``/``Rank``/``Size``/``DType`` give Python values (a tuple, ints, a
dtype), and ``Fill(dtype, shape, value)``, ``Ones(shape, dtype)``, ``Zeros(shape, dtype)``
give new tensors on the default device. None of them carries a gradient.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> x = ms.Tensor([[1.0, 2.0, 3.0]])
>>> ops.Shape()(x), ops.Rank()(x), ops.Size()(x), ops.DType()(x) == ms.float32
((1, 3), 2, 3, True)
>>> ops.Fill()(ops.DType()(x), ops.Shape()(x), 1024.0).asnumpy().tolist()
[[1024.0, 1024.0, 1024.0]]
"""
import numpy as np

from ..backend import dtypes, get_device
from ..tensor import Tensor

__all__ = ["Fill", "Ones", "Zeros", "DType", "Shape", "Rank", "Size", "fill", "ones", "zeros",
           "shape", "rank", "size", "dtype", "dyn_shape"]


def _shape(owner, shape):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise TypeError(f"{owner}: shape must be a tuple of non-negative ints, got {shape!r}")
    return tuple(int(n) for n in shape)


def _tensor(owner, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{owner}: expected a Tensor, got {type(x).__name__}")
    return x


def _filled(owner, shape, dtype, value):
    dtype = dtypes.to_dtype(dtype)
    device = get_device(None)
    return Tensor._make(device.xp.full(_shape(owner, shape), value, dtype=dtype), device)


class Fill:
    """``Fill()(dtype, shape, value)``: a tensor of ``shape`` filled with ``value``."""

    def __call__(self, dtype, shape, value):
        return _filled("Fill", shape, dtype, value)


class Ones:
    """``Ones()(shape, dtype)``: a tensor of ones."""

    def __call__(self, shape, dtype=dtypes.float32):
        return _filled("Ones", shape, dtype, 1)


class Zeros:
    """``Zeros()(shape, dtype)``: a tensor of zeros."""

    def __call__(self, shape, dtype=dtypes.float32):
        return _filled("Zeros", shape, dtype, 0)


class DType:
    """``DType()(x)``: ``x``'s dtype."""

    def __call__(self, x):
        return _tensor("DType", x).dtype


class Shape:
    """``Shape()(x)``: ``x``'s shape, a tuple of ints."""

    def __call__(self, x):
        return tuple(_tensor("Shape", x).shape)


class Rank:
    """``Rank()(x)``: ``x``'s number of dimensions."""

    def __call__(self, x):
        return len(_tensor("Rank", x).shape)


class Size:
    """``Size()(x)``: ``x``'s number of elements."""

    def __call__(self, x):
        return int(np.prod(_tensor("Size", x).shape, dtype=np.int64))


def fill(dtype, shape, value):
    """A tensor of ``shape`` filled with ``value``."""
    return Fill()(dtype, shape, value)


def ones(shape, dtype=dtypes.float32):
    """A tensor of ones."""
    return Ones()(shape, dtype)


def zeros(shape, dtype=dtypes.float32):
    """A tensor of zeros."""
    return Zeros()(shape, dtype)


def shape(x):
    """``x``'s shape as a tuple of ints (MindSpore's ``ops.shape`` / ``F.shape``).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.shape(ms.Tensor([[1.0, 2.0]])) + (1, 1)
    (1, 2, 1, 1)
    """
    return Shape()(x)


def rank(x):
    """``x``'s number of dimensions."""
    return Rank()(x)


def size(x):
    """``x``'s number of elements."""
    return Size()(x)


def dtype(x):
    """``x``'s dtype (MindSpore's ``F.dtype``)."""
    return DType()(x)


def dyn_shape(x):
    """``x``'s shape as an int64 tensor (MindSpore's ``ops.dyn_shape``)."""
    return Tensor(np.array(Shape()(x), dtype=np.int64))
