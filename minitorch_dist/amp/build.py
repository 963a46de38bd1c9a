"""``build_train_network``: a network, an optimizer and a loss made into one training step
with mixed precision and loss scaling, by level as MindSpore configures them:

* ``"O0"``/``"O1"``: float32 network (O1: white list in float16), no loss scaling;
* ``"O2"``: float16 network with batch norms in float32, ``DynamicLossScaleManager()``;
* ``"O3"``: float16 network, no loss scaling.

``keep_batchnorm_fp32``, ``cast_model_type`` and ``loss_scale_manager`` override the level's
choice. With a loss-scale manager the step is a ``TrainOneStepWithLossScaleCell``, else a
``TrainOneStepCell``.
"""
from ..backend import dtypes
from ..nn.cell import Cell
from ..nn.layers.mixed_precision import output_to, to_float
from ..nn.wrappers import TrainOneStepCell, WithLossCell
from .auto_mixed_precision import AMP_LEVELS, auto_mixed_precision
from .lists import black_cells
from .loss_scale_manager import DynamicLossScaleManager, LossScaleManager
from ..nn.layers.loss_scale_cell import TrainOneStepWithLossScaleCell

__all__ = ["build_train_network", "apply_amp_level"]

_OPTIONS = ("keep_batchnorm_fp32", "cast_model_type", "loss_scale_manager")
_LEVEL_DEFAULTS = {"O0": (False, dtypes.float32, None), "O1": (False, dtypes.float32, None),
                   "O2": (True, dtypes.float16, "dynamic"), "O3": (False, dtypes.float16, None)}


def _options(level, kwargs, owner):
    if level not in AMP_LEVELS:
        raise ValueError(f"{owner}: level must be one of {list(AMP_LEVELS)}, got {level!r}")
    unknown = sorted(set(kwargs) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"{owner}: unexpected keyword argument(s) {unknown}; expected {list(_OPTIONS)}")
    keep_bn, cast_type, manager = _LEVEL_DEFAULTS[level]
    keep_bn = kwargs.get("keep_batchnorm_fp32", keep_bn)
    cast_type = dtypes.to_dtype(kwargs.get("cast_model_type", cast_type))
    manager = kwargs.get("loss_scale_manager", manager)
    if manager == "dynamic":
        manager = DynamicLossScaleManager()
    if manager is not None and not isinstance(manager, LossScaleManager):
        raise TypeError(f"{owner}: loss_scale_manager must be a LossScaleManager (e.g. "
                        f"FixedLossScaleManager()), got {type(manager).__name__}")
    return keep_bn, cast_type, manager


def apply_amp_level(network, level, keep_bn, cast_type):
    """The network's precision for ``level`` with the overrides applied."""
    if level == "O1":
        return auto_mixed_precision(network, "O1")
    if cast_type == dtypes.float16:
        to_float(network, dtypes.float16)
        if keep_bn:
            for _, cell in network.cells_and_names():
                if isinstance(cell, tuple(black_cells())):
                    to_float(cell, dtypes.float32)
        output_to(network, dtypes.float32)
    return network


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0", **kwargs):
    """One training step of ``network`` (see the module docstring); returns the step Cell."""
    if not isinstance(network, Cell):
        raise TypeError(f"build_train_network: network must be a Cell, got {type(network).__name__}")
    if boost_level != "O0":
        raise ValueError(f"build_train_network: boost_level must be 'O0' here, got {boost_level!r} "
                         "(MindSpore's boost algorithms target Ascend)")
    keep_bn, cast_type, manager = _options(level, kwargs, "build_train_network")
    network = apply_amp_level(network, level, keep_bn, cast_type)
    if loss_fn is not None:
        network = WithLossCell(network, loss_fn)
    if manager is None:
        return TrainOneStepCell(network, optimizer)
    update_cell = manager.get_update_cell()
    scale = update_cell if update_cell is not None else manager.get_loss_scale()
    return TrainOneStepWithLossScaleCell(network, optimizer, scale)
