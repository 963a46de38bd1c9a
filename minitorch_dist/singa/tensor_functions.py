"""SINGA's ``tensor`` module functions: math, reductions, comparisons, products, random
fills and raw-tensor conversion. Each returns a facade Tensor (or fills the one given, as
SINGA's ``ret=``/``out=``/``t`` arguments do); values follow NumPy formulas.

>>> import numpy as np
>>> from minitorch_dist.singa import tensor
>>> a = tensor.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
>>> tensor.to_numpy(tensor.mult(a, a)).tolist(), tensor.to_numpy(tensor.sum(a, 0)).tolist()
([[7.0, 10.0], [15.0, 22.0]], [4.0, 6.0])
"""
import builtins

import numpy as np

from .. import random as _random
from ..tensor import Tensor as CoreTensor
from .ctensor import CTensor, raw
from .tensor_math import new_tensor

__all__ = ["from_raw_tensor", "from_raw_tensors", "product", "sizeof", "contiguous",
           "reshape", "transpose", "copy_data_to_from", "to_host", "abs", "exp", "ceil", "log",
           "sigmoid", "sign", "sqrt", "square", "tanh", "sum", "pow", "average", "softmax",
           "lt", "le", "gt", "ge", "eq", "add", "sub", "eltwise_mult", "mult", "einsum",
           "repeat", "tensordot", "div", "axpy", "bernoulli", "gaussian", "uniform",
           "add_column", "add_row", "sum_columns", "sum_rows", "concatenate", "random",
           "copy_from_numpy"]


def _arr(t, call):
    if isinstance(t, CoreTensor):
        return t.data
    if isinstance(t, CTensor):
        return t.array
    raise TypeError(f"tensor.{call}: expected a Tensor, got {type(t).__name__}")


def _out(array, like, ret=None):
    if ret is None:
        return new_tensor(np.asarray(array), like)
    ret.data[...] = array
    return ret


def from_raw_tensor(t):
    """A facade Tensor over a ``singa_wrap.Tensor`` (or an array), sharing its data."""
    if isinstance(t, CoreTensor):
        return t
    array = raw(t)
    if not hasattr(array, "shape"):
        raise TypeError(f"tensor.from_raw_tensor: expected a singa_wrap.Tensor, got "
                        f"{type(t).__name__}")
    return new_tensor(array)


def _call_singa_func(fn, *args):
    """SINGA's helper: ``fn(*args)`` (a ``singa_wrap`` function on CTensors) as a Tensor."""
    return from_raw_tensor(fn(*args))


def from_raw_tensors(tt):
    """``from_raw_tensor`` of each."""
    return [from_raw_tensor(t) for t in tt]


def product(shape):
    """The number of elements of ``shape``."""
    return int(np.prod(shape)) if len(shape) else 1


def sizeof(dtype):
    """Bytes per element of ``dtype`` (a dtype or SINGA's code 0, 1, 2)."""
    codes = {0: 4, 1: 2, 2: 4}          # kFloat32, kFloat16, kInt
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) not in codes:
            raise ValueError(f"tensor.sizeof: dtype code {dtype} is not one of {sorted(codes)}")
        return codes[int(dtype)]
    return np.dtype(dtype).itemsize


def contiguous(t):
    return t


def reshape(t, shape):
    """A new tensor with ``t``'s values in ``shape``."""
    return t.reshape(shape)


def transpose(t, axes=None):
    """A new transposed tensor."""
    return t.transpose(axes)


def copy_data_to_from(dst, src, size, dst_offset=0, src_offset=0):
    """Copy ``size`` values of ``src`` (from ``src_offset``) into ``dst`` at ``dst_offset``."""
    d, s = _arr(dst, "copy_data_to_from").reshape(-1), _arr(src, "copy_data_to_from").reshape(-1)
    d[dst_offset:dst_offset + size] = s[src_offset:src_offset + size]


def copy_from_numpy(data, np_array):
    """Copy ``np_array`` into the raw tensor ``data`` (SINGA's helper)."""
    target = raw(data)
    target.reshape(-1)[...] = np.asarray(np_array).reshape(-1)


def to_host(t):
    """A copy of ``t`` on the host."""
    return t.clone().to_host()


def _unary(name, fn):
    def f(t):
        return _out(fn(_arr(t, name)).astype(t.dtype, copy=False), t)
    f.__name__, f.__doc__ = name, f"SINGA's ``tensor.{name}(t)``: a new tensor."
    return f


abs = _unary("abs", np.abs)  # noqa: A001 - SINGA's names
exp = _unary("exp", np.exp)
ceil = _unary("ceil", np.ceil)
log = _unary("log", np.log)
sigmoid = _unary("sigmoid", lambda a: 1.0 / (1.0 + np.exp(-a)))
sign = _unary("sign", np.sign)
sqrt = _unary("sqrt", np.sqrt)
square = _unary("square", np.square)
tanh = _unary("tanh", np.tanh)


def sum(t, axis=None, out=None):  # noqa: A001
    """The sum over ``axis`` (all: a one-element tensor)."""
    a = _arr(t, "sum")
    result = a.sum(axis=axis)
    if axis is None:
        result = np.asarray([result], a.dtype)
    return _out(result, t, out)


def pow(t, x, out=None):  # noqa: A001
    """``t ** x`` (``x`` a number or a tensor)."""
    rhs = x.data if isinstance(x, CoreTensor) else x
    return _out(np.power(_arr(t, "pow"), rhs).astype(t.dtype), t, out)


def average(t, axis=None):
    """The mean over ``axis`` (SINGA: 0 averages each column), or of every value."""
    a = _arr(t, "average")
    if axis is None:
        return float(a.mean())
    return _out(a.mean(axis=axis), t)


def softmax(t, out=None):
    """Softmax of each row."""
    a = _arr(t, "softmax")
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return _out(e / e.sum(axis=-1, keepdims=True), t, out)


def _cmp(name, fn):
    def f(t, x):
        rhs = x.data if isinstance(x, CoreTensor) else x
        return _out(fn(_arr(t, name), rhs).astype(np.float32), t)
    f.__name__, f.__doc__ = name, f"SINGA's ``tensor.{name}(t, x)``: a 0/1 float32 tensor."
    return f


lt, le = _cmp("lt", np.less), _cmp("le", np.less_equal)
gt, ge = _cmp("gt", np.greater), _cmp("ge", np.greater_equal)
eq = _cmp("eq", np.equal)


def _bin(name, fn):
    def f(lhs, rhs, ret=None):
        r = rhs.data if isinstance(rhs, CoreTensor) else rhs
        return _out(fn(_arr(lhs, name), r).astype(lhs.dtype, copy=False), lhs, ret)
    f.__name__, f.__doc__ = name, f"SINGA's ``tensor.{name}(lhs, rhs, ret=None)``."
    return f


add, sub = _bin("add", np.add), _bin("sub", np.subtract)
eltwise_mult, div = _bin("eltwise_mult", np.multiply), _bin("div", np.divide)


def mult(A, B, C=None, alpha=1.0, beta=0.0):
    """``alpha * A @ B + beta * C`` (GEMV, GEMM or batched GEMM); fills ``C`` when given."""
    product_ = alpha * np.matmul(_arr(A, "mult"), _arr(B, "mult"))
    if C is None:
        return _out(product_.astype(A.dtype, copy=False), A)
    C.data[...] = product_ + beta * C.data
    return C


def einsum(ops, *args):
    """``np.einsum(ops, *args)``."""
    return _out(np.einsum(ops, *[_arr(a, "einsum") for a in args]), args[0])


def repeat(t, repeats, axis=None):
    """``np.repeat``."""
    return _out(np.repeat(_arr(t, "repeat"), repeats, axis=axis), t)


def tensordot(A, B, axes=2):
    """``np.tensordot``."""
    return _out(np.tensordot(_arr(A, "tensordot"), _arr(B, "tensordot"), axes), A)


def axpy(alpha, x, y):
    """``y += alpha * x`` in place; returns ``y``."""
    y.data += float(alpha) * _arr(x, "axpy")
    return y


def bernoulli(p, t):
    """Fill ``t`` with 0/1 draws (1 with probability ``p``); returns ``t``."""
    return t.bernoulli(p)


def gaussian(mean, std, t):
    """Fill ``t`` with N(mean, std²) draws; returns ``t``."""
    return t.gaussian(mean, std)


def uniform(low, high, t):
    """Fill ``t`` with U(low, high) draws; returns ``t``."""
    return t.uniform(low, high)


def add_column(alpha, v, beta, M):
    """Each column ``m`` of ``M`` becomes ``alpha * v + beta * m``; returns ``M``."""
    M.data[...] = alpha * _arr(v, "add_column").reshape(-1, 1) + beta * M.data
    return M


def add_row(alpha, v, beta, M):
    """Each row ``m`` of ``M`` becomes ``alpha * v + beta * m``; returns ``M``."""
    M.data[...] = alpha * _arr(v, "add_row").reshape(1, -1) + beta * M.data
    return M


def sum_columns(M):
    """The sum of the columns: a ``(rows, 1)`` tensor."""
    assert M.ndim() == 2, "M.nDim() is supposed to be 2"
    return _out(M.data.sum(axis=1, keepdims=True), M)


def sum_rows(M):
    """The sum of the rows: a ``(1, columns)`` tensor."""
    assert M.ndim() == 2, "M.nDim() is supposed to be 2"
    return _out(M.data.sum(axis=0, keepdims=True), M)


def concatenate(tensors, axis):
    """The tensors joined along ``axis``."""
    return _out(np.concatenate([_arr(t, "concatenate") for t in tensors], axis=axis),
                tensors[0])


def random(shape, device=None):
    """A float32 tensor of U(0, 1) draws on ``device`` (default: the host)."""
    from .device import to_core
    dev = to_core(device, "tensor.random")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    values = _random.rng().uniform(0, 1, shape).astype(np.float32)
    return new_tensor(values if dev.is_host else dev.copy_from(values, _host()), device=dev)


def _host():
    from ..backend import get_device
    return get_device("CPU")


del builtins
