"""``t.data`` of a facade tensor on the host: a NumPy array that also answers SINGA's
``CTensor`` calls.

In SINGA ``t.data`` is the SWIG ``CTensor``, and SINGA's own tests and helpers call its
methods on it (``x.data.GetFloatValue(n)``, ``x.data.data_type()``, ``x.data.AsType(k)``,
``x.data.shape()``). Here the data stays the array the core computes on, so
:class:`HostArray` is an ``ndarray`` subclass (a view, no copy) that adds those methods.
Two of them share a name with an ndarray attribute: ``shape`` is a tuple that may also be
called (``a.shape()``), and ``device`` a string ``"cpu"`` (NumPy's value) that may also be
called for SINGA's device. Element-wise results come back as plain ndarrays, so the
subclass does not spread through the computations.

>>> import numpy as np
>>> a = HostArray.wrap(np.arange(4, dtype=np.float32))
>>> a.shape, a.shape(), a.Size(), a.GetFloatValue(2).tolist(), type(a + 1).__name__
((4,), (4,), 4, [0.0, 1.0], 'ndarray')
"""
import numpy as np

from .ctensor import CTensor
from .unsupported import not_supported

__all__ = ["HostArray"]

_NDARRAY_SHAPE = np.ndarray.shape


class _Shape(tuple):
    """A shape tuple that SINGA code may also call: ``shape()`` or ``shape(axis)``."""

    def __call__(self, axis=None):
        return tuple(self) if axis is None else self[axis]


class _HostName(str):
    """NumPy's ``device`` value ``"cpu"``, also callable for SINGA's ``CTensor.device()``."""

    def __call__(self):
        from ..backend import get_device
        return get_device("CPU")


class HostArray(np.ndarray):
    """A host ndarray with SINGA's ``CTensor`` methods (see the module docstring)."""

    @classmethod
    def wrap(cls, array):
        """``array`` (a plain host ndarray) as a HostArray view; anything else unchanged."""
        return array.view(cls) if type(array) is np.ndarray else array

    def __array_wrap__(self, array, context=None, return_scalar=False):
        # a fresh result arrives as a plain ndarray and stays one; an ``out=`` HostArray
        # (in-place arithmetic on t.data) comes back as itself
        return array[()] if return_scalar else array

    @property
    def shape(self):
        return _Shape(_NDARRAY_SHAPE.__get__(self))

    @shape.setter
    def shape(self, value):
        _NDARRAY_SHAPE.__set__(self, value)

    @property
    def device(self):
        return _HostName("cpu")

    def _ctensor(self):
        return CTensor(array=self.view(np.ndarray))

    # ---- SINGA's CTensor calls ---------------------------------------------------------
    def nDim(self):
        return self.ndim

    def Size(self):
        return int(self.size)

    def MemSize(self):
        return int(self.nbytes)

    def data_type(self):
        return self._ctensor().data_type()

    def GetFloatValue(self, num=None):
        return self._ctensor().GetFloatValue(num)

    def GetIntValue(self, num=None):
        return self._ctensor().GetIntValue(num)

    def CopyFloatDataFromHostPtr(self, values, num=None, offset=0):
        self._ctensor().CopyFloatDataFromHostPtr(values, num, offset)

    CopyIntDataFromHostPtr = CopyFloatDataFromHostPtr

    def CopyData(self, other):
        self._ctensor().CopyData(other)

    def SetFloatValue(self, value):
        self[...] = value

    SetIntValue = SetFloatValue

    def AsType(self, dtype):
        return self._ctensor().AsType(dtype)

    def Reshape(self, shape):
        return CTensor(array=np.array(self).reshape(tuple(shape)))

    def Clone(self, device=None):
        return CTensor(array=np.array(self), device=device)

    def ToHost(self):
        """Already on the host."""

    def ToDevice(self, device):
        from .device import to_core
        if not to_core(device, "CTensor.ToDevice").is_host:
            raise not_supported("CTensor.ToDevice", "move the Python tensor instead: "
                                "t.to_device(dev)")

    def ToType(self, dtype):
        raise not_supported("CTensor.ToType on t.data", "a facade tensor's array keeps its "
                            "dtype in place; use t.to_type(dtype) or t.data.AsType(dtype)")

    def empty(self):
        return self.size == 0
