"""Learning-rate schedules: cells called with the global step, and per-step lists.

Two forms, as in MindSpore:

* ``LearningRateSchedule`` cells (``ExponentialDecayLR``, ``CosineDecayLR``, ...) compute the
  rate of step ``s`` on demand; pass one as an optimizer's ``learning_rate``.
* the list helpers (``piecewise_constant_lr``, ``cosine_decay_lr``, ...) return a Python list
  with one rate per step; an optimizer given a list uses entry ``min(step, len - 1)``.

The rates are computed with Python floats (no tensors): a schedule costs a few hundred
nanoseconds per step.
"""
import math

import numpy as np

from ...tensor import Tensor
from ..cell import Cell

__all__ = ["LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
           "CosineDecayLR", "PolynomialDecayLR", "WarmUpLR",
           "piecewise_constant_lr", "exponential_decay_lr", "natural_exp_decay_lr",
           "inverse_decay_lr", "cosine_decay_lr", "polynomial_decay_lr", "warmup_lr"]


# ---- argument checks ----------------------------------------------------------------------
def _number(owner, name, value, low=0.0, strict=False):
    """``value`` as a float, checked to be ``>= low`` (``> low`` when ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not (value > low if strict else value >= low) or math.isinf(value):
        raise ValueError(f"{owner}: {name} must be {'>' if strict else '>='} {low:g} and finite, "
                         f"got {value!r}")
    return value


def _count(owner, name, value, minimum=1):
    """``value`` as an int, checked to be ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{owner}: {name} must be >= {minimum}, got {value!r}")
    return int(value)


def _step_value(global_step):
    """The step as a Python int, from an int or a one-element Tensor."""
    if isinstance(global_step, Tensor):
        return int(global_step.asnumpy().reshape(-1)[0])
    return _count("LearningRateSchedule", "global_step", global_step, minimum=0)


# ---- schedule cells -----------------------------------------------------------------------
class LearningRateSchedule(Cell):
    """Base class: ``lr_at(step)`` gives the rate of a step as a float.

    Calling the cell with the global step (an int or a Tensor, MindSpore style) returns the
    rate as a float32 Tensor. Subclasses implement ``lr_at``; a subclass that only
    overrides ``construct`` also works (the optimizer then calls it with a step Tensor).

    >>> from minitorch_dist import nn
    >>> class Halving(nn.LearningRateSchedule):
    ...     def lr_at(self, step):
    ...         return 1.0 / 2 ** step
    >>> Halving()(3).asnumpy().item()
    0.125
    """

    def lr_at(self, step):
        if type(self).construct is LearningRateSchedule.construct:
            raise NotImplementedError(f"{type(self).__name__} must define lr_at(step) or construct(global_step)")
        out = self.construct(Tensor(np.array(step, np.int32), device="CPU"))
        return float(out.asnumpy().reshape(-1)[0]) if isinstance(out, Tensor) else float(out)

    def construct(self, global_step):
        return Tensor(np.array(self.lr_at(_step_value(global_step)), np.float32), device="CPU")


class _DecayLR(LearningRateSchedule):
    """Shared arguments of the exponential, natural-exponential and inverse decays."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        owner = type(self).__name__
        self.learning_rate = _number(owner, "learning_rate", learning_rate)
        self.decay_rate = _number(owner, "decay_rate", decay_rate, strict=True)
        self.decay_steps = _count(owner, "decay_steps", decay_steps)
        self.is_stair = bool(is_stair)

    def _progress(self, step):
        p = step / self.decay_steps
        return math.floor(p) if self.is_stair else p

    def extra_repr(self):
        return (f"learning_rate={self.learning_rate}, decay_rate={self.decay_rate}, "
                f"decay_steps={self.decay_steps}, is_stair={self.is_stair}")


class ExponentialDecayLR(_DecayLR):
    """``learning_rate * decay_rate ** p`` with ``p = step / decay_steps`` (floored if ``is_stair``).

    >>> from minitorch_dist import nn
    >>> round(nn.ExponentialDecayLR(0.1, 0.5, 2).lr_at(4), 6)
    0.025
    """

    def lr_at(self, step):
        return self.learning_rate * self.decay_rate ** self._progress(step)


class NaturalExpDecayLR(_DecayLR):
    """``learning_rate * exp(-decay_rate * p)`` with ``p = step / decay_steps``."""

    def lr_at(self, step):
        return self.learning_rate * math.exp(-self.decay_rate * self._progress(step))


class InverseDecayLR(_DecayLR):
    """``learning_rate / (1 + decay_rate * p)`` with ``p = step / decay_steps``."""

    def lr_at(self, step):
        return self.learning_rate / (1.0 + self.decay_rate * self._progress(step))


class CosineDecayLR(LearningRateSchedule):
    """Half a cosine from ``max_lr`` at step 0 down to ``min_lr`` at ``decay_steps`` (then flat).

    >>> from minitorch_dist import nn
    >>> sched = nn.CosineDecayLR(0.0, 1.0, 4)
    >>> [round(sched.lr_at(s), 4) for s in (0, 2, 4, 9)]
    [1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        self.min_lr = _number("CosineDecayLR", "min_lr", min_lr)
        self.max_lr = _number("CosineDecayLR", "max_lr", max_lr, strict=True)
        if self.min_lr >= self.max_lr:
            raise ValueError(f"CosineDecayLR: min_lr ({self.min_lr}) must be smaller than max_lr ({self.max_lr})")
        self.decay_steps = _count("CosineDecayLR", "decay_steps", decay_steps)

    def lr_at(self, step):
        p = min(step, self.decay_steps) / self.decay_steps
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1.0 + math.cos(math.pi * p))


class PolynomialDecayLR(LearningRateSchedule):
    """``(learning_rate - end_learning_rate) * (1 - p) ** power + end_learning_rate``.

    ``p = min(step, decay_steps) / decay_steps``; with ``update_decay_steps`` the horizon
    grows instead to the next multiple of ``decay_steps`` past the step (a restart-free cycle).
    """

    def __init__(self, learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False):
        super().__init__()
        owner = "PolynomialDecayLR"
        self.learning_rate = _number(owner, "learning_rate", learning_rate)
        self.end_learning_rate = _number(owner, "end_learning_rate", end_learning_rate)
        self.decay_steps = _count(owner, "decay_steps", decay_steps)
        self.power = _number(owner, "power", power, strict=True)
        self.update_decay_steps = bool(update_decay_steps)

    def lr_at(self, step):
        return _polynomial(self.learning_rate, self.end_learning_rate, step, self.decay_steps,
                           self.power, self.update_decay_steps)


class WarmUpLR(LearningRateSchedule):
    """Linear warm-up: ``learning_rate * min(step, warmup_steps) / warmup_steps``.

    >>> from minitorch_dist import nn
    >>> [nn.WarmUpLR(0.1, 4).lr_at(s) for s in (0, 2, 8)]
    [0.0, 0.05, 0.1]
    """

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate = _number("WarmUpLR", "learning_rate", learning_rate)
        self.warmup_steps = _count("WarmUpLR", "warmup_steps", warmup_steps)

    def lr_at(self, step):
        return self.learning_rate * min(step, self.warmup_steps) / self.warmup_steps


def _polynomial(start, end, step, decay, power, grow):
    if grow:
        decay = decay * max(math.ceil(step / decay), 1)
    else:
        step = min(step, decay)
    return (start - end) * (1.0 - step / decay) ** power + end


# ---- per-step lists (MindSpore's dynamic learning-rate functions) --------------------------
def _per_epoch(owner, total_step, step_per_epoch, rate_of_epoch):
    total_step = _count(owner, "total_step", total_step)
    step_per_epoch = _count(owner, "step_per_epoch", step_per_epoch)
    return [rate_of_epoch(i // step_per_epoch) for i in range(total_step)]


def piecewise_constant_lr(milestone, learning_rates):
    """``learning_rates[k]`` for the steps before ``milestone[k]``; ``milestone[-1]`` steps in all.

    >>> from minitorch_dist import nn
    >>> nn.piecewise_constant_lr([2, 5], [0.1, 0.05])
    [0.1, 0.1, 0.05, 0.05, 0.05]
    """
    owner = "piecewise_constant_lr"
    milestone, learning_rates = list(milestone), list(learning_rates)
    if not milestone or len(milestone) != len(learning_rates):
        raise ValueError(f"{owner}: milestone and learning_rates must be non-empty and of equal length, "
                         f"got {len(milestone)} and {len(learning_rates)}")
    out, last = [], 0
    for k, (end, rate) in enumerate(zip(milestone, learning_rates)):
        end = _count(owner, f"milestone[{k}]", end)
        if end <= last:
            raise ValueError(f"{owner}: milestone must be strictly increasing, got {milestone}")
        out.extend([_number(owner, f"learning_rates[{k}]", rate)] * (end - last))
        last = end
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """``learning_rate * decay_rate ** (epoch / decay_epoch)`` per step (epoch = step // step_per_epoch).

    >>> from minitorch_dist import nn
    >>> [round(x, 4) for x in nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1)]
    [0.1, 0.1, 0.09, 0.09, 0.081, 0.081]
    """
    owner = "exponential_decay_lr"
    lr, rate = _number(owner, "learning_rate", learning_rate), _number(owner, "decay_rate", decay_rate, strict=True)
    decay = _count(owner, "decay_epoch", decay_epoch)
    progress = (lambda e: e // decay) if is_stair else (lambda e: e / decay)
    return _per_epoch(owner, total_step, step_per_epoch, lambda e: lr * rate ** progress(e))


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """``learning_rate * exp(-decay_rate * epoch / decay_epoch)`` per step."""
    owner = "natural_exp_decay_lr"
    lr, rate = _number(owner, "learning_rate", learning_rate), _number(owner, "decay_rate", decay_rate, strict=True)
    decay = _count(owner, "decay_epoch", decay_epoch)
    progress = (lambda e: e // decay) if is_stair else (lambda e: e / decay)
    return _per_epoch(owner, total_step, step_per_epoch, lambda e: lr * math.exp(-rate * progress(e)))


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                     is_stair=False):
    """``learning_rate / (1 + decay_rate * epoch / decay_epoch)`` per step."""
    owner = "inverse_decay_lr"
    lr, rate = _number(owner, "learning_rate", learning_rate), _number(owner, "decay_rate", decay_rate, strict=True)
    decay = _count(owner, "decay_epoch", decay_epoch)
    progress = (lambda e: e // decay) if is_stair else (lambda e: e / decay)
    return _per_epoch(owner, total_step, step_per_epoch, lambda e: lr / (1.0 + rate * progress(e)))


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """Half a cosine from ``max_lr`` to ``min_lr`` over ``decay_epoch`` epochs, one rate per step.

    >>> from minitorch_dist import nn
    >>> [round(x, 4) for x in nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2)]
    [0.1, 0.1, 0.055, 0.055, 0.01, 0.01]
    """
    owner = "cosine_decay_lr"
    low, high = _number(owner, "min_lr", min_lr), _number(owner, "max_lr", max_lr, strict=True)
    if low >= high:
        raise ValueError(f"{owner}: min_lr ({low}) must be smaller than max_lr ({high})")
    decay = _count(owner, "decay_epoch", decay_epoch)
    return _per_epoch(owner, total_step, step_per_epoch,
                      lambda e: low + 0.5 * (high - low) * (1.0 + math.cos(math.pi * min(e, decay) / decay)))


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch,
                        power, update_decay_epoch=False):
    """``PolynomialDecayLR`` per step, counted in epochs.

    >>> from minitorch_dist import nn
    >>> [round(x, 4) for x in nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5)]
    [0.1, 0.1, 0.0736, 0.0736, 0.01, 0.01]
    """
    owner = "polynomial_decay_lr"
    start, end = _number(owner, "learning_rate", learning_rate), _number(owner, "end_learning_rate", end_learning_rate)
    decay = _count(owner, "decay_epoch", decay_epoch)
    power = _number(owner, "power", power, strict=True)
    return _per_epoch(owner, total_step, step_per_epoch,
                      lambda e: _polynomial(start, end, e, decay, power, bool(update_decay_epoch)))


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """Linear warm-up over ``warmup_epoch`` epochs, one rate per step.

    >>> from minitorch_dist import nn
    >>> nn.warmup_lr(0.1, 6, 2, 2)
    [0.0, 0.0, 0.05, 0.05, 0.1, 0.1]
    """
    owner = "warmup_lr"
    lr = _number(owner, "learning_rate", learning_rate)
    warm = _count(owner, "warmup_epoch", warmup_epoch)
    return _per_epoch(owner, total_step, step_per_epoch, lambda e: lr * min(e, warm) / warm)
