"""An in-process communicator: ``size`` ranks are threads sharing one ``_SharedWorld``.

Used by unit tests (no MPI needed) and as a teaching model of what a collective does.
Every collective call gets a sequence number (ranks call collectives in the same order,
as MPI requires); each rank posts a private copy of its contribution under that number
and then reduces the posted copies itself, in rank order. So results are fresh arrays,
never aliases of another rank's buffer, and nonblocking calls work naturally: post now,
reduce at ``wait()``. Point-to-point messages go through one FIFO per (source, dest, tag).

Every wait has a timeout, and ``run_ranks`` aborts the world when a rank raises, so a
failing rank makes the others fail promptly instead of hanging.
"""
import threading
import time
from collections import defaultdict, deque

from .. import random
from .communicator import Communicator, Request
from .reduction import array_module, check_out, reduce_arrays

__all__ = ["LocalCommunicator", "PeerFailedError", "run_ranks"]


class PeerFailedError(RuntimeError):
    """Raised in a rank that was waiting when another rank failed (the world was aborted)."""


class _Slot:
    def __init__(self, size):
        self.values = [None] * size
        self.posted = 0
        self.taken = 0


class _SharedWorld:
    """State shared by the ranks of one local group: collective slots, message queues, subgroups."""

    def __init__(self, size, timeout):
        self.size = size
        self.timeout = timeout
        self.cond = threading.Condition()
        self.slots = {}
        self.queues = defaultdict(deque)
        self.subworlds = {}
        self.error = None

    def abort(self, reason):
        with self.cond:
            if self.error is None:
                self.error = reason
            self.cond.notify_all()
            children = list(self.subworlds.values())
        for child in children:
            child.abort(reason)

    def _wait_for(self, ready, what):
        """Wait (holding ``cond``) until ``ready()``; raise on abort or timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            if self.error is not None:
                raise PeerFailedError(f"LocalCommunicator {what}: aborted because {self.error}")
            if ready():
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"LocalCommunicator {what}: timed out after {self.timeout} s "
                                   "(did every rank make the same collective calls?)")
            self.cond.wait(remaining)

    def post(self, seq, rank, value):
        with self.cond:
            slot = self.slots.setdefault(seq, _Slot(self.size))
            slot.values[rank] = value
            slot.posted += 1
            self.cond.notify_all()

    def collect(self, seq, what):
        with self.cond:
            self._wait_for(lambda: seq in self.slots and self.slots[seq].posted == self.size, what)
            slot = self.slots[seq]
            slot.taken += 1
            if slot.taken == self.size:
                del self.slots[seq]
            return slot.values

    def put(self, key, value):
        with self.cond:
            self.queues[key].append(value)
            self.cond.notify_all()

    def get(self, key, what):
        with self.cond:
            self._wait_for(lambda: bool(self.queues[key]), what)
            return self.queues[key].popleft()

    def subworld(self, key, size):
        with self.cond:
            if key not in self.subworlds:
                self.subworlds[key] = _SharedWorld(size, self.timeout)
                if self.error is not None:
                    self.subworlds[key].error = self.error
            return self.subworlds[key]


class LocalCommunicator(Communicator):
    """One rank of an in-process group; create the whole group with ``create``.

    >>> import numpy as np
    >>> results = run_ranks(2, lambda comm: comm.allreduce(np.full(2, comm.rank + 1.0)))
    >>> [r.tolist() for r in results]
    [[3.0, 3.0], [3.0, 3.0]]
    """

    backend = "local"

    def __init__(self, world, rank):
        super().__init__()
        self._world = world
        self.rank = self.local_rank = rank
        self.size = self.local_size = world.size
        self._seq = 0
        self._splits = defaultdict(int)

    @classmethod
    def create(cls, world_size, timeout=60.0):
        """``world_size`` communicators sharing one world; use each from its own thread."""
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        world = _SharedWorld(world_size, timeout)
        return [cls(world, rank) for rank in range(world_size)]

    def abort(self, reason="aborted"):
        """Make every rank waiting in this world (and its subgroups) raise ``PeerFailedError``."""
        self._world.abort(reason)

    # ---- helpers --------------------------------------------------------------------
    def _post(self, value):
        seq = self._seq
        self._seq += 1
        self._world.post(seq, self.rank, value)
        return seq

    def _exchange(self, value, what):
        return self._world.collect(self._post(value), f"{what} (rank {self.rank})")

    # ---- collectives ----------------------------------------------------------------
    def _allreduce(self, array, op, out):
        check_out("allreduce", array, out)
        return reduce_arrays(self._exchange(array.copy(), "allreduce"), op, out)

    def _iallreduce(self, array, op, out):
        check_out("allreduce", array, out)
        seq = self._post(array.copy())
        what = f"iallreduce (rank {self.rank})"
        return Request(lambda: reduce_arrays(self._world.collect(seq, what), op, out))

    def _allgather(self, array):
        parts = self._exchange(array.copy(), "allgather")
        shapes = {(p.shape, p.dtype) for p in parts}
        if len(shapes) != 1:
            raise ValueError(f"allgather needs the same shape and dtype on every rank, got "
                             f"{[(p.shape, str(p.dtype)) for p in parts]}")
        return array_module(array).stack(parts)

    def _allgatherv(self, array):
        parts = self._exchange(array.copy(), "allgatherv")
        if len({p.dtype for p in parts}) != 1:
            raise TypeError(f"allgatherv needs the same dtype on every rank, got "
                            f"{[str(p.dtype) for p in parts]}")
        return array_module(array).concatenate(parts), [int(p.shape[0]) for p in parts]

    def _broadcast(self, array, root):
        parts = self._exchange(array.copy() if self.rank == root else None, "broadcast")
        if self.rank != root:
            source = parts[root]
            if source.shape != array.shape or source.dtype != array.dtype:
                raise ValueError(f"broadcast: root sent {source.shape} {source.dtype}, rank "
                                 f"{self.rank} expects {array.shape} {array.dtype}")
            array[...] = source
        return array

    def _reduce_scatter(self, array, op):
        parts = self._exchange(array.copy(), "reduce_scatter")
        chunk = array.shape[0] // self.size
        mine = slice(self.rank * chunk, (self.rank + 1) * chunk)
        return reduce_arrays([p[mine] for p in parts], op)

    def _alltoall(self, array):
        parts = self._exchange(array.copy(), "alltoall")
        if len({(p.shape, p.dtype) for p in parts}) != 1:
            raise ValueError(f"alltoall needs the same shape and dtype on every rank, got "
                             f"{[(p.shape, str(p.dtype)) for p in parts]}")
        chunk = array.shape[0] // self.size
        mine = slice(self.rank * chunk, (self.rank + 1) * chunk)
        return array_module(array).concatenate([p[mine] for p in parts])

    def _send(self, array, dest, tag):
        self._world.put((self.rank, dest, tag), array.copy())

    def _recv(self, out, source, tag):
        message = self._world.get((source, self.rank, tag),
                                  f"recv from {source} tag {tag} (rank {self.rank})")
        if message.shape != out.shape or message.dtype != out.dtype:
            raise ValueError(f"recv: rank {source} sent {message.shape} {message.dtype} with tag "
                             f"{tag}, but the receive buffer is {out.shape} {out.dtype}")
        out[...] = message
        return out

    def _barrier(self):
        self._exchange(None, "barrier")

    def split(self, ranks, name=None):
        """A sub-communicator over ``ranks``; only members need to call it (others get None)."""
        ranks = check_group_ranks(ranks, self.size)
        if self.rank not in ranks:
            return None
        key = (ranks, name)
        nth = self._splits[key]
        self._splits[key] += 1
        world = self._world.subworld((ranks, name, nth), len(ranks))
        return LocalCommunicator(world, ranks.index(self.rank))


def check_group_ranks(ranks, size):
    """Validate a list of distinct ranks in ``[0, size)``; returns it as a tuple."""
    ranks = tuple(ranks)
    if not ranks or len(set(ranks)) != len(ranks) or not all(
            isinstance(r, int) and 0 <= r < size for r in ranks):
        raise ValueError(f"group ranks must be distinct ints in [0, {size}), got {list(ranks)}")
    return ranks


def run_ranks(world_size, fn, timeout=30.0):
    """Run ``fn(comm)`` for every rank of a fresh local group on threads; return the results.

    If a rank raises, the others are aborted (they raise ``PeerFailedError`` at their next
    wait) and the first rank's exception is re-raised here; if the ranks do not finish
    within ``timeout`` seconds, ``TimeoutError`` is raised. It never hangs.

    >>> run_ranks(3, lambda comm: comm.rank * 10)
    [0, 10, 20]
    """
    comms = LocalCommunicator.create(world_size, timeout=timeout)
    results = [None] * world_size
    errors = []
    lock = threading.Lock()

    forked = random.fork_state()

    def body(comm):
        try:
            with random.rank_stream(forked):     # a stream of its own, as a process has
                results[comm.rank] = fn(comm)
        except BaseException as exc:  # noqa: B902 - re-raised in the caller
            with lock:
                errors.append((comm.rank, exc))
            comm.abort(f"rank {comm.rank} raised {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=body, args=(comm,), daemon=True,
                                name=f"local-rank-{comm.rank}") for comm in comms]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        comms[0].abort("run_ranks timed out")
        for thread in threads:
            thread.join(1.0)
        # worded like the ranks' own wait timeout: which of the two fires first is a race
        raise TimeoutError(f"run_ranks: timed out, ranks did not finish within {timeout} s")
    if errors:
        primary = [e for e in errors if not isinstance(e[1], PeerFailedError)] or errors
        raise primary[0][1]
    return results
