"""Partial update: local SGD with a rotating chunk of parameters averaged every step.

SINGA's ``backward_and_partial_update``: each rank updates all of its parameters with its
own (not averaged) gradient, then one chunk of the parameters is averaged across ranks
(an allreduce of the parameter *values*, divided by the world size). The next step
averages the next chunk, and so on round-robin: the traffic per step is one chunk instead
of the whole model, at the price of replicas drifting apart between their turns.

The chunks here are contiguous byte ranges of all parameters laid end to end (a parameter
may straddle two chunks), with ``period = ceil(total_bytes / buff_size)`` chunks of at
most about ``buff_size`` bytes each. Guarantee: **every parameter element is averaged
exactly once in every window of ``period`` consecutive steps**, so all replicas agree on a
parameter at most ``period`` steps after its last averaging if nobody updated it since.
Optimizer state (momentum) stays local, as in SINGA.

>>> s = PartialUpdateSchedule([6, 2], [4, 4], buff_size=16)
>>> s.period, s.chunk(0), s.chunk(1)
(2, [(0, 0, 4)], [(0, 4, 6), (1, 0, 2)])
"""
import numpy as np

from .buckets import Bucket, pack

__all__ = ["PartialUpdateSchedule", "average_chunk"]


def _ceil_div(a, b):
    return -(-a // b)


class PartialUpdateSchedule:
    """Which ``(position, start, stop)`` element ranges (flat) are averaged at each step.

    ``sizes`` are element counts and ``itemsizes`` bytes per element, one per parameter.
    """

    def __init__(self, sizes, itemsizes, buff_size):
        if isinstance(buff_size, bool) or not isinstance(buff_size, (int, np.integer)) \
                or buff_size < 1:
            raise ValueError(f"PartialUpdateSchedule: buff_size must be a positive int, got "
                             f"{buff_size!r}")
        total = sum(int(n) * int(s) for n, s in zip(sizes, itemsizes))
        self.total_bytes = total
        self.period = max(1, _ceil_div(total, int(buff_size)))
        self._chunks = [[] for _ in range(self.period)]
        k_count, offset = self.period, 0
        for pos, (n, size) in enumerate(zip(sizes, itemsizes)):
            n, size = int(n), int(size)
            # element j (byte offset offset + j*size) belongs to chunk (offset + j*size)*K // total
            first = (offset * k_count) // total if n else 0
            last = ((offset + (n - 1) * size) * k_count) // total if n else -1
            for k in range(first, last + 1):
                lo = max(0, _ceil_div(k * total - offset * k_count, size * k_count))
                hi = min(n, _ceil_div((k + 1) * total - offset * k_count, size * k_count))
                if hi > lo:
                    self._chunks[k].append((pos, lo, hi))
            offset += n * size

    def chunk(self, step):
        """The ranges averaged at ``step`` (counted from 0): chunk ``step % period``."""
        return list(self._chunks[step % self.period])


def average_chunk(comm, params, ranges, world_size):
    """Replace the parameter elements in ``ranges`` by their mean over ranks, in place.

    One allreduce per (device, dtype) group of the chunk.
    """
    groups = {}
    for pos, lo, hi in ranges:
        p = params[pos]
        groups.setdefault((p.device, np.dtype(p.dtype)), []).append((pos, lo, hi))
    for (device, dtype), members in groups.items():
        views = []
        for pos, lo, hi in members:
            p = params[pos]
            if not p.data.flags.c_contiguous:
                p.data = device.xp.ascontiguousarray(p.data)
            views.append(p.data.reshape(-1)[lo:hi])
        bucket = Bucket(range(len(views)), [v.size for v in views])
        flat = pack(bucket, views, device.xp.empty(bucket.size, dtype))
        comm.allreduce(flat, out=flat)
        flat /= world_size
        for view, (_, start, stop) in zip(views, bucket.slices()):
            view[...] = flat[start:stop]
