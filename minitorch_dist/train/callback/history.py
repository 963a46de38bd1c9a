"""History (the loss and evaluation results of every epoch) and LambdaCallback."""
from ._callback import Callback, _HOOKS
from .loss_monitor import loss_value

__all__ = ["History", "LambdaCallback"]


class History(Callback):
    """Record, per epoch, the last step's loss (``history["net_output"]``) and, in
    ``Model.fit``, each evaluation result (``history[<metric name>]``); ``epoch`` lists the
    epoch numbers."""

    def __init__(self):
        super().__init__()
        self.epoch = []
        self.history = {}

    def on_train_begin(self, run_context):
        self.epoch = []
        self.history = {}

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        self.epoch.append(cb_params.cur_epoch_num)
        loss = loss_value(cb_params.get("net_outputs"))
        if loss is not None:
            self.history.setdefault("net_output", []).append(float(loss))
        for name, value in (cb_params.get("metrics") or {}).items():
            self.history.setdefault(name, []).append(value)


class LambdaCallback(Callback):
    """A callback from plain functions: ``LambdaCallback(on_train_epoch_end=fn)`` calls
    ``fn(run_context)`` at that point. Every ``on_train_*``/``on_eval_*`` hook is accepted."""

    def __init__(self, **hooks):
        super().__init__()
        for name, fn in hooks.items():
            if name not in _HOOKS:
                raise TypeError(f"LambdaCallback: unknown hook {name!r}; hooks are {list(_HOOKS)}")
            if fn is not None:
                if not callable(fn):
                    raise TypeError(f"LambdaCallback: {name} must be callable, got {type(fn).__name__}")
                setattr(self, name, fn)
