"""MindSpore's loss-scale managers for ``Model`` and ``build_train_network``; the update cells
they hand out are ``nn.FixedLossScaleUpdateCell`` and ``nn.DynamicLossScaleUpdateCell``.

* ``FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)``: a constant scale;
  with ``drop_overflow_update`` a step whose gradients overflow is skipped.
* ``DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)``: the
  scale halves after an overflow and doubles after ``scale_window`` good steps.

>>> from minitorch_dist.amp import DynamicLossScaleManager
>>> m = DynamicLossScaleManager(init_loss_scale=8, scale_factor=2, scale_window=1)
>>> m.update_loss_scale(False); m.get_loss_scale()
16.0
"""

from ..nn.layers.loss_scale_cell import (DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell,
                                         positive_number as _positive)

__all__ = ["LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager",
           "FixedLossScaleUpdateCell", "DynamicLossScaleUpdateCell"]


class LossScaleManager:
    """The interface: ``get_loss_scale``, ``update_loss_scale(overflow)``, ``get_update_cell``."""

    def get_loss_scale(self):
        raise NotImplementedError

    def update_loss_scale(self, overflow):
        raise NotImplementedError

    def get_update_cell(self):
        raise NotImplementedError


class FixedLossScaleManager(LossScaleManager):
    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        self.loss_scale = _positive(loss_scale, "loss_scale", "FixedLossScaleManager")
        if not isinstance(drop_overflow_update, bool):
            raise TypeError("FixedLossScaleManager: drop_overflow_update must be True or False, "
                            f"got {drop_overflow_update!r}")
        self.drop_overflow_update = drop_overflow_update

    def get_loss_scale(self):
        return self.loss_scale

    def get_drop_overflow_update(self):
        return self.drop_overflow_update

    def update_loss_scale(self, overflow):
        """A fixed scale does not change."""

    def get_update_cell(self):
        """None without ``drop_overflow_update`` (every step is applied, scaled); else a
        cell that skips overflowing steps."""
        return FixedLossScaleUpdateCell(self.loss_scale) if self.drop_overflow_update else None


class DynamicLossScaleManager(LossScaleManager):
    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        self._cell = DynamicLossScaleUpdateCell(init_loss_scale, scale_factor, scale_window)

    def get_loss_scale(self):
        return self._cell.scale

    def get_drop_overflow_update(self):
        return True

    def update_loss_scale(self, overflow):
        self._cell.update(overflow)

    def get_update_cell(self):
        return self._cell


