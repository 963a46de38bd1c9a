"""Tensor: an array on a device, plus what autograd needs (requires_grad, grad, grad_fn).

Arithmetic, comparison and the convenience methods dispatch to primitives in ``ops``;
this file only holds the data and the user-facing surface.
"""
import numpy as np

from .backend import dtypes, get_device
from . import autograd

F = None  # ops.functional, bound by minitorch_dist.ops once it is imported
lazy_maker = None   # ops.lazy_init.lazy_values, bound likewise


def _host_array(data, dtype):
    """A NumPy array for ``data`` (nested lists, scalars or arrays) with a supported dtype."""
    if dtype is not None:
        dtype = dtypes.to_dtype(dtype)
    if isinstance(data, (np.ndarray, np.generic)):
        array = np.asarray(data)   # NumPy arrays and scalars (np.float64(1.0)) keep their dtype
    else:
        try:
            array = np.array(data)
        except ValueError as err:
            raise ValueError("Tensor data must be a rectangular nested list of numbers "
                             f"(every row the same length): {err}") from None
        if array.dtype == np.float64 and dtype is None:
            array = array.astype(dtypes.DEFAULT_FLOAT)   # Python floats become float32
    if array.dtype == object or array.dtype.kind in "USV":
        raise TypeError(f"Tensor data must be numbers, got elements of type {array.dtype}")
    if dtype is None:
        if array.dtype not in dtypes.SUPPORTED:
            dtype = dtypes.to_dtype(array.dtype)  # raises with the list of supported dtypes
        return array.copy()
    return array.astype(dtype)  # astype always copies


def _lazy_values(tensor, shape, dtype, init, device):
    """``Tensor(shape=..., init=...)``: made by ``ops/lazy_init.py`` (installed as
    ``lazy_maker`` when ``ops`` is imported, since the initializers import this module)."""
    if lazy_maker is None:
        raise RuntimeError("Tensor(shape=..., init=...) needs minitorch_dist.ops to be imported")
    return lazy_maker(tensor, shape, dtype, init, device)


class Tensor:
    """An n-dimensional array on a device, differentiable when ``requires_grad``.

    >>> import minitorch_dist as ms
    >>> x = ms.Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad.asnumpy().tolist()
    [[2.0, 4.0], [6.0, 8.0]]
    """

    __slots__ = ("data", "device", "requires_grad", "grad", "grad_fn", "_out_index",
                 "__weakref__", "__dict__")
    __array_priority__ = 100  # numpy_array + tensor defers to Tensor.__radd__
    deferred_init = None      # values drawn later (common/deferred_init.py, no_init_parameters)

    def __init__(self, input_data=None, dtype=None, device=None, requires_grad=False, *,
                 shape=None, init=None, internal=False, const_arg=False):
        dev = get_device(device)
        if shape is not None or init is not None:
            if input_data is not None:
                raise ValueError("Tensor: give input_data, or shape= and init= (a tensor whose values "
                                 "are drawn later), not both")
            data = _lazy_values(self, shape, dtype, init, dev)
        elif isinstance(input_data, Tensor):
            src = input_data.device
            # one copy, made by the device layer when it crosses devices so that it is counted
            data = input_data.data.copy() if src is dev else dev.copy_from(input_data.data, src)
            if dtype is not None:
                data = data.astype(dtypes.to_dtype(dtype), copy=False)
        elif input_data is None:
            raise ValueError("Tensor needs input_data: an array, a nested list or a number")
        elif not isinstance(input_data, np.ndarray) and hasattr(input_data, "__cuda_array_interface__"):
            data = dev.xp.asarray(input_data, dtype=dtype).copy()
        else:
            array = _host_array(input_data, dtype)
            data = array if dev.is_host else dev.copy_from(array, get_device("CPU"))
        self.data = data
        self.device = dev
        self.const_arg = bool(const_arg)
        self.grad = None
        self.grad_fn = None
        self._out_index = 0
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _make(cls, data, device, requires_grad=False, grad_fn=None, out_index=0):
        """Wrap an array already on ``device`` without copying (the primitives' fast path)."""
        t = cls.__new__(cls)
        t.data = data
        t.device = device
        t.requires_grad = requires_grad
        t.grad = None
        t.grad_fn = grad_fn
        t._out_index = out_index
        return t

    # ---- properties -------------------------------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    @property
    def nbytes(self):
        return self.data.nbytes

    @property
    def itemsize(self):
        """Bytes per element (4 for float32)."""
        return self.data.dtype.itemsize

    @property
    def strides(self):
        """Bytes to step along each axis, as NumPy reports them."""
        return tuple(self.data.strides) if self.deferred_init is None else \
            tuple(int(np.prod(self.shape[i + 1:])) * self.itemsize for i in range(self.ndim))

    @property
    def has_init(self):
        """True while a ``Tensor(shape=..., init=...)`` has not drawn its values yet."""
        return self.deferred_init is not None

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @staticmethod
    def from_numpy(array):
        """A host tensor that shares memory with the NumPy ``array`` (no copy): writing into
        one shows in the other, as with MindSpore's and PyTorch's ``from_numpy``."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Tensor.from_numpy expects a numpy.ndarray, got {type(array).__name__}")
        dtypes.to_dtype(array.dtype)     # a clear error for unsupported dtypes
        return Tensor._make(array, get_device("CPU"))

    @property
    def T(self):
        return F.transpose(self, tuple(range(self.ndim - 1, -1, -1)))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        body = np.array2string(self.asnumpy(), separator=", ", prefix="Tensor(")
        extra = "" if self.device.is_host else f", device={self.device.name}"
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({body}, dtype={self.dtype}{extra}{grad})"

    def __str__(self):
        """The values alone, as MindSpore prints them ("loss is %s" % loss shows 2.3025851)."""
        return str(self.asnumpy())

    __hash__ = object.__hash__  # == is elementwise, identity stays the hash

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor with {self.size} elements is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __format__(self, spec):
        """``f"{loss:.4f}"`` formats a one-element tensor as its number."""
        if spec and self.size == 1:
            return format(self.item(), spec)
        return format(str(self), spec)

    # ---- conversion and movement ------------------------------------------------------
    def asnumpy(self):
        """A NumPy copy of the data (copied from the device when it lives on one)."""
        if self.deferred_init is not None:
            self.init_data()
        if self.device.is_host:
            return self.data.copy()
        from .backend import transfer
        out = self.device.host_array(self.data)
        transfer.record(self.device, get_device("CPU"), out.nbytes)
        return out if out is not self.data else out.copy()

    numpy = asnumpy

    def __array__(self, dtype=None, copy=None):
        out = self.asnumpy()
        return out if dtype is None else out.astype(dtype)

    def item(self):
        if self.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self.asnumpy().reshape(()).item()

    def tolist(self):
        return self.asnumpy().tolist()

    def to(self, device):
        """This tensor on ``device``; differentiable (the gradient is copied back)."""
        from .ops.device_copy import copy_to
        return copy_to(self, get_device(device))

    def astype(self, dtype):
        return F.cast(self, dtype)

    def detach(self):
        return Tensor._make(self.data, self.device)

    def init_data(self, index=None):
        """Draw the values of a tensor made under ``no_init_parameters`` (all of them, or
        the block ``index``, a tuple of slices); returns self. A no-op once drawn."""
        deferred = self.deferred_init
        if deferred is not None:
            values = deferred.draw(index)
            self.data = self.device.xp.asarray(values) if not self.device.is_host else values
            self.deferred_init = None
        return self

    def prepare_use(self, device, owner):
        """Called by dispatch before primitive ``owner``, running on ``device``, reads this
        tensor (``ops/primitive.py``): a tensor made under ``no_init_parameters`` draws its
        values at its first use. ``Parameter`` adds where it settles; nothing else to do here.

        >>> import minitorch_dist as ms
        >>> from minitorch_dist.nn.utils import no_init_parameters
        >>> from minitorch_dist.common.initializer import initializer
        >>> with no_init_parameters():
        ...     t = initializer("normal", [2], ms.float32)
        >>> (t * 1.0).shape, t.deferred_init is None
        ((2,), True)
        """
        if self.deferred_init is not None:
            self.init_data()

    def requires_grad_(self, requires_grad=True):
        if requires_grad and not dtypes.is_floating(self.dtype):
            raise TypeError(f"only floating-point tensors can require gradients, this one is {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def set_data(self, data):
        """Replace the values in place (same shape), e.g. to load or broadcast parameters."""
        if isinstance(data, Tensor):
            array = self.device.copy_from(data.data, data.device) if data.device is not self.device else data.data
        else:
            array = self.device.xp.asarray(_host_array(data, None)) if self.device.is_host \
                else self.device.copy_from(_host_array(data, None), get_device("CPU"))
        if array.shape != self.shape:
            raise ValueError(f"set_data expects shape {self.shape}, got {array.shape}")
        if self.deferred_init is not None:    # not drawn yet (no_init_parameters): the new
            self.data = self.device.xp.empty(self.shape, self.dtype)   # values replace the draw
            self.deferred_init = None
        self.data[...] = array
        return self

    # ---- autograd ---------------------------------------------------------------------
    def backward(self, grad=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``grad`` defaults to ones for a one-element tensor; pass it for other shapes.
        """
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad: no input of the "
                               "computation had requires_grad=True (or it ran under no_grad)")
        if grad is None:
            if self.size != 1:
                raise RuntimeError(f"backward() without a gradient needs a one-element tensor, "
                                   f"got shape {self.shape}; pass grad=Tensor(...) of that shape")
            seed = self.device.xp.ones(self.shape, self.dtype)
        else:
            seed = grad.data if isinstance(grad, Tensor) else self.device.xp.asarray(grad, self.dtype)
            if seed.shape != self.shape:
                raise ValueError(f"backward(grad): grad has shape {seed.shape}, expected {self.shape}")
        autograd.run_backward([self], [seed], retain_graph=retain_graph)

    def _accumulate_grad(self, grad):
        from .row_tensor import RowTensor
        if self.grad is None:
            self.grad = grad if isinstance(grad, RowTensor) else Tensor._make(grad, self.device)
        elif isinstance(self.grad, RowTensor) or isinstance(grad, RowTensor):
            old = self.grad if isinstance(self.grad, RowTensor) else self.grad.data
            total = RowTensor.add(old, grad)
            self.grad = total if isinstance(total, RowTensor) else Tensor._make(total, self.device)
        else:
            total = self.grad.data + grad
            if total.ndim == 0:
                total = self.device.xp.asarray(total)   # 0-d sums are NumPy scalars
            self.grad = Tensor._make(total, self.device)

    def zero_grad(self):
        self.grad = None

    # ---- interop ----------------------------------------------------------------------
    def __dlpack__(self, stream=None, **kwargs):
        if stream is None:
            return self.data.__dlpack__(**kwargs)
        return self.data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    # ---- operators --------------------------------------------------------------------
    def __add__(self, other): return F.add(self, other)
    def __radd__(self, other): return F.add(other, self)
    def __sub__(self, other): return F.sub(self, other)
    def __rsub__(self, other): return F.sub(other, self)
    def __mul__(self, other): return F.mul(self, other)
    def __rmul__(self, other): return F.mul(other, self)
    def __truediv__(self, other): return F.div(self, other)
    def __rtruediv__(self, other): return F.div(other, self)
    def __pow__(self, other): return F.pow(self, other)
    def __rpow__(self, other): return F.pow(other, self)
    def __matmul__(self, other): return F.matmul(self, other)
    def __rmatmul__(self, other): return F.matmul(other, self)
    def __mod__(self, other): return F.floor_mod(self, other)
    def __rmod__(self, other): return F.floor_mod(other, self)
    def __floordiv__(self, other): return F.floor_div(self, other)
    def __rfloordiv__(self, other): return F.floor_div(other, self)
    def __and__(self, other): return F.bitwise_and(self, other)
    def __rand__(self, other): return F.bitwise_and(other, self)
    def __or__(self, other): return F.bitwise_or(self, other)
    def __ror__(self, other): return F.bitwise_or(other, self)
    def __xor__(self, other): return F.bitwise_xor(self, other)
    def __rxor__(self, other): return F.bitwise_xor(other, self)
    def __lshift__(self, other): return F.bitwise_left_shift(self, other)
    def __rshift__(self, other): return F.bitwise_right_shift(self, other)
    def __invert__(self): return F.invert(self)
    def __pos__(self): return self
    def __neg__(self): return F.neg(self)
    def __abs__(self): return F.abs(self)
    def __eq__(self, other): return F.equal(self, other)
    def __ne__(self, other): return F.not_equal(self, other)
    def __lt__(self, other): return F.less(self, other)
    def __le__(self, other): return F.less_equal(self, other)
    def __gt__(self, other): return F.greater(self, other)
    def __ge__(self, other): return F.greater_equal(self, other)
    def __getitem__(self, index): return F.getitem(self, index)

    def __setitem__(self, index, value):
        if self.requires_grad or self.grad_fn is not None:
            raise RuntimeError("in-place assignment into a tensor that takes part in autograd; "
                               "assign under no_grad to a detached tensor instead")
        if isinstance(value, Tensor):
            value = value.data if value.device is self.device else self.device.copy_from(value.data, value.device)
        self.data[index.data if isinstance(index, Tensor) else index] = value

    # ---- methods ----------------------------------------------------------------------
    def sum(self, axis=None, keepdims=False): return F.sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return F.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return F.max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return F.min(self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return F.argmax(self, axis, keepdims)
    def exp(self): return F.exp(self)
    def log(self): return F.log(self)
    def sqrt(self): return F.sqrt(self)
    def abs(self): return F.abs(self)
    def relu(self): return F.relu(self)
    def sigmoid(self): return F.sigmoid(self)
    def tanh(self): return F.tanh(self)
    def softmax(self, axis=-1): return F.softmax(self, axis)
    def log_softmax(self, axis=-1): return F.log_softmax(self, axis)
    def matmul(self, other): return F.matmul(self, other)

    def reshape(self, *shape):
        return F.reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    view = reshape

    def transpose(self, *axes):
        if not axes:
            axes = tuple(range(self.ndim - 1, -1, -1))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return F.transpose(self, axes)

    def squeeze(self, axis=None): return F.squeeze(self, axis)
    def expand_dims(self, axis): return F.expand_dims(self, axis)
    def flatten(self): return F.reshape(self, (-1,))
    def broadcast_to(self, shape): return F.broadcast_to(self, shape)
