"""Training: ``Model``, callbacks, metrics and checkpoints (``mindspore.train`` look-alike).

>>> from minitorch_dist.train import Model, LossMonitor, TimeMonitor, ModelCheckpoint, CheckpointConfig
"""
from . import callback, metrics
from .checkpoint import (checkpoint_entries, load_checkpoint, load_param_into_net, save_checkpoint,
                         wait_async_saves)
from .callback import (Callback, CallbackList, CallbackParams, CheckpointConfig, History,
                       LambdaCallback, LossMonitor, ModelCheckpoint, ProgressBar, RunContext,
                       TimeMonitor)
from .metrics import (MAE, MSE, Accuracy, Auc, Loss, Metric, Top1CategoricalAccuracy,
                      Top5CategoricalAccuracy, TopKCategoricalAccuracy, get_metric_fn, get_metrics)
from .model import Model
from .loss_scale_manager import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager
from .dataset_helper import DatasetHelper, connect_network_with_dataset
from .train_thor import ConvertModelUtils, ConvertNetUtils

__all__ = ["Model", "Callback", "CallbackList", "CallbackParams", "RunContext", "LossMonitor",
           "TimeMonitor", "ModelCheckpoint", "CheckpointConfig", "ProgressBar", "History",
           "LambdaCallback", "Metric", "Accuracy", "Loss", "MAE", "MSE", "TopKCategoricalAccuracy",
           "Top1CategoricalAccuracy", "Top5CategoricalAccuracy", "Auc", "get_metric_fn", "get_metrics",
           "save_checkpoint", "load_checkpoint", "load_param_into_net", "wait_async_saves",
           "checkpoint_entries", "callback", "metrics", "LossScaleManager", "FixedLossScaleManager",
           "DynamicLossScaleManager", "DatasetHelper", "connect_network_with_dataset",
           "ConvertModelUtils", "ConvertNetUtils"]
