"""SINGA's ``tensor`` module: ``Tensor``, ``to_numpy``, ``from_numpy`` and the dtypes.

A SINGA ``Tensor`` here *is* a minitorch_dist ``Tensor`` (a subclass), so it goes straight
into every primitive, layer and optimizer of the core; the class only adds SINGA's
constructor and methods. What differs from SINGA (all listed in docs/singa.md):

* ``t.device`` is the minitorch_dist ``Device`` the data lives on and ``t.data`` the array
  (NumPy or CuPy), where SINGA has its SWIG device and ``CTensor``;
* ``tensor.float32``/``float16``/``int32`` are NumPy dtypes (so ``t.dtype == tensor.float32``
  works); SINGA's integer codes 0, 1, 2 are accepted wherever a dtype is;
* ``requires_grad`` keeps minitorch_dist's meaning, "a leaf whose gradient is wanted", which
  is SINGA's ``stores_grad``: ``Tensor(..., stores_grad=True)`` makes a trainable leaf;
* copies convert values (SINGA copies raw bytes, so an int array in a float tensor was
  garbage); a float array into an integer tensor is refused;
* ``size()`` and ``ndim()`` work as SINGA's methods and as minitorch_dist's properties.

>>> import numpy as np
>>> from minitorch_dist.singa import tensor
>>> tx = tensor.Tensor((2, 3), None, tensor.float32)
>>> tx.copy_from_numpy(np.arange(6, dtype=np.float32))
>>> tensor.to_numpy(tx).tolist(), tx.shape, tx.size(), tx.ndim()
([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], (2, 3), 6, 2)
"""
import numpy as np

from .. import random as _random
from ..backend import dtypes as _dtypes, get_device
from ..nn.parameter import Parameter as CoreParameter
from ..tensor import Tensor as CoreTensor
from .ctensor import CTensor
from .device import to_core
from .host_array import HostArray
from .results import FACADE
from .tensor_math import SingaTensorMath
from .unsupported import module_getattr

__all__ = ["Tensor", "PlaceHolder", "Parameter", "float16", "float32", "int32", "to_numpy",
           "from_numpy", "zeros", "ones", "zeros_like", "ones_like", "to_dtype"]

_DATA_SLOT = CoreTensor.data          # the core's slots, behind the facade's properties
_DEVICE_SLOT = CoreTensor.device
float16 = _dtypes.float16
float32 = _dtypes.float32
int32 = _dtypes.int32
_SINGA_CODES = {0: float32, 1: float16, 2: int32}     # SINGA's kFloat32, kFloat16, kInt


def to_dtype(spec, call="tensor.Tensor"):
    """A NumPy dtype for SINGA's code (0, 1, 2), a NumPy dtype/type or a name."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if int(spec) not in _SINGA_CODES:
            raise ValueError(f"{call}: dtype code {spec} is not one of SINGA's "
                             f"{sorted(_SINGA_CODES)} (float32, float16, int32)")
        return _SINGA_CODES[int(spec)]
    try:
        return _dtypes.to_dtype(spec)
    except TypeError:
        raise TypeError(f"{call}: dtype must be tensor.float32, tensor.float16 or tensor.int32 "
                        f"(or a NumPy dtype), got {spec!r}") from None


class _CallableInt(int):
    """An int that also answers ``()``: ``t.size`` and SINGA's ``t.size()`` both work."""

    def __call__(self):
        return int(self)


def _shape(shape, call):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise TypeError(f"{call}: shape must be a tuple of non-negative ints, got {shape!r}")
    return tuple(int(n) for n in shape)


def _set_fields(t, array, device, requires_grad):
    """Fill the core Tensor fields of ``t`` (what ``Tensor._make`` does for a new object)."""
    t.data, t.device = array, device
    t.grad, t.grad_fn, t._out_index = None, None, 0
    t.requires_grad = bool(requires_grad)


def _host_values(values, call):
    """``values`` (array-like, or a Tensor) as a NumPy array."""
    if isinstance(values, CoreTensor):
        return values.asnumpy()
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{call}: expected numbers, got an array of {array.dtype}")
    return array


class SingaTensorMethods:
    """The methods SINGA's ``Tensor`` has and minitorch_dist's lacks (mixed into both the
    facade ``Tensor`` and the facade ``Parameter``)."""

    @property
    def data(self):
        """The array: on the host a :class:`HostArray`, which also answers SINGA's
        ``CTensor`` calls (``t.data.GetFloatValue(n)``)."""
        value = _DATA_SLOT.__get__(self)
        if type(value) is np.ndarray:   # a core result that became a facade tensor
            value = HostArray.wrap(value)
            _DATA_SLOT.__set__(self, value)
        return value

    @data.setter
    def data(self, value):
        if isinstance(value, CTensor):      # SINGA code assigns a CTensor to t.data
            value = value.array
        _DATA_SLOT.__set__(self, HostArray.wrap(value))

    @property
    def size(self):
        """The number of elements (also callable: ``t.size()``)."""
        return _CallableInt(self.data.size)

    @property
    def ndim(self):
        """The number of axes (also callable: ``t.ndim()``)."""
        return _CallableInt(self.data.ndim)

    def memsize(self):
        """Bytes held by the data."""
        return int(self.data.nbytes)

    def is_empty(self):
        """True when the tensor has no elements."""
        return self.data.size == 0

    # ---- copies in --------------------------------------------------------------------
    def _write(self, array, call):
        """Copy the host array ``array`` (same element count) into this tensor, in place."""
        if array.size != self.data.size:
            raise ValueError(f"{call}: the array has {array.size} elements (shape "
                             f"{array.shape}) but the tensor has {self.data.size} (shape "
                             f"{self.shape}); the counts must match")
        if self.dtype.kind in "iub" and array.dtype.kind == "f" and \
                not bool(np.all(np.isfinite(array) & (array == np.trunc(array)))):
            raise TypeError(f"{call}: a {array.dtype} array cannot go into a {self.dtype} tensor "
                            f"(values would be truncated); convert it first, e.g. "
                            f"arr.astype(np.{self.dtype})")
        array = array.reshape(self.shape).astype(self.dtype, copy=False)
        if self.device.is_host:
            np.copyto(self.data, array)
        else:   # one counted host -> device copy, then in place (the tensor keeps its buffer)
            self.data[...] = self.device.copy_from(np.ascontiguousarray(array), get_device("CPU"))

    def copy_from_numpy(self, np_array, offset=0):
        """Copy a NumPy array with the same number of elements into this tensor (in place)."""
        if offset != 0:
            raise ValueError(f"Tensor.copy_from_numpy: offset must be 0 (SINGA ignores it), "
                             f"got {offset!r}")
        if not isinstance(np_array, (np.ndarray, np.generic)):
            raise TypeError(f"Tensor.copy_from_numpy: expected a NumPy array, got "
                            f"{type(np_array).__name__}")
        self._write(_host_values(np_array, "Tensor.copy_from_numpy"), "Tensor.copy_from_numpy")

    def copy_from(self, t):
        """Copy the values of a Tensor or an array (same element count) into this tensor."""
        self._write(_host_values(t, "Tensor.copy_from"), "Tensor.copy_from")

    def copy_data(self, t):
        """SINGA's alias of ``copy_from``."""
        self.copy_from(t)

    def set_value(self, x):
        """Fill with the number ``x`` (in place); returns self."""
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise TypeError(f"Tensor.set_value(x): x must be a number, got {type(x).__name__}")
        self.data[...] = x
        return self

    def gaussian(self, mean, std):
        """Fill with N(mean, std²) draws from the framework's seeded stream; returns self."""
        if not std >= 0:
            raise ValueError(f"Tensor.gaussian(mean, std): std must be >= 0, got {std!r}")
        self._write(_random.rng().normal(mean, std, self.shape), "Tensor.gaussian")
        return self

    def uniform(self, low, high):
        """Fill with U(low, high) draws from the framework's seeded stream; returns self."""
        if not high >= low:
            raise ValueError(f"Tensor.uniform(low, high): need low <= high, got {low}, {high}")
        self._write(_random.rng().uniform(low, high, self.shape), "Tensor.uniform")
        return self

    def bernoulli(self, p):
        """Fill with 0/1 draws, 1 with probability ``p``; returns self."""
        if not 0 <= p <= 1:
            raise ValueError(f"Tensor.bernoulli(p): p must be in [0, 1], got {p!r}")
        self._write((_random.rng().random(self.shape) < p).astype(np.float64), "Tensor.bernoulli")
        return self

    # ---- SINGA's in-place arithmetic (raw: not recorded by autograd) -----------------
    def _operand(self, other, call):
        if isinstance(other, CoreTensor):
            value = other.data if other.device is self.device else \
                self.device.copy_from(other.data, other.device)
        elif isinstance(other, (int, float, np.integer, np.floating)) and \
                not isinstance(other, bool):
            value = other
        else:
            raise TypeError(f"Tensor.{call}: expected a Tensor or a number, got "
                            f"{type(other).__name__}")
        return value

    def __iadd__(self, other):
        """``t += x`` in place (SINGA: a raw update, not recorded for backward)."""
        self.data += self._operand(other, "__iadd__")
        return self

    def __isub__(self, other):
        """``t -= x`` in place."""
        self.data -= self._operand(other, "__isub__")
        return self

    def __imul__(self, other):
        """``t *= x`` in place."""
        self.data *= self._operand(other, "__imul__")
        return self

    def __itruediv__(self, other):
        """``t /= x`` in place (the examples average all-reduced parameters this way)."""
        self.data /= self._operand(other, "__itruediv__")
        return self

    # ---- copies out and moves ---------------------------------------------------------
    def to_numpy(self):
        """A NumPy copy (SINGA has only the module function ``tensor.to_numpy(t)``)."""
        return to_numpy(self)

    def clone(self):
        """A new facade Tensor with a copy of the data, on the same device."""
        return Tensor(data=self, device=self.device, dtype=self.dtype)

    def to_device(self, device):
        """Move this tensor to ``device``, in place (SINGA semantics)."""
        target = to_core(device, "Tensor.to_device")
        if isinstance(self, CoreParameter):
            self.place_on(target)
        elif target is not self.device:
            self.data = target.copy_from(self.data, self.device)
            self.device = target
        return self

    def to_host(self):
        """Move this tensor to the host, in place."""
        return self.to_device(None)

    def as_type(self, dtype):
        """A new tensor with the values converted to ``dtype``."""
        return Tensor(data=self.asnumpy(), device=self.device, dtype=to_dtype(dtype, "Tensor.as_type"))

    def to_type(self, dtype):
        """Convert the values to ``dtype``, in place (a Parameter must keep its dtype)."""
        dtype = to_dtype(dtype, "Tensor.to_type")
        if dtype != self.dtype:
            if isinstance(self, CoreParameter):
                raise TypeError("Tensor.to_type: a layer parameter keeps its dtype")
            self.data = self.data.astype(dtype)
        return self


class Tensor(SingaTensorMath, SingaTensorMethods, CoreTensor):
    """SINGA's ``Tensor(shape=(), device=None, dtype=float32, data=None, requires_grad=True,
    stores_grad=False, creator=None, name=None)``.

    Without ``data`` it holds zeros of ``shape`` on ``device`` (None: the host). With ``data``
    (a NumPy array or a Tensor) the shape comes from ``data`` and the values are converted to
    ``dtype``. ``stores_grad=True`` makes a leaf whose gradient is kept (a trainable tensor),
    unless ``requires_grad=False``, which keeps gradients out of it as in SINGA.
    """

    def __init__(self, shape=(), device=None, dtype=float32, data=None, requires_grad=True,
                 stores_grad=False, creator=None, name=None):
        call = "tensor.Tensor"
        dev = to_core(device, call)
        dtype = to_dtype(dtype, call)
        if data is None:
            array = dev.xp.zeros(_shape(shape, call), dtype)
        elif isinstance(data, CoreTensor):
            array = data.data if data.device is dev else dev.copy_from(data.data, data.device)
            array = array.astype(dtype, copy=True)
        else:
            values = _host_values(data, call)
            array = values.astype(dtype, copy=True)
            if not dev.is_host:
                array = dev.copy_from(array, get_device("CPU"))
        if stores_grad and dtype.kind != "f":
            raise TypeError(f"{call}: stores_grad=True needs a floating-point dtype, got {dtype}")
        if not isinstance(requires_grad, bool):
            raise TypeError(f"{call}: requires_grad must be True or False, got {requires_grad!r}")
        # SINGA's requires_grad=False keeps backward out of the tensor, even a stores_grad one
        _set_fields(self, array, dev, stores_grad and requires_grad)
        self.__dict__["_stores_grad"] = bool(stores_grad)
        self.creator = creator
        self.name = name


    @property
    def stores_grad(self):
        """SINGA's flag for a trainable leaf. Setting it True later (SINGA's gradient
        checks do) makes the leaf's gradient wanted, as at construction."""
        return self.__dict__.get("_stores_grad", False)

    @stores_grad.setter
    def stores_grad(self, value):
        self.__dict__["_stores_grad"] = bool(value)
        if value and self.grad_fn is None and self.dtype.kind == "f":
            self.requires_grad = True

    # SINGA's Python Tensor keeps shape, dtype and device as plain attributes, and SINGA's
    # helpers set them after assigning a CTensor to ``t.data``. Here they follow the data:
    # a value that agrees is accepted, any other is refused.
    @property
    def shape(self):
        return CoreTensor.shape.fget(self)

    @shape.setter
    def shape(self, value):
        if tuple(int(n) for n in value) != tuple(self.data.shape):
            raise ValueError(f"Tensor.shape: the shape follows the data {tuple(self.data.shape)}; "
                             f"got {tuple(value)} (use t.reshape)")

    @property
    def dtype(self):
        return CoreTensor.dtype.fget(self)

    @dtype.setter
    def dtype(self, value):
        if to_dtype(value, "Tensor.dtype") != self.data.dtype:
            raise ValueError(f"Tensor.dtype: the dtype follows the data ({self.data.dtype}); "
                             f"got {value!r} (use t.to_type)")

    @property
    def device(self):
        return _DEVICE_SLOT.__get__(self)

    @device.setter
    def device(self, value):
        _DEVICE_SLOT.__set__(self, to_core(value, "Tensor.device"))


PlaceHolder = Tensor


class Parameter(SingaTensorMath, SingaTensorMethods, CoreParameter):
    """A layer's trainable tensor: a minitorch_dist ``Parameter`` with SINGA's methods.

    ``get_params()`` returns these; they are updated in place by the optimizers.
    """

    stores_grad = True
    creator = None

    @classmethod
    def create(cls, array, device):
        """A parameter holding ``array`` (host NumPy) on ``device``; named by its layer."""
        return cls(CoreTensor(array, device="CPU"), device=device)

    @classmethod
    def from_tensor(cls, t):
        """A parameter sharing the data of facade tensor ``t`` (a custom layer's
        ``self.W = tensor.Tensor(..., stores_grad=True)``)."""
        param = cls(t, device=t.device)
        param.data = t.data     # share, so the user's tensor and the parameter stay one
        return param


# ---- module functions -------------------------------------------------------------------
def to_numpy(t):
    """A copy of the values of ``t`` (any Tensor) as a NumPy array on the host (SINGA
    clones too: later in-place updates of ``t`` do not show in it)."""
    if not isinstance(t, CoreTensor):
        raise TypeError(f"tensor.to_numpy(t): expected a Tensor, got {type(t).__name__}")
    array = np.asarray(t.asnumpy())
    return array.copy() if t.device.is_host and np.shares_memory(array, t.data) else array


def from_numpy(np_array, dev=None):
    """A Tensor with the values of ``np_array`` (float64 becomes float32 and int64 int32,
    as in SINGA), on ``dev`` (default: the host)."""
    if not isinstance(np_array, np.ndarray):
        raise TypeError(f"tensor.from_numpy(np_array): expected a NumPy array, got "
                        f"{type(np_array).__name__}")
    kind = {np.dtype(np.float64): float32, np.dtype(np.int64): int32}.get(np_array.dtype,
                                                                          np_array.dtype)
    if kind not in (float32, float16, int32):
        raise TypeError(f"tensor.from_numpy: the array's dtype {np_array.dtype} is not one of "
                        "float32, float16, int32 (or float64/int64, which are converted)")
    return Tensor(data=np_array, device=dev, dtype=kind)


def zeros(shape, device=None, dtype=float32):
    """A tensor of zeros of ``shape`` on ``device``."""
    return Tensor(shape, device, dtype)


def ones(shape, device=None, dtype=float32):
    """A tensor of ones of ``shape`` on ``device``."""
    return Tensor(shape, device, dtype).set_value(1)


def zeros_like(t):
    """Zeros shaped, typed and placed like ``t``."""
    return Tensor(t.shape, t.device, t.dtype)


def ones_like(t):
    """Ones shaped, typed and placed like ``t``."""
    return ones(t.shape, t.device, t.dtype)


FACADE.update(Tensor=Tensor, Parameter=Parameter)    # results.as_result makes these

from .tensor_functions import *  # noqa: E402,F401,F403 - SINGA's module functions
from .tensor_functions import __all__ as _FUNCTIONS  # noqa: E402
from .tensor_functions import _call_singa_func  # noqa: E402,F401 - SINGA's tests call it

__all__ += list(_FUNCTIONS)
_UNSUPPORTED = {"float64": "SINGA has float16, float32 and int32 tensors",
                "int8": "SINGA has float16, float32 and int32 tensors"}
__getattr__ = module_getattr("tensor", _UNSUPPORTED, __all__)
