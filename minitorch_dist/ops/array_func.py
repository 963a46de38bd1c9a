"""MindSpore's tensor-building and array functions: ``ones_like``, ``full``, ``arange``,
``linspace``, ``eye``, ``cat``, ``flip``, ``roll``, ``tril``, ``gather_elements``, ``sort``, ...

Most are compositions of existing primitives, so their gradients come from those; the few
that need their own backward (``GatherD``, ``Sort``, ``CumProd``, ``UnsortedSegmentSum``,
``RepeatElements``) are small primitives here. Index-valued results are not differentiable.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.ones_like(ms.Tensor([1, 0])).asnumpy().tolist(), ops.arange(3).asnumpy().tolist()
([1, 1], [0, 1, 2])
>>> ops.tril(ms.Tensor([[1.0, 2.0], [3.0, 4.0]])).asnumpy().tolist()
[[1.0, 0.0], [3.0, 4.0]]
"""
import builtins
import sys

import numpy as np

from ..backend import dtypes, get_device
from ..tensor import Tensor
from .axes import normalize_axis

__all__ = ['index_select', 'Eye', 'Identity', 'LinSpace', 'OnesLike', 'Range', 'ZerosLike', 'arange', 'atleast_1d', 'atleast_2d', 'atleast_3d', 'broadcast_tensors', 'cat', 'chunk', 'column_stack', 'dstack', 'expand', 'eye', 'fills', 'flip', 'full', 'full_like', 'hstack', 'identity', 'linspace', 'meshgrid', 'moveaxis', 'movedim', 'narrow', 'ones_like', 'permute', 'range', 'ravel', 'reverse', 'roll', 'rot90', 'swapaxes', 'tensor_split', 'unbind', 'unsqueeze', 'unstack', 'vstack', 'zeros_like']


def _F():
    """``ops.functional``, read when called: it imports this module (no import circle)."""
    return sys.modules[__package__ + ".functional"]


def _tensor(x, name="input"):
    if not isinstance(x, Tensor):
        if isinstance(x, (list, tuple, np.ndarray, int, float, bool)):
            return Tensor(x)
        raise TypeError(f"{name} must be a Tensor, got {type(x).__name__}")
    return x


def _constant(array, like=None):
    device = like.device if isinstance(like, Tensor) else get_device(None)
    xp = device.xp
    return Tensor._make(xp.asarray(array), device)


def _host(x):
    return _tensor(x).asnumpy()


# ---- building ---------------------------------------------------------------------------
def ones_like(input, dtype=None):   # noqa: A002 (MindSpore's argument name)
    """A tensor of ones with ``input``'s shape and (unless given) dtype."""
    x = _tensor(input)
    return _constant(np.ones(x.shape, dtypes.to_dtype(dtype) if dtype else x.dtype), x)


def zeros_like(input, dtype=None):   # noqa: A002
    """A tensor of zeros with ``input``'s shape and (unless given) dtype."""
    x = _tensor(input)
    return _constant(np.zeros(x.shape, dtypes.to_dtype(dtype) if dtype else x.dtype), x)


def full(size, fill_value, dtype=None):
    """A tensor of ``size`` filled with ``fill_value``."""
    size = (size,) if isinstance(size, int) else tuple(size)
    if any(n < 0 for n in size):
        raise ValueError(f"full: size must be non-negative, got {size}")
    value = fill_value.item() if isinstance(fill_value, Tensor) else fill_value
    dtype = dtypes.to_dtype(dtype) if dtype else (dtypes.float32 if isinstance(value, float)
                                                  else np.asarray(value).dtype)
    return _constant(np.full(size, value, dtype))


def full_like(input, fill_value, dtype=None):   # noqa: A002
    x = _tensor(input)
    return full(x.shape, fill_value, dtype or x.dtype)


def fills(x, value):
    """``x``'s shape and dtype, filled with ``value``."""
    return full_like(x, value)


def arange(start=0, end=None, step=1, dtype=None):
    """``start, start + step, ... < end`` (int64 for ints, float32 for floats)."""
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise ValueError("arange: step must not be zero")
    values = np.arange(start, end, step)
    if dtype is not None:
        values = values.astype(dtypes.to_dtype(dtype))
    elif values.dtype == np.float64:
        values = values.astype(dtypes.float32)
    return _constant(values)


def range(start, end, step):   # noqa: A001 (MindSpore's name)
    return arange(start, end, step)


def linspace(start, end, steps):
    """``steps`` evenly spaced float32 values from ``start`` to ``end``."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if int(steps) < 1:
        raise ValueError(f"linspace: steps must be positive, got {steps}")
    return _constant(np.linspace(start, end, int(steps), dtype=np.float32))


def eye(n, m=None, dtype=dtypes.float32):
    return _constant(np.eye(n, m, dtype=dtypes.to_dtype(dtype)))


class Eye:
    def __call__(self, n, m, t):
        return eye(n, m, t)


class LinSpace:
    def __call__(self, start, stop, num):
        return linspace(start, stop, num)


class Range:
    def __init__(self, maxlen=1000000):
        self.maxlen = maxlen

    def __call__(self, start, limit, delta):
        return arange(start, limit, delta)


class OnesLike:
    def __call__(self, x):
        return ones_like(x)


class ZerosLike:
    def __call__(self, x):
        return zeros_like(x)


class Identity:
    def __call__(self, x):
        return identity(x)


def identity(x):
    return _F().mul(x, 1)


# ---- joining, splitting, moving axes ----------------------------------------------------
def cat(tensors, axis=0):
    return _F().concat(tuple(tensors), axis)


def hstack(tensors):
    tensors = [atleast_1d(t) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([atleast_2d(t) for t in tensors], 0)


def dstack(tensors):
    return cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors):
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors], 1)


def atleast_1d(x):
    return x.reshape(1) if x.ndim == 0 else x


def atleast_2d(x):
    return x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def atleast_3d(x):
    if x.ndim >= 3:
        return x
    return x.reshape((1, 1, 1) if x.ndim == 0 else (1,) + x.shape + (1,) if x.ndim == 1
                     else x.shape + (1,))


def unstack(input_x, axis=0):   # noqa: A002
    axis = normalize_axis(axis, input_x.ndim, "unstack", input_x.shape)
    return tuple(_F().squeeze(p, axis) for p in _F().split(input_x, 1, axis))


unbind = unstack


def flip(x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    index = [builtins.slice(None)] * x.ndim
    for d in dims:
        index[normalize_axis(d, x.ndim, "flip", x.shape)] = builtins.slice(None, None, -1)
    return x[tuple(index)]


def reverse(x, axis):
    return flip(x, axis)


def roll(x, shifts, dims=None):
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    for s, d in zip(shifts, dims):
        n = x.shape[d]
        x = index_select(x, d, Tensor(((np.arange(n) - s) % n).astype(np.int64)))
    return x


def index_select(input, axis, index):   # noqa: A002
    return _F().gather(input, index, axis)


def permute(input, axis):   # noqa: A002
    return _F().transpose(input, tuple(axis))


def swapaxes(input, axis0, axis1):   # noqa: A002
    perm = list(builtins.range(input.ndim))
    perm[axis0], perm[axis1] = perm[axis1], perm[axis0]
    return _F().transpose(input, tuple(perm))


def moveaxis(x, source, destination):
    nd = x.ndim
    src = [normalize_axis(int(s), nd, "moveaxis", x.shape) for s in np.atleast_1d(source)]
    dst = [normalize_axis(int(d), nd, "moveaxis", x.shape) for d in np.atleast_1d(destination)]
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source and destination need as many axes, got {source} and {destination}")
    order = [i for i in builtins.range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _F().transpose(x, tuple(order))


movedim = moveaxis


def unsqueeze(input, dim):   # noqa: A002
    return _F().expand_dims(input, dim)


def flatten_(x, start_dim=0, end_dim=-1):
    start = normalize_axis(start_dim, builtins.max(x.ndim, 1), "flatten", x.shape)
    end = normalize_axis(end_dim, builtins.max(x.ndim, 1), "flatten", x.shape)
    return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1:])


def ravel(x):
    return x.reshape(-1)


def narrow(input, axis, start, length):   # noqa: A002
    index = [builtins.slice(None)] * input.ndim
    index[axis] = builtins.slice(start, start + length)
    return input[tuple(index)]


def chunk(input, chunks, axis=0):   # noqa: A002
    n = input.shape[axis]
    size = -(-n // chunks)
    return tensor_split(input, list(builtins.range(size, n, size)), axis)


def tensor_split(input, indices_or_sections, axis=0):   # noqa: A002
    n = input.shape[axis]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        sizes = [n // k + (1 if i < n % k else 0) for i in builtins.range(k)]
        bounds = np.cumsum([0] + sizes)
    else:
        bounds = [0] + list(indices_or_sections) + [n]
    return tuple(narrow(input, axis, int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:]))


def expand(input_x, size):   # noqa: A002
    size = tuple(int(s) for s in (size.asnumpy() if isinstance(size, Tensor) else size))
    shape = tuple(o if s == -1 else s for s, o in zip(size, (1,) * (len(size) - input_x.ndim)
                                                        + input_x.shape))
    return _F().broadcast_to(input_x, shape)


def broadcast_tensors(*tensors):
    shape = np.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(_F().broadcast_to(t, shape) for t in tensors)


def meshgrid(*inputs, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    inputs = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)) else inputs
    n = len(inputs)
    sizes = [t.shape[0] for t in inputs]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(inputs):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and n >= 2 else i
        shape = [1] * n
        shape[axis] = t.shape[0]
        out.append(_F().broadcast_to(t.reshape(tuple(shape)), tuple(sizes)))
    return tuple(out)


def rot90(input, k=1, dims=(0, 1)):   # noqa: A002
    k %= 4
    for _ in builtins.range(k):
        input = swapaxes(flip(input, dims[1]), dims[0], dims[1])
    return input


