"""Callback, RunContext and the callback list that ``Model`` drives.

``Model.train`` calls, in order: ``on_train_begin``; per epoch ``on_train_epoch_begin``,
per step ``on_train_step_begin`` / ``on_train_step_end``, then ``on_train_epoch_end``;
finally ``on_train_end``. ``Model.eval`` calls the ``on_eval_*`` twins. Each receives a
``RunContext``; ``run_context.original_args()`` is the ``cb_params`` namespace.

As in MindSpore 2.x, the new-style hooks call the 1.x names (``begin``, ``epoch_begin``,
``step_begin``, ``step_end``, ``epoch_end``, ``end``) by default, so callbacks written
either way work. Callbacks are context managers: ``Model`` enters them for the run and
exits them even when training fails (a progress bar closes, a background save finishes).
"""
from contextlib import ExitStack

__all__ = ["Callback", "RunContext", "CallbackParams", "CallbackList", "step_in_epoch"]

_HOOKS = ("on_train_begin", "on_train_epoch_begin", "on_train_step_begin", "on_train_step_end",
          "on_train_epoch_end", "on_train_end", "on_eval_begin", "on_eval_epoch_begin",
          "on_eval_step_begin", "on_eval_step_end", "on_eval_epoch_end", "on_eval_end")


class Callback:
    """Base class of training and evaluation callbacks: override the hooks you need.

    >>> from minitorch_dist.train import Callback
    >>> class StopAfterTwoSteps(Callback):
    ...     def on_train_step_end(self, run_context):
    ...         if run_context.original_args().cur_step_num >= 2:
    ...             run_context.request_stop()
    """

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return None

    # ---- MindSpore 1.x names (called by the new-style hooks below) ----------------------
    def begin(self, run_context):
        """Called once before the run."""

    def epoch_begin(self, run_context):
        """Called before each epoch."""

    def step_begin(self, run_context):
        """Called before each step."""

    def step_end(self, run_context):
        """Called after each step."""

    def epoch_end(self, run_context):
        """Called after each epoch."""

    def end(self, run_context):
        """Called once after the run."""

    # ---- training ---------------------------------------------------------------------
    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    # ---- evaluation -------------------------------------------------------------------
    def on_eval_begin(self, run_context):
        self.begin(run_context)

    def on_eval_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_eval_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_eval_step_end(self, run_context):
        self.step_end(run_context)

    def on_eval_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_eval_end(self, run_context):
        self.end(run_context)


class CallbackParams(dict):
    """The ``cb_params`` namespace: a dict whose keys are also attributes.

    Training sets ``mode`` ("train"), ``network``, ``train_network``, ``loss_fn``,
    ``optimizer``, ``train_dataset``, ``epoch_num``, ``batch_num``, ``initial_epoch``,
    ``cur_epoch_num`` (1-based), ``cur_step_num`` (global, 1-based), ``cur_step_in_epoch``,
    ``net_outputs`` (the loss), ``train_dataset_element`` (the batch), ``dataset_sink_mode``
    and ``list_callback``; ``metrics`` holds the last evaluation in ``Model.fit``.
    Evaluation sets ``mode`` ("eval"), ``eval_network``, ``valid_dataset``, ``batch_num``,
    ``cur_step_num``, ``net_outputs`` and, at ``on_eval_end``, ``metrics``.
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"cb_params has no attribute {name!r}; it has {sorted(self)}") from None

    def __setattr__(self, name, value):
        self[name] = value

    def __delattr__(self, name):
        del self[name]


class RunContext:
    """What a callback receives: ``original_args()`` (the cb_params) and ``request_stop()``."""

    def __init__(self, original_args):
        if not isinstance(original_args, dict):
            raise TypeError("RunContext needs a dict of callback parameters, "
                            f"got {type(original_args).__name__}")
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self):
        """The ``cb_params`` namespace of the run (see :class:`CallbackParams`)."""
        return self._original_args

    def request_stop(self):
        """Ask the run to stop after the current step (the end hooks still run)."""
        self._stop_requested = True

    def get_stop_requested(self):
        return self._stop_requested


class CallbackList(Callback):
    """Several callbacks driven as one, in the order given."""

    def __init__(self, callbacks=None):
        self.callbacks = as_callback_list(callbacks)
        self._stack = None

    def __enter__(self):
        self._stack = ExitStack()
        for cb in self.callbacks:
            self._stack.enter_context(cb)
        return self

    def __exit__(self, *exc_info):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc_info) if stack is not None else None


def _dispatcher(hook):
    def dispatch(self, run_context):
        for cb in self.callbacks:
            getattr(cb, hook)(run_context)
    dispatch.__name__ = hook
    dispatch.__doc__ = f"Call ``{hook}`` of every callback."
    return dispatch


for _hook in _HOOKS:
    setattr(CallbackList, _hook, _dispatcher(_hook))


def as_callback_list(callbacks):
    """A list of Callbacks from None, one Callback, or a list/tuple of them."""
    if callbacks is None:
        return []
    if isinstance(callbacks, CallbackList):
        return list(callbacks.callbacks)
    if isinstance(callbacks, Callback):
        return [callbacks]
    if isinstance(callbacks, (list, tuple)):
        for k, cb in enumerate(callbacks):
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks[{k}] must be a Callback (minitorch_dist.train.Callback), "
                                f"got {type(cb).__name__}")
        return list(callbacks)
    raise TypeError(f"callbacks must be a Callback or a list of Callbacks, got {type(callbacks).__name__}")


def step_in_epoch(cb_params):
    """The 1-based step number within the current epoch (``cur_step_in_epoch`` when the
    run sets it, else derived from the global step and ``batch_num`` as MindSpore does)."""
    step = cb_params.get("cur_step_in_epoch")
    if step is not None:
        return step
    batch_num = cb_params.get("batch_num")
    if isinstance(batch_num, int) and batch_num > 0:
        return (cb_params.cur_step_num - 1) % batch_num + 1
    return cb_params.cur_step_num
