"""Training callbacks of the Wide&Deep example: the loss lines and the AUC evaluation.

``LossCallBack`` prints MindSpore's Wide&Deep loss line,

    epoch: 1 step: 1, wide_loss is 0.6873926, deep_loss is 0.8878349

with the losses printed as float32 NumPy scalars print (their shortest round-trip form), and
can append the same lines to a per-rank log file. ``EvalCallBack`` evaluates the model on
the held-out split at the end of every ``eval_every`` epochs and prints its AUC (next to
the planted model's oracle AUC when one is known).
"""
import os
import time

import numpy as np

from minitorch_dist.train import Callback

__all__ = ["LossCallBack", "EvalCallBack"]


def _scalar(value):
    """A loss output as a NumPy scalar of its own dtype (float32 prints like 0.6873926)."""
    array = np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
    return array.reshape(-1)[0]


class LossCallBack(Callback):
    """Print ``epoch: E step: S, wide_loss is W, deep_loss is D`` every ``per_print_times`` steps.

    ``E`` counts epochs from 1 and ``S`` the steps within the epoch from 1. ``loss_file``
    (optional) receives the same lines; ``verbose=False`` writes only the file (other ranks
    of a data-parallel job). ``history`` keeps every step's ``(wide_loss, deep_loss)``.
    """

    def __init__(self, per_print_times=1, loss_file=None, verbose=True):
        super().__init__()
        if isinstance(per_print_times, bool) or not isinstance(per_print_times, int) or per_print_times < 0:
            raise ValueError(f"LossCallBack: per_print_times must be an int >= 0, got {per_print_times!r}")
        self._per_print_times = per_print_times
        self.loss_file = loss_file
        self.verbose = verbose
        self.history = []
        self._file = None

    def __enter__(self):
        if self.loss_file:
            os.makedirs(os.path.dirname(os.path.abspath(self.loss_file)), exist_ok=True)
            self._file = open(self.loss_file, "a")
        return self

    def __exit__(self, *exc_info):
        if self._file is not None:
            self._file.close()
            self._file = None

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        wide_loss, deep_loss = (_scalar(v) for v in cb_params.net_outputs[:2])
        self.history.append((float(wide_loss), float(deep_loss)))
        if not (np.isfinite(wide_loss) and np.isfinite(deep_loss)):
            raise ValueError(f"epoch: {cb_params.cur_epoch_num} step: {cb_params.cur_step_num}: "
                             f"the loss is {wide_loss}, {deep_loss}; lower the learning rates")
        cur_step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        if self._per_print_times and cb_params.cur_step_num % self._per_print_times == 0:
            line = (f"epoch: {cb_params.cur_epoch_num} step: {cur_step_in_epoch}, "
                    f"wide_loss is {wide_loss!s}, deep_loss is {deep_loss!s}")
            if self.verbose:
                print(line, flush=True)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()


class EvalCallBack(Callback):
    """Evaluate ``model`` on ``eval_dataset`` after every ``eval_every`` epochs (and after the
    last one) and print ``epoch: E, eval auc: A`` (plus ``oracle_auc`` when given).

    ``results`` keeps ``(epoch, auc)`` pairs.
    """

    def __init__(self, model, eval_dataset, eval_every=1, oracle_auc=None, verbose=True):
        super().__init__()
        self.model = model
        self.eval_dataset = eval_dataset
        self.eval_every = eval_every
        self.oracle_auc = oracle_auc
        self.verbose = verbose
        self.results = []

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        epoch = cb_params.cur_epoch_num
        due = self.eval_every and epoch % self.eval_every == 0
        if not due and epoch != cb_params.epoch_num:
            return
        start = time.perf_counter()
        auc = self.model.eval(self.eval_dataset)["auc"]
        self.results.append((epoch, auc))
        if self.verbose:
            oracle = ("" if self.oracle_auc is None
                      else f" (planted model's oracle auc: {self.oracle_auc:.4f})")
            print(f"epoch: {epoch}, eval auc: {auc:.4f}{oracle}, eval_time: "
                  f"{time.perf_counter() - start:.2f}s", flush=True)
