"""``mindspore.train.loss_scale_manager``: the loss-scale managers under their 1.x module path
(the same classes as ``minitorch_dist.amp``'s)."""
from ..amp.loss_scale_manager import (DynamicLossScaleManager, FixedLossScaleManager,  # noqa: F401
                                      LossScaleManager)

__all__ = ["LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager"]
