"""Every holder of a parameter starts from rank 0's initial values.

Processes that did not seed alike drew different weights. Operator sharding (before it
slices a parameter) and pipelines (before the first step, over a stage's replicas) make the
ranks that hold a parameter agree by one broadcast from the group's rank 0. A parameter made
under ``no_init_parameters`` has no values yet: only its random stream state travels (a few
words), and every holder then draws the same values at first use.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist.communication import run_ranks
>>> def rank(comm):
...     w = ms.Parameter(ms.Tensor(np.full(2, float(comm.rank), np.float32)), name="w")
...     broadcast_initial_values(w, comm)
...     return w.asnumpy().tolist()
>>> run_ranks(2, rank)
[[0.0, 0.0], [0.0, 0.0]]
"""
from ...backend import get_device
from ...backend.arrays import contiguous
from .collectives import communicator_for

__all__ = ["broadcast_initial_values"]


def broadcast_initial_values(param, comm):
    """``param`` takes the values (or, deferred, the random stream) of rank 0 of ``comm``;
    nothing happens without a group of two ranks or more."""
    if comm is None or comm.size == 1:
        return
    if getattr(param, "deferred_init", None) is not None:
        words = param.deferred_init.stream_words()
        communicator_for(comm, get_device("CPU")).broadcast(words, root=0)
        param.deferred_init.set_stream_words(words)
        return
    param.data = contiguous(param.data)          # communicators move contiguous buffers
    communicator_for(comm, param.device).broadcast(param.data, root=0)
