"""Per-thread interpreter state: grad mode and the parallel executors' call hooks.

The in-process rank backend (``communication.run_ranks``) runs one rank per thread. Grad
mode and the primitive/cell hooks must then belong to the thread that set them, or one
rank tracing without the tape (or installing its executor) would change what another rank
records. Each thread starts from the defaults given here.
"""
import threading

__all__ = ["ThreadState"]


class ThreadState(threading.local):
    """A per-thread mapping with defaults: ``state["key"]`` reads this thread's value."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)

    def __getitem__(self, key):
        return self.__dict__[key]

    def __setitem__(self, key, value):
        self.__dict__[key] = value
