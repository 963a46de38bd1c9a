"""``Tensor(shape=..., dtype=..., init=...)``: MindSpore's lazily initialised tensor.

A constant initializer (``One()``, ``Zero()``, ``Constant(v)``) fills at once; a random one
records how to draw (``common/deferred_init.py``: the random stream advances as if drawn)
and the values appear at the first use, ``asnumpy`` or ``init_data``. ``tensor.py`` calls
this through the hook ``ops/__init__.py`` installs, so the tensor layer does not import the
initializers (which import it).
"""
import numpy as np

from ..backend import dtypes, get_device
from ..common.deferred_init import DeferredInit
from ..common.initializer import _BY_NAME, Constant, Initializer

__all__ = ["lazy_values"]


def _shape(shape):
    if shape is None:
        raise ValueError("Tensor(init=...) needs shape=, a tuple of non-negative ints")
    shape = (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) else shape
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in shape):
        raise TypeError(f"Tensor: shape must be a tuple of ints, got {shape!r}")
    if any(n < 0 for n in shape):
        raise ValueError(f"Tensor: shape must not hold negative sizes, got {tuple(shape)}")
    return tuple(int(n) for n in shape)


def _initializer(init):
    if init is None:
        raise ValueError("Tensor(shape=...) needs init= (an Initializer such as One() or Normal(), "
                         "or a name such as 'normal'); to wrap data pass input_data")
    if isinstance(init, str):
        if init.lower() not in _BY_NAME:
            raise ValueError(f"Tensor: unknown init {init!r}; expected an Initializer or one of "
                             f"{sorted(set(_BY_NAME))}")
        return _BY_NAME[init.lower()]()
    if not isinstance(init, Initializer):
        raise TypeError("Tensor: init must be an Initializer (One(), Normal(), ...) or its name, "
                        f"got {type(init).__name__}")
    return init


def _is_dynamic(n):
    """None, a Symbol or -1: a dimension a placeholder leaves open (``Cell.set_inputs``)."""
    return n is None or hasattr(n, "divisor") or (
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n == -1)


def lazy_values(tensor, shape, dtype, init, device):
    """The array ``tensor`` holds for ``Tensor(shape=, dtype=, init=)`` on ``device``; a
    placeholder ``Tensor(shape=[None, 784], dtype=...)`` (no init) holds an empty array and
    its declared shape, which ``Cell.set_inputs`` reads."""
    dtype = dtypes.to_dtype(dtype if dtype is not None else dtypes.DEFAULT_FLOAT)
    if init is None and isinstance(shape, (list, tuple)) and any(_is_dynamic(n) for n in shape):
        tensor.declared_shape = tuple(shape)
        return device.xp.zeros(tuple(0 if _is_dynamic(n) else int(n) for n in shape), dtype)
    shape, init = _shape(shape), _initializer(init)
    if isinstance(init, Constant):
        values = init(shape, dtype)
        return values if device.is_host else device.copy_from(values, get_device("CPU"))
    tensor.deferred_init = DeferredInit(init, shape, dtype)
    return device.xp.broadcast_to(device.xp.zeros((), dtype), shape)
