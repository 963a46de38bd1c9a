"""TimeMonitor: print the time of each training epoch and of its average step."""
import time

from ._callback import Callback

__all__ = ["TimeMonitor"]


class TimeMonitor(Callback):
    """Print ``Train epoch time: T ms, per step time: t ms`` after every epoch.

    The per-step time divides by the steps the epoch actually ran (``data_size``, when
    given, overrides that count, as in MindSpore).
    """

    def __init__(self, data_size=None):
        super().__init__()
        if data_size is not None and (isinstance(data_size, bool) or not isinstance(data_size, int)
                                      or data_size <= 0):
            raise ValueError(f"TimeMonitor: data_size must be a positive int or None, got {data_size!r}")
        self.data_size = data_size
        self._epoch_start = None
        self._steps = 0

    def on_train_epoch_begin(self, run_context):
        self._steps = 0
        self._epoch_start = time.perf_counter()

    def on_train_step_end(self, run_context):
        self._steps += 1

    def on_train_epoch_end(self, run_context):
        if self._epoch_start is None:
            return
        epoch_ms = (time.perf_counter() - self._epoch_start) * 1000.0
        steps = self.data_size or self._steps or 1
        mode = str(run_context.original_args().get("mode", "train")).title()
        print(f"{mode} epoch time: {epoch_ms:5.3f} ms, per step time: {epoch_ms / steps:5.3f} ms",
              flush=True)
