"""ProgressBar: a tqdm bar over the steps of each epoch, with the loss as postfix."""
import os
import sys
import time

from ._callback import Callback
from .loss_monitor import loss_value

__all__ = ["ProgressBar", "terminal_output"]

# set in every rank by mpiexec (Open MPI, MPICH/Hydra, PMIx)
_MPI_RANK_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def _is_tty(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False


def terminal_output(stream=None):
    """Whether ``stream`` (default: standard output) is a terminal a bar can redraw: not
    inside an MPI job, whose ranks' output mpiexec forwards line by line through a
    pseudo-terminal (a bar's carriage returns would pile up into one endless line)."""
    if any(os.environ.get(name) for name in _MPI_RANK_VARIABLES):
        return False
    return _is_tty(sys.stdout if stream is None else stream)


class ProgressBar(Callback):
    """One tqdm progress bar per training epoch (steps done, rate, time left, loss).

    The bar is off when standard output is not a terminal (logs and CI stay clean), and in
    the ranks of an MPI job (``terminal_output``), unless ``force=True``; ``force=False``
    always turns it off. The loss shown is refreshed at most
    every ``refresh_seconds`` (reading it waits for the device). ``file`` defaults to
    standard error, like tqdm.
    """

    def __init__(self, force=None, leave=True, refresh_seconds=0.5, file=None):
        super().__init__()
        self.force = force
        self.leave = bool(leave)
        self.refresh_seconds = float(refresh_seconds)
        self.file = file
        self._bar = None
        self._enabled = False
        self._last_postfix = 0.0

    @property
    def enabled(self):
        """Whether bars are drawn in this run."""
        return self._enabled

    def on_train_begin(self, run_context):
        self._enabled = bool(self.force) if self.force is not None else terminal_output()

    def on_train_epoch_begin(self, run_context):
        if not self._enabled:
            return
        from tqdm import tqdm
        self.close()
        cb_params = run_context.original_args()
        total = cb_params.get("batch_num")
        self._bar = tqdm(total=total if isinstance(total, int) and total > 0 else None,
                         desc=f"epoch {cb_params.cur_epoch_num}/{cb_params.get('epoch_num', '?')}",
                         unit="step", leave=self.leave, file=self.file or sys.stderr,
                         dynamic_ncols=True)
        self._last_postfix = 0.0

    def on_train_step_end(self, run_context):
        bar = self._bar
        if bar is None:
            return
        bar.update(1)
        now = time.monotonic()
        if now - self._last_postfix >= self.refresh_seconds:
            self._last_postfix = now
            loss = loss_value(run_context.original_args().get("net_outputs"))
            if loss is not None:
                bar.set_postfix_str(f"loss={loss!s}", refresh=False)

    def on_train_epoch_end(self, run_context):
        self.close()

    def on_train_end(self, run_context):
        self.close()

    def close(self):
        """Close the open bar, if any."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()

    def __exit__(self, *exc_info):
        self.close()
        return None
