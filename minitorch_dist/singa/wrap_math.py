"""The math functions of SINGA's ``singa_wrap`` (its SWIG module) on ``CTensor``\\s.

SINGA's tests and its Python layer call these on ``t.data``: ``singa.SoftMax(ct, axis)``,
``singa.Pow(a, b)``, ``singa.__add__(a, b)``, ``singa.Ceil(ct)``, ``singa.ConcatOn(vec,
axis)``, ... Each takes CTensors (or ``t.data`` arrays), computes with NumPy on the host and
returns a new ``CTensor``; ``tensor.from_raw_tensor`` turns the result into a Python tensor.
Arithmetic broadcasts as SINGA's does (NumPy's rules). Comparisons give float32 0/1, as
SINGA's ``LTFloat`` kernels do.

>>> import numpy as np
>>> from minitorch_dist.singa import singa_wrap as singa
>>> a = singa.Tensor([2, 2]); a.CopyFloatDataFromHostPtr([1.0, 2.0, 3.0, 4.0])
>>> singa.__add__(a, a).GetFloatValue(4).tolist(), singa.SoftMax(a, 0).shape()
([2.0, 4.0, 6.0, 8.0], (2, 2))
"""
import math

import numpy as np

from .ctensor import CTensor, raw

__all__ = ["VecTensor", "Exp", "Log", "Sqrt", "Abs", "Sign", "Tanh", "Sigmoid", "ReLU",
           "Square", "Erf", "Ceil", "Floor", "Round", "RoundE", "SoftMax", "Pow", "__add__",
           "__sub__", "__mul__", "__div__", "__truediv__", "__lt__", "__le__", "__gt__",
           "__ge__", "__eq__", "AddFloat", "SubFloat", "MultFloat", "DivFloat", "PowFloat",
           "LTFloat", "LEFloat", "GTFloat", "GEFloat", "EQFloat", "Reshape", "Transpose",
           "DefaultTranspose", "ConcatOn", "SliceOn", "SumAll", "Mult", "Axpy", "RowMax",
           "CopyDataToFrom", "Bernoulli", "host"]


class VecTensor(list):
    """SINGA's ``std::vector<Tensor>``: a list of CTensors (``append`` them)."""


def host(x, call):
    """The host NumPy array behind ``x`` (a CTensor, ``t.data`` or an array)."""
    array = raw(x)
    if hasattr(array, "get"):       # CuPy
        array = array.get()
    if not isinstance(array, (np.ndarray, np.generic)):
        raise TypeError(f"singa_wrap.{call}: expected a singa_wrap.Tensor (or t.data), got "
                        f"{type(x).__name__}")
    return np.asarray(array)


def _result(array, like):
    """A CTensor of ``array`` in the (float) dtype of ``like``."""
    array = np.asarray(array)
    if like.dtype.kind == "f" and array.dtype != like.dtype:
        array = array.astype(like.dtype)
    return CTensor(array=np.ascontiguousarray(array))


def _unary(name, fn):
    def call(x):
        a = host(x, name)
        return _result(fn(a), a)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"SINGA's ``singa_wrap.{name}(t)``: element-wise, a new CTensor."
    return call


def _round_half_away(a):
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


Exp = _unary("Exp", np.exp)
Log = _unary("Log", np.log)
Sqrt = _unary("Sqrt", np.sqrt)
Abs = _unary("Abs", np.abs)
Sign = _unary("Sign", np.sign)
Tanh = _unary("Tanh", np.tanh)
Sigmoid = _unary("Sigmoid", lambda a: 1.0 / (1.0 + np.exp(-a)))
ReLU = _unary("ReLU", lambda a: np.maximum(a, 0))
Square = _unary("Square", np.square)
Erf = _unary("Erf", lambda a: np.vectorize(math.erf, otypes=[np.float64])(a))
Ceil = _unary("Ceil", np.ceil)
Floor = _unary("Floor", np.floor)
Round = _unary("Round", _round_half_away)        # SINGA's Round: half away from zero
RoundE = _unary("RoundE", np.round)              # SINGA's RoundE: half to even


def SoftMax(x, axis=1):
    """Softmax of the 2-d view ``(prod(shape[:axis]), prod(shape[axis:]))`` along its
    second axis, as SINGA's kernel computes it; the result keeps ``x``'s shape."""
    a = host(x, "SoftMax")
    axis = int(axis) + a.ndim if int(axis) < 0 else int(axis)
    if not 0 <= axis <= a.ndim:
        raise ValueError(f"singa_wrap.SoftMax: axis {axis} is out of range for {a.ndim} axes")
    rows = int(np.prod(a.shape[:axis], dtype=np.int64))
    flat = a.reshape(rows, -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return _result((e / e.sum(axis=1, keepdims=True)).reshape(a.shape), a)


def _binary(name, fn, compare=False):
    def call(a, b):
        x, y = host(a, name), host(b, name)
        out = fn(x, y)
        return CTensor(array=np.ascontiguousarray(out.astype(np.float32))) if compare \
            else _result(out, x)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"SINGA's ``singa_wrap.{name}(a, b)`` with broadcasting: a new CTensor."
    return call


Pow = _binary("Pow", np.power)
__add__ = _binary("__add__", np.add)
__sub__ = _binary("__sub__", np.subtract)
__mul__ = _binary("__mul__", np.multiply)
__div__ = __truediv__ = _binary("__div__", np.divide)
__lt__ = _binary("__lt__", np.less, True)
__le__ = _binary("__le__", np.less_equal, True)
__gt__ = _binary("__gt__", np.greater, True)
__ge__ = _binary("__ge__", np.greater_equal, True)
__eq__ = _binary("__eq__", np.equal, True)


def _with_float(name, fn, compare=False):
    binary = _binary(name, fn, compare)

    def call(x, value):
        return binary(x, np.asarray(value, host(x, name).dtype))
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"SINGA's ``singa_wrap.{name}(t, x)`` with a Python number ``x``."
    return call


AddFloat = _with_float("AddFloat", np.add)
SubFloat = _with_float("SubFloat", np.subtract)
MultFloat = _with_float("MultFloat", np.multiply)
DivFloat = _with_float("DivFloat", np.divide)
PowFloat = _with_float("PowFloat", np.power)
LTFloat = _with_float("LTFloat", np.less, True)
LEFloat = _with_float("LEFloat", np.less_equal, True)
GTFloat = _with_float("GTFloat", np.greater, True)
GEFloat = _with_float("GEFloat", np.greater_equal, True)
EQFloat = _with_float("EQFloat", np.equal, True)


def Reshape(x, shape):
    """A CTensor with the values of ``x`` in ``shape``."""
    return CTensor(array=host(x, "Reshape").reshape(tuple(int(n) for n in shape)).copy())


def Transpose(x, axes=None):
    """The axes of ``x`` permuted (reversed when ``axes`` is None)."""
    a = host(x, "Transpose")
    return CTensor(array=np.ascontiguousarray(np.transpose(a, None if axes is None else
                                                           tuple(int(i) for i in axes))))


def DefaultTranspose(x):
    return Transpose(x)


def ConcatOn(tensors, axis):
    """The CTensors of ``tensors`` (a VecTensor or list) joined along ``axis``."""
    return CTensor(array=np.concatenate([host(t, "ConcatOn") for t in tensors], int(axis)))


def SliceOn(x, start, end, axis):
    """``x[start:end]`` along ``axis``."""
    a = host(x, "SliceOn")
    index = [slice(None)] * a.ndim
    index[int(axis)] = slice(int(start), int(end))
    return CTensor(array=a[tuple(index)].copy())


def SumAll(x):
    """The sum of all values, as a 1-element CTensor."""
    a = host(x, "SumAll")
    return _result(np.asarray([a.sum()]), a)


def Mult(a, b):
    """Matrix product (SINGA's ``Mult`` of two 2-d CTensors)."""
    x, y = host(a, "Mult"), host(b, "Mult")
    return _result(np.matmul(x, y), x)


def RowMax(x):
    """The maximum of each row of a 2-d CTensor."""
    a = host(x, "RowMax")
    return _result(a.max(axis=1), a)


def Axpy(alpha, x, y):
    """``y += alpha * x``, in place on ``y`` (a CTensor)."""
    target = raw(y)
    target += (float(alpha) * host(x, "Axpy")).astype(target.dtype)


def CopyDataToFrom(dst, src, num, dst_offset=0, src_offset=0):
    """Copy ``num`` values of ``src`` (from ``src_offset``) into ``dst`` at ``dst_offset``."""
    values = host(src, "CopyDataToFrom").reshape(-1)[int(src_offset):int(src_offset) + int(num)]
    as_ctensor = dst if isinstance(dst, CTensor) else CTensor(array=raw(dst))
    as_ctensor.CopyFloatDataFromHostPtr(values, int(num), int(dst_offset))


def Bernoulli(p, x):
    """Fill ``x`` in place with 1 (probability ``p``) or 0 (the seeded stream)."""
    from .. import random as _random
    target = raw(x)
    target[...] = (_random.rng().random(target.shape) < float(p)).astype(target.dtype)
