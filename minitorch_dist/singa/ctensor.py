"""SINGA's low-level ``singa_wrap.Tensor`` (its ``CTensor``): a thin view over an array.

SINGA's operators hand ``CTensor``\\s around: ``y.creator.backward(dy)`` returns them and
``tensor.from_raw_tensor(ct)`` turns one into a Python ``Tensor``. Here a ``CTensor`` holds
a NumPy (or CuPy) array, answers SINGA's C++-style methods (``shape()``, ``data_type()``,
``CopyFloatDataFromHostPtr``, ``GetFloatValue``, ``AsType``, ``Reshape``, ...) and converts
to an array wherever one is expected (``np.asarray(ct)``). A SWIG internal with no meaning
here (``device()`` handles, raw pointers) raises :class:`SingaNotSupported` naming it.

>>> import numpy as np
>>> from minitorch_dist.singa import singa_wrap as singa
>>> ct = singa.Tensor([2, 3])
>>> ct.CopyFloatDataFromHostPtr(np.arange(6, dtype=np.float32))
>>> ct.shape(), float(ct.GetFloatValue(6)[-1]), ct.data_type() == singa.kFloat32
((2, 3), 5.0, True)
"""
import numpy as np

from .unsupported import not_supported

__all__ = ["CTensor", "kFloat32", "kFloat16", "kInt", "kFloat", "raw", "as_ctensor",
           "Gaussian", "Uniform"]

kFloat32, kFloat16, kInt = 0, 1, 2      # SINGA's DataType codes
kFloat = kFloat32
_DTYPES = {kFloat32: np.float32, kFloat16: np.float16, kInt: np.int32}


def _code(dtype):
    kind = np.dtype(dtype)
    for code, np_type in _DTYPES.items():
        if kind == np_type:
            return code
    raise TypeError(f"singa_wrap.Tensor: dtype {kind} is not float32, float16 or int32")


def _np_dtype(code, call):
    if isinstance(code, (int, np.integer)) and int(code) in _DTYPES:
        return np.dtype(_DTYPES[int(code)])
    try:
        return np.dtype(code)
    except TypeError:
        raise TypeError(f"{call}: dtype must be kFloat32, kFloat16 or kInt, got {code!r}") \
            from None


class CTensor:
    """``singa_wrap.Tensor(shape=(), device=None, dtype=kFloat32)``: zeros of ``shape``."""

    def __init__(self, shape=(), device=None, dtype=kFloat32, *, array=None):
        if array is None:
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else \
                tuple(int(n) for n in shape)
            array = np.zeros(shape, _np_dtype(dtype, "singa_wrap.Tensor"))
        self.array = array
        self._device = device

    def __array__(self, dtype=None, copy=None):
        array = self.array.get() if hasattr(self.array, "get") else self.array
        return array if dtype is None else array.astype(dtype)

    def shape(self, axis=None):
        """The shape as a tuple (``shape(i)``: one axis)."""
        return self.array.shape if axis is None else self.array.shape[axis]

    def nDim(self):
        return self.array.ndim

    def Size(self):
        return int(self.array.size)

    def MemSize(self):
        return int(self.array.nbytes)

    def data_type(self):
        """SINGA's dtype code (kFloat32, kFloat16 or kInt)."""
        return _code(self.array.dtype)

    def device(self):
        """The device given at construction (None: the host)."""
        return self._device

    def ToHost(self):
        """Move the values to the host (a no-op for host arrays)."""
        if hasattr(self.array, "get"):
            self.array = self.array.get()

    def ToDevice(self, device):
        """Move the values to ``device`` (a SINGA or core device; None is the host)."""
        from .device import to_core
        target = to_core(device, "singa_wrap.Tensor.ToDevice")
        if not target.is_host:
            self.array = target.xp.asarray(np.asarray(self))
        else:
            self.ToHost()
        self._device = device

    def transpose(self):
        return False

    def empty(self):
        return self.array.size == 0

    def CopyFloatDataFromHostPtr(self, values, num=None, offset=0):
        """Copy host values (a sequence or array with this many elements) in, in place."""
        self._copy_in(values, num, offset)

    CopyIntDataFromHostPtr = CopyFloatDataFromHostPtr

    def _copy_in(self, values, num, offset):
        flat = np.asarray(values).reshape(-1)
        num = flat.size if num is None else int(num)
        target = self.array.reshape(-1)
        if offset + num > target.size:
            raise ValueError(f"singa_wrap.Tensor: copying {num} values at offset {offset} "
                             f"into a tensor of {target.size} elements")
        target[offset:offset + num] = flat[:num].astype(self.array.dtype)

    def CopyData(self, other):
        """Copy the values of another CTensor (same size) in."""
        self._copy_in(np.asarray(other), None, 0)

    def GetFloatValue(self, num=None):
        """The first ``num`` values as a flat float32 NumPy array."""
        flat = np.asarray(self).reshape(-1).astype(np.float32)
        return flat if num is None else flat[:int(num)]

    def GetIntValue(self, num=None):
        flat = np.asarray(self).reshape(-1).astype(np.int32)
        return flat if num is None else flat[:int(num)]

    def AsType(self, dtype):
        """A new CTensor with the values converted to ``dtype`` (a SINGA code)."""
        return CTensor(array=self.array.astype(_np_dtype(dtype, "CTensor.AsType")),
                       device=self._device)

    def ToType(self, dtype):
        self.array = self.array.astype(_np_dtype(dtype, "CTensor.ToType"))

    def Reshape(self, shape):
        return CTensor(array=self.array.reshape(tuple(shape)), device=self._device)

    def Clone(self, device=None):
        return CTensor(array=self.array.copy(), device=device or self._device)

    def SetFloatValue(self, value):
        self.array[...] = value

    SetIntValue = SetFloatValue

    def __repr__(self):
        return f"singa_wrap.Tensor(shape={self.array.shape}, dtype={self.array.dtype})"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_supported(f"singa_wrap.Tensor.{name}",
                            "a SWIG internal of SINGA's C++ Tensor with no counterpart here; "
                            "use tensor.from_raw_tensor(ct) and the tensor module")


def raw(x):
    """The array of ``x`` (a CTensor, a facade/core Tensor or an array), unchanged."""
    if isinstance(x, CTensor):
        return x.array
    data = getattr(x, "data", None)
    if data is not None and hasattr(x, "grad_fn"):
        return data
    return x


def as_ctensor(array):
    """Wrap an array (or None) as a CTensor."""
    if array is None or isinstance(array, CTensor):
        return array
    return CTensor(array=array)


def Gaussian(mean, std, ct):
    """Fill ``ct`` in place with N(mean, std²) draws (the framework's seeded stream)."""
    from .. import random as _random
    ct.array[...] = _random.rng().normal(mean, std, ct.array.shape).astype(ct.array.dtype)


def Uniform(low, high, ct):
    """Fill ``ct`` in place with U(low, high) draws."""
    from .. import random as _random
    ct.array[...] = _random.rng().uniform(low, high, ct.array.shape).astype(ct.array.dtype)
