"""MindSpore 1.x names that model code still uses: ``RealDiv``, ``TensorAdd`` and the scalar and
tuple conversions (``ScalarToArray``, ``ScalarToTensor``, ``TupleToArray``, ``ScalarCast``).

``RealDiv`` is ``Div`` and ``TensorAdd`` is ``Add`` (MindSpore renamed them in 1.x/2.x);
the conversions turn Python numbers and tuples into tensors, as the r1.x samples expect.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.RealDiv()(ms.Tensor([3.0]), ms.Tensor([2.0])).asnumpy().tolist()
[1.5]
>>> ops.scalar_to_array(2.0).shape, ops.tuple_to_array((1, 2, 3)).dtype
((), dtype('int64'))
"""
import numpy as np

from ..backend import dtypes
from ..tensor import Tensor
from .arithmetic import Add, Div

__all__ = ["RealDiv", "TensorAdd", "ScalarToArray", "ScalarToTensor", "TupleToArray", "ScalarCast",
           "scalar_to_array", "scalar_to_tensor", "tuple_to_array", "scalar_cast"]


class RealDiv(Div):
    """``x / y`` elementwise: MindSpore 1.x's name of ``Div``."""


class TensorAdd(Add):
    """``x + y`` elementwise: MindSpore 1.x's name of ``Add``."""


def _number(owner, value):
    if isinstance(value, Tensor) and value.size == 1:
        return value.item()
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return value
    raise TypeError(f"{owner}: expected a Python number, got {type(value).__name__}")


class ScalarToArray:
    """``ScalarToArray()(x)``: a 0-d tensor holding the number ``x`` (float32 for floats)."""

    def __call__(self, x):
        value = _number("ScalarToArray", x)
        dtype = dtypes.float32 if isinstance(value, float) else None
        return Tensor(np.asarray(value, dtype=dtype))


class ScalarToTensor:
    """``ScalarToTensor()(x, dtype=ms.float32)``: a 0-d tensor of ``dtype`` holding ``x``."""

    def __call__(self, x, dtype=dtypes.float32):
        return Tensor(np.asarray(_number("ScalarToTensor", x)), dtype=dtype)


class TupleToArray:
    """``TupleToArray()((1, 2, 3))``: a 1-d tensor of the numbers (int64, or float32 if any
    is a float)."""

    def __call__(self, x):
        if not isinstance(x, (tuple, list)) or not x:
            raise TypeError(f"TupleToArray: expected a non-empty tuple of numbers, got {x!r}")
        values = [_number("TupleToArray", v) for v in x]
        return Tensor(values)


class ScalarCast:
    """``ScalarCast()(x, mstype.int32)``: the Python number ``x`` as ``int``, ``float`` or
    ``bool``, following the dtype's kind."""

    def __call__(self, x, dtype):
        value = _number("ScalarCast", x)
        kind = dtypes.to_dtype(dtype).kind
        return bool(value) if kind == "b" else float(value) if kind == "f" else int(value)


def scalar_to_array(x):
    """A 0-d tensor holding the number ``x``."""
    return ScalarToArray()(x)


def scalar_to_tensor(x, dtype=dtypes.float32):
    """A 0-d tensor of ``dtype`` holding the number ``x``."""
    return ScalarToTensor()(x, dtype)


def tuple_to_array(x):
    """A 1-d tensor of the numbers in the tuple ``x``."""
    return TupleToArray()(x)


def scalar_cast(x, dtype):
    """The Python number ``x`` cast to ``dtype``'s kind."""
    return ScalarCast()(x, dtype)
