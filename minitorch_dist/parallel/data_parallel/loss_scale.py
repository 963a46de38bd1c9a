"""Dynamic loss scaling for fp16 gradient traffic.

Small gradients underflow to zero in float16 (below about 6e-8) and large ones overflow
to inf (above 65504). Loss scaling multiplies the loss, hence every gradient, by ``scale``
before backward so that small values survive the trip through float16, and divides it back
out before the optimizer sees the gradient. The dynamic variant (as in MindSpore's
``DynamicLossScaleUpdateCell`` and PyTorch's ``GradScaler``) searches for the largest safe
scale:

* a step whose gradients hold inf or NaN on **any** rank is skipped on **every** rank (no
  parameter or optimizer change, ``global_step`` does not move) and the scale is divided
  by ``factor`` (never below ``min_scale``);
* after ``growth_interval`` good steps in a row the scale is multiplied by ``factor``
  (never above ``max_scale``);
* a run of ``floor_patience`` skipped steps in a row at ``min_scale`` cannot be cured by a
  smaller scale (the gradients overflow float16, or hold inf/NaN, even unscaled): it warns
  (``LossScaleFloorWarning``, again after 10x and 100x as many) and says what to do.

``DistOpt(opt, loss_scale="dynamic")`` or ``DistOpt(opt, loss_scale=DynamicLossScale(...))``
turns it on; ``backward_and_*`` then seed backward with ``scale`` themselves. When you
compute gradients yourself for ``DistOpt.step``, differentiate ``loss * opt.loss_scale.scale``.

>>> s = DynamicLossScale(init_scale=8.0, growth_interval=2)
>>> [s.update(ok) for ok in (True, False, True, True)], s.scale, s.skipped_steps
([True, False, True, True], 8.0, 1)
"""
import math
import warnings

__all__ = ["DynamicLossScale", "resolve_loss_scale", "LossScaleFloorWarning"]


class LossScaleFloorWarning(RuntimeWarning):
    """Dynamic loss scaling keeps skipping steps at its smallest scale."""


class DynamicLossScale:
    """The scale and its update rule; ``update(finite)`` says whether to apply the step."""

    def __init__(self, init_scale=2.0 ** 16, factor=2.0, growth_interval=2000, min_scale=1.0,
                 max_scale=2.0 ** 24, floor_patience=10):
        owner = "DynamicLossScale"
        if isinstance(floor_patience, bool) or not isinstance(floor_patience, int) \
                or floor_patience < 1:
            raise ValueError(f"{owner}: floor_patience must be a positive int, got "
                             f"{floor_patience!r}")
        self.floor_patience = floor_patience
        self.skips_at_floor = 0
        for name, value in (("init_scale", init_scale), ("min_scale", min_scale),
                            ("max_scale", max_scale)):
            if not _positive_number(value):
                raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")
        if not _positive_number(factor) or factor <= 1:
            raise ValueError(f"{owner}: factor must be a finite number > 1, got {factor!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) \
                or growth_interval < 1:
            raise ValueError(f"{owner}: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        if not min_scale <= init_scale <= max_scale:
            raise ValueError(f"{owner}: need min_scale <= init_scale <= max_scale, got "
                             f"{min_scale}, {init_scale}, {max_scale}")
        self.scale = float(init_scale)
        self.factor = float(factor)
        self.growth_interval = growth_interval
        self.min_scale, self.max_scale = float(min_scale), float(max_scale)
        self.good_steps = 0
        self.skipped_steps = 0

    def update(self, finite):
        """Record one step (``finite``: no rank saw inf/NaN); returns whether to apply it."""
        if not finite:
            at_floor = self.scale <= self.min_scale
            self.scale = max(self.scale / self.factor, self.min_scale)
            self.good_steps = 0
            self.skipped_steps += 1
            self.skips_at_floor = self.skips_at_floor + 1 if at_floor else 0
            if self.skips_at_floor in (self.floor_patience, 10 * self.floor_patience,
                                       100 * self.floor_patience):
                warnings.warn(
                    f"DynamicLossScale: {self.skips_at_floor} steps in a row were skipped at the "
                    f"smallest loss scale {self.min_scale}: the gradients hold inf/NaN or "
                    "overflow float16 (|g| > 65504) even unscaled, so no step is applied. Look "
                    "for a diverging loss (lower the learning rate), clip the gradients "
                    "(clipping=True, clip_Value=...), or send fp32 (dist_option='fp32').",
                    LossScaleFloorWarning, stacklevel=3)
            return False
        self.skips_at_floor = 0
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            self.scale = min(self.scale * self.factor, self.max_scale)
            self.good_steps = 0
        return True

    def __repr__(self):
        return (f"DynamicLossScale(scale={self.scale}, good_steps={self.good_steps}, "
                f"skipped_steps={self.skipped_steps})")


def resolve_loss_scale(value):
    """None, ``"dynamic"`` or a ``DynamicLossScale`` -> None or a ``DynamicLossScale``."""
    if value is None or isinstance(value, DynamicLossScale):
        return value
    if isinstance(value, str) and value.lower() == "dynamic":
        return DynamicLossScale()
    raise ValueError(f"DistOpt: loss_scale must be None, 'dynamic' or a DynamicLossScale, "
                     f"got {value!r}")


def _positive_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value) and value > 0
