"""Training callbacks (``mindspore.train.callback`` look-alike)."""
from ._callback import Callback, CallbackList, CallbackParams, RunContext, step_in_epoch
from .loss_monitor import LossMonitor, loss_value
from .time_monitor import TimeMonitor
from .model_checkpoint import CheckpointConfig, ModelCheckpoint
from .progress_bar import ProgressBar
from .history import History, LambdaCallback

__all__ = ["Callback", "CallbackList", "CallbackParams", "RunContext", "step_in_epoch",
           "LossMonitor", "loss_value", "TimeMonitor", "CheckpointConfig", "ModelCheckpoint",
           "ProgressBar", "History", "LambdaCallback"]
