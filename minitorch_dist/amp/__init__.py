"""``mindspore.amp``: mixed precision and loss scaling.

* ``auto_mixed_precision(net, "O0"|"O1"|"O2"|"O3")``, ``custom_mixed_precision``,
  ``get_white_list``/``get_black_list`` (MindSpore's lists);
* ``build_train_network(net, optimizer, loss_fn, level=..., loss_scale_manager=...)``;
* ``StaticLossScaler``/``DynamicLossScaler`` and ``all_finite`` for hand-written steps;
* ``FixedLossScaleManager``/``DynamicLossScaleManager`` for ``Model`` and
  ``build_train_network``; ``TrainOneStepWithLossScaleCell`` and its update cells.
"""
from .auto_mixed_precision import AMP_LEVELS, auto_mixed_precision, custom_mixed_precision
from .build import build_train_network
from .lists import get_black_list, get_white_list
from .loss_scale_manager import (DynamicLossScaleManager, DynamicLossScaleUpdateCell,
                                 FixedLossScaleManager, FixedLossScaleUpdateCell,
                                 LossScaleManager)
from .loss_scaler import DynamicLossScaler, LossScaler, StaticLossScaler, all_finite, init_status
from ..nn.layers.loss_scale_cell import TrainOneStepWithLossScaleCell

__all__ = ["AMP_LEVELS", "auto_mixed_precision", "custom_mixed_precision", "build_train_network",
           "get_black_list", "get_white_list", "LossScaleManager", "FixedLossScaleManager",
           "DynamicLossScaleManager", "FixedLossScaleUpdateCell", "DynamicLossScaleUpdateCell",
           "LossScaler", "StaticLossScaler", "DynamicLossScaler", "all_finite", "init_status",
           "TrainOneStepWithLossScaleCell"]
