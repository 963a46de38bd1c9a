"""Loss scaling cells: ``nn.TrainOneStepWithLossScaleCell`` and the update cells
``nn.DynamicLossScaleUpdateCell`` / ``nn.FixedLossScaleUpdateCell`` (``mindspore.amp``'s
managers hand these out).

A step differentiates ``loss * scale``, divides the gradients by the scale, checks them for
overflow, lets the update cell adjust the scale, and applies the optimizer only when the
gradients are finite (a fixed number as ``scale_sense`` applies every step). It returns
``(loss, overflow, scale)`` as MindSpore does; ``Model``'s callbacks read the loss first.

>>> cell = DynamicLossScaleUpdateCell(loss_scale_value=8.0, scale_factor=2, scale_window=1)
>>> cell.update(False), cell.get_loss_scale()
(False, 16.0)
"""
import numpy as np

from ...gradients import value_and_grad
from ...tensor import Tensor
from ..cell import Cell

__all__ = ["FixedLossScaleUpdateCell", "DynamicLossScaleUpdateCell", "TrainOneStepWithLossScaleCell"]


def positive_number(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive number, got {value!r}")
    return float(value)


def positive_int(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    return value


class FixedLossScaleUpdateCell(Cell):
    """A constant scale; ``update(overflow)`` says whether to skip the step (on overflow)."""

    def __init__(self, loss_scale_value):
        super().__init__()
        self.scale = positive_number(loss_scale_value, "loss_scale_value", type(self).__name__)

    def get_loss_scale(self):
        return self.scale

    def update(self, overflow):
        return bool(overflow)

    def construct(self, loss_scale, overflow):
        return self.update(overflow)


class DynamicLossScaleUpdateCell(FixedLossScaleUpdateCell):
    """A scale that halves (``/ scale_factor``, not below 1) after an overflow and grows
    (``* scale_factor``) after ``scale_window`` good steps in a row."""

    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__(loss_scale_value)
        owner = type(self).__name__
        self.factor = positive_number(scale_factor, "scale_factor", owner)
        self.window = positive_int(scale_window, "scale_window", owner)
        self.good_steps = 0

    def update(self, overflow):
        if overflow:
            self.scale, self.good_steps = max(self.scale / self.factor, 1.0), 0
        else:
            self.good_steps += 1
            if self.good_steps >= self.window:
                self.scale, self.good_steps = self.scale * self.factor, 0
        return bool(overflow)


def _finite(grads):
    return all(bool(np.isfinite(g.asnumpy()).all()) for g in grads)


class TrainOneStepWithLossScaleCell(Cell):
    """``TrainOneStepWithLossScaleCell(network, optimizer, scale_sense)``; ``scale_sense`` is
    an update cell, a number or a one-element Tensor (a fixed scale, every step applied)."""

    def __init__(self, network, optimizer, scale_sense):
        super().__init__(auto_prefix=False)   # a wrapper renames nothing
        self.network = network
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        if isinstance(scale_sense, Tensor):
            scale_sense = float(scale_sense.asnumpy().reshape(()))
        if isinstance(scale_sense, (int, float)) and not isinstance(scale_sense, bool):
            self.update_cell, self.fixed = FixedLossScaleUpdateCell(scale_sense), True
        elif isinstance(scale_sense, FixedLossScaleUpdateCell):
            self.update_cell, self.fixed = scale_sense, False
        else:
            raise TypeError("TrainOneStepWithLossScaleCell: scale_sense must be a loss-scale update "
                            f"cell, a number or a Tensor, got {type(scale_sense).__name__}")
        object.__setattr__(self, "_scale", 1.0)

        def scaled_loss(*inputs):
            loss = self.network(*inputs)
            return loss * self._scale, loss
        self.grad_fn = value_and_grad(scaled_loss, None, self.weights, has_aux=True)

    def construct(self, *inputs):
        scale = self.update_cell.get_loss_scale()
        object.__setattr__(self, "_scale", scale)
        (_, loss), grads = self.grad_fn(*inputs)
        grads = tuple(g / scale for g in grads)
        overflow = not _finite(grads)
        skip = self.update_cell.update(overflow) and not self.fixed
        if not skip:
            self.optimizer(grads)
        return loss, Tensor(np.array(overflow)), Tensor(np.float32(scale))
