"""Loss scaling for float16 training: ``StaticLossScaler``, ``DynamicLossScaler`` and
``all_finite`` (MindSpore 2.x's functional style).

The loss is multiplied by the scale before differentiation so small float16 gradients do
not flush to zero; the gradients are divided by it before the update. A dynamic scaler
halves (``/ scale_factor``) the scale after a step whose gradients overflowed and grows it
(``* scale_factor``) after ``scale_window`` finite steps in a row.

>>> import minitorch_dist as ms
>>> from minitorch_dist.amp import DynamicLossScaler, all_finite
>>> scaler = DynamicLossScaler(scale_value=2 ** 10, scale_factor=2, scale_window=1)
>>> scaler.scale(ms.Tensor(1.0)).item(), scaler.unscale(ms.Tensor(2048.0)).item()
(1024.0, 2.0)
>>> _ = scaler.adjust(all_finite((ms.Tensor([1.0, float("inf")]),)))
>>> scaler.scale_value.asnumpy().item()
512.0
"""
import numpy as np

from ..nn.parameter import Parameter
from ..tensor import Tensor

__all__ = ["LossScaler", "StaticLossScaler", "DynamicLossScaler", "all_finite", "init_status"]


def _map(fn, inputs):
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_map(fn, x) for x in inputs)
    return fn(inputs)


def all_finite(inputs, status=None):
    """True (a bool tensor) when every element of every tensor in ``inputs`` is finite."""
    tensors = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    ok = all(bool(np.isfinite(t.asnumpy()).all()) for t in tensors if isinstance(t, Tensor))
    return Tensor(np.array(ok))


def init_status():
    """MindSpore's overflow-status tensor (an Ascend device register): eight zeros here,
    accepted by ``all_finite(grads, status)``."""
    return Tensor(np.zeros(8, np.float32))


def _positive(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive number, got {value!r}")
    return float(value)


class LossScaler:
    """The interface: ``scale(inputs)``, ``unscale(inputs)``, ``adjust(grads_finite)``."""

    def scale(self, inputs):
        raise NotImplementedError

    def unscale(self, inputs):
        raise NotImplementedError

    def adjust(self, grads_finite):
        raise NotImplementedError


class StaticLossScaler(LossScaler):
    """A fixed scale: ``scale`` multiplies by ``scale_value``, ``unscale`` divides."""

    def __init__(self, scale_value):
        value = _positive(scale_value, "scale_value", "StaticLossScaler")
        self.scale_value = Parameter(Tensor(np.float32(value)), name="scale_value",
                                     requires_grad=False)

    def scale(self, inputs):
        return _map(lambda x: x * self.scale_value, inputs)

    def unscale(self, inputs):
        return _map(lambda x: x / self.scale_value, inputs)

    def adjust(self, grads_finite):
        """A static scale never changes; returns False."""
        return False


class DynamicLossScaler(StaticLossScaler):
    """A scale that follows overflow (see the module docstring)."""

    def __init__(self, scale_value, scale_factor, scale_window):
        super().__init__(scale_value)
        self.scale_factor = _positive(scale_factor, "scale_factor", "DynamicLossScaler")
        if isinstance(scale_window, bool) or not isinstance(scale_window, int) or scale_window < 1:
            raise ValueError(f"DynamicLossScaler: scale_window must be a positive int, got {scale_window!r}")
        self.scale_window = scale_window
        self.counter = Parameter(Tensor(np.int32(0)), name="counter", requires_grad=False)

    def adjust(self, grads_finite):
        """Update the scale after a step whose gradients were (not) finite; returns True."""
        finite = bool(grads_finite.asnumpy()) if isinstance(grads_finite, Tensor) else bool(grads_finite)
        scale = float(self.scale_value.asnumpy())
        count = int(self.counter.asnumpy())
        if finite:
            count += 1
            if count >= self.scale_window:
                scale, count = scale * self.scale_factor, 0
        else:
            scale, count = max(scale / self.scale_factor, 1.0), 0
        self.scale_value.set_data(Tensor(np.float32(scale)))
        self.counter.set_data(Tensor(np.int32(count)))
        return True
