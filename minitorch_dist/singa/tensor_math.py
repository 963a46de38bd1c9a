"""SINGA's ``Tensor`` arithmetic and shape methods, mixed into the facade ``Tensor``.

Results are facade Tensors (with SINGA's methods and a ``creator``). Arithmetic runs on the
core, so it is recorded on the core tape as any core operation is (SINGA leaves tensor
arithmetic unrecorded; recording it only adds gradients SINGA would not have).
Comparisons give float32 0/1 tensors, as SINGA's ``LTFloat`` kernels do.

>>> import numpy as np
>>> from minitorch_dist.singa import tensor
>>> t = tensor.from_numpy(np.array([[1.0, 2.0, 3.0]], np.float32))
>>> r = (t * 2 + 1).reshape((3, 1))
>>> type(r).__name__, r.shape, tensor.to_numpy(t < 2).tolist()
('Tensor', (3, 1), [[1.0, 0.0, 0.0]])
"""
import copy as _copy

import numpy as np

from ..tensor import Tensor as CoreTensor
from .results import as_result, facade_call

__all__ = ["SingaTensorMath", "new_tensor"]


def new_tensor(array, like=None, device=None):
    """A facade Tensor holding ``array`` (no copy) on ``like``'s device (or ``device``)."""
    from ..backend import get_device
    dev = like.device if like is not None else (device or get_device("CPU"))
    t = CoreTensor._make(array, dev)
    return as_result(t, None)


def _arith(name):
    core = getattr(CoreTensor, name)

    def method(self, other):
        return facade_call(core, self, other)
    method.__name__ = name
    method.__doc__ = f"SINGA's ``Tensor.{name}``: a facade Tensor."
    return method


def _compare(fn, name):
    def method(self, other):
        if other is None and name == "__eq__":
            return False
        rhs = other.data if isinstance(other, CoreTensor) else other
        return new_tensor(fn(self.data, rhs).astype(np.float32), self)
    method.__name__ = name
    method.__doc__ = f"SINGA's ``Tensor.{name}``: a 0/1 float32 tensor."
    return method


class SingaTensorMath:
    """SINGA's operators and shape methods (see the module docstring)."""

    __hash__ = object.__hash__

    for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
               "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__matmul__"):
        locals()[_n] = _arith(_n)
    __div__, __rdiv__ = __truediv__, __rtruediv__   # noqa: F821 - set just above
    __lt__ = _compare(np.less, "__lt__")
    __le__ = _compare(np.less_equal, "__le__")
    __gt__ = _compare(np.greater, "__gt__")
    __ge__ = _compare(np.greater_equal, "__ge__")
    __eq__ = _compare(np.equal, "__eq__")
    del _n

    def __floordiv__(self, other):
        rhs = other.data if isinstance(other, CoreTensor) else other
        return new_tensor(np.floor(self.data / rhs).astype(self.dtype), self)

    def __neg__(self):
        return facade_call(CoreTensor.__neg__, self)

    def is_dummy(self):
        """False: every tensor here holds data."""
        return False

    def is_transpose(self):
        """False: transposes here are materialised."""
        return False

    def contiguous(self):
        return self

    def reshape(self, *shape):
        """A new tensor with ``shape`` (same element count); ``self`` is unchanged.
        Recorded on the core tape like the core's ``reshape``."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        shape = tuple(int(n) for n in shape)
        if int(np.prod(shape)) != self.data.size and -1 not in shape:
            raise AssertionError("product of shape should be equal")
        return facade_call(CoreTensor.reshape, self, shape)

    def transpose(self, *axes):
        """A new transposed tensor (all axes reversed by default), recorded like the
        core's ``transpose``."""
        axes = axes[0] if len(axes) == 1 and (axes[0] is None or
                                               isinstance(axes[0], (tuple, list))) else axes
        if axes and len(axes) != self.data.ndim:
            raise ValueError("dimensions do not match")
        return facade_call(CoreTensor.transpose, self, *(axes or ()))

    @property
    def T(self):
        return self.transpose()

    def reset_like(self, t):
        """Take ``t``'s shape, dtype and device (zeros), in place."""
        self.data = t.device.xp.zeros(t.shape, t.dtype)
        self.device = t.device

    def l1(self):
        """The mean absolute value."""
        return float(abs(self.data).mean())

    def l2(self):
        """The root of the sum of squares, over the square root of the element count."""
        return float(np.sqrt((self.data.astype(np.float64) ** 2).sum()) /
                     np.sqrt(self.data.size))

    def repeat(self, repeats, axis):
        """``np.repeat`` as a new tensor."""
        return new_tensor(np.repeat(self.data, repeats, axis=axis), self)

    def copy(self):
        """A shallow copy: a new tensor object over the same data."""
        return new_tensor(self.data, self)

    def deepcopy(self):
        """A new tensor with a copy of the data."""
        return new_tensor(_copy.deepcopy(self.data), self)

    def _rowcol(self, v, op, axis):
        vec = v.data if isinstance(v, CoreTensor) else np.asarray(v)
        shaped = vec.reshape((-1, 1) if axis == "column" else (1, -1))
        self.data[...] = op(self.data, shaped)
        return self

    def add_column(self, v):
        return self._rowcol(v, np.add, "column")

    def add_row(self, v):
        return self._rowcol(v, np.add, "row")

    def div_column(self, v):
        return self._rowcol(v, np.divide, "column")

    def div_row(self, v):
        return self._rowcol(v, np.divide, "row")

    def mult_column(self, v):
        return self._rowcol(v, np.multiply, "column")

    def mult_row(self, v):
        return self._rowcol(v, np.multiply, "row")
