"""LossMonitor: print the loss every few steps and stop on a NaN or infinite loss."""
import numpy as np

from ...tensor import Tensor
from ._callback import Callback, step_in_epoch

__all__ = ["LossMonitor", "loss_value"]


def loss_value(net_outputs):
    """The loss in ``net_outputs`` as a NumPy scalar of its own dtype (None if there is none).

    A tuple or list contributes its first element; a loss with several values is averaged.
    """
    if isinstance(net_outputs, (tuple, list)):
        if not net_outputs:
            return None
        net_outputs = net_outputs[0]
    if isinstance(net_outputs, Tensor):
        net_outputs = net_outputs.asnumpy()
    if isinstance(net_outputs, (int, float, np.ndarray, np.generic)):
        array = np.asarray(net_outputs)
        if array.dtype.kind not in "fiub" or array.size == 0:
            return None
        if array.size == 1:
            return array.reshape(-1)[0]
        return array.mean(dtype=array.dtype) if array.dtype.kind == "f" else array.mean()
    return None


class LossMonitor(Callback):
    """Print ``epoch: E step: S, loss is L`` every ``per_print_times`` steps (0: never).

    ``E`` is the 1-based epoch, ``S`` the 1-based step within it and ``L`` the loss at its
    own precision (a float32 loss prints as ``2.3025851``). A NaN or infinite loss raises
    ValueError naming the epoch and step, which ends training.

    >>> from minitorch_dist.train import LossMonitor, RunContext, CallbackParams
    >>> import minitorch_dist as ms
    >>> cb = CallbackParams(cur_epoch_num=1, cur_step_num=3, batch_num=2,
    ...                     net_outputs=ms.Tensor(2.3025851))
    >>> LossMonitor().on_train_step_end(RunContext(cb))
    epoch: 1 step: 1, loss is 2.3025851
    """

    def __init__(self, per_print_times=1):
        super().__init__()
        if isinstance(per_print_times, bool) or not isinstance(per_print_times, int) \
                or per_print_times < 0:
            raise ValueError(f"LossMonitor: per_print_times must be an int >= 0, got {per_print_times!r}")
        self._per_print_times = per_print_times
        self._last_print_step = 0

    def on_train_begin(self, run_context):
        self._last_print_step = run_context.original_args().get("cur_step_num", 0)

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        loss = loss_value(cb_params.net_outputs)
        if loss is None:
            return
        epoch, step = cb_params.cur_epoch_num, step_in_epoch(cb_params)
        if not np.isfinite(loss):
            raise ValueError(f"epoch: {epoch} step: {step}. Invalid loss {loss!s}, terminating training. "
                             "Lower the learning rate, check the data for NaN/Inf, or clip gradients.")
        every = self._per_print_times
        if every and cb_params.cur_step_num - self._last_print_step >= every:
            self._last_print_step = cb_params.cur_step_num
            print(f"epoch: {epoch} step: {step}, loss is {loss!s}", flush=True)

    def on_train_epoch_end(self, run_context):
        metrics = run_context.original_args().get("metrics")
        if metrics:
            print(f"Eval result: epoch {run_context.original_args().cur_epoch_num}, metrics: {metrics}",
                  flush=True)
