"""The Communicator interface: the collectives every data/pipeline-parallel feature uses.

Arrays are NumPy (host) or CuPy (device) arrays, contiguous; results come back in the
caller's array module. Each public method counts one call and the payload bytes this rank
puts on the wire, so ``comm_stats()`` reports what a feature really sent (fp16 halves it,
top-K sends a small fraction). Implementations only write the ``_``-prefixed methods:
``MPICommunicator`` (mpi4py), ``NCCLCommunicator`` (CuPy NCCL) and ``LocalCommunicator``
(threads in one process, for unit tests).

Before the first collective of each kind (every one under ``MINITORCH_DIST_DEBUG=detail``)
the ranks exchange a small signature and raise ``CollectiveMismatchError`` if they disagree
(see ``desync``). Each collective also records that this rank is waiting in it, so that
``watchdog`` can end the job when a peer has left instead of letting it hang.

Every wait for other ranks (each collective, send/recv, the ``wait()`` of a nonblocking
request) runs inside ``hooks.blocking_wait()``: under the launcher's ``--compute-slots`` the
rank gives its compute slot back for the wait and takes one again before it computes on.
"""
import abc
import contextlib
import time
from collections import defaultdict

import numpy as np

from . import desync, hooks
from .reduction import check_out

REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


class Request:
    """A nonblocking operation; ``wait()`` completes it and returns its result array."""

    def __init__(self, wait_fn):
        self._wait_fn = wait_fn
        self._done = False
        self._result = None

    def wait(self):
        if not self._done:
            self._result = self._wait_fn()
            self._done = True
        return self._result

    @staticmethod
    def completed(result):
        req = Request(lambda: result)
        req.wait()
        return req


class Communicator(abc.ABC):
    """A group of ``size`` ranks; this process is ``rank``.

    Public methods validate, count and delegate. ``bytes_sent`` is the payload a rank
    contributes: its whole buffer for allreduce/broadcast-root/send, its own part for
    allgather(v), and what leaves the rank for reduce_scatter and alltoall.
    """

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1
    backend = "abstract"
    # True where a nonblocking collective advances while the caller computes (NCCL on its
    # stream, threads). False tells callers to prefer the blocking call, see MPICommunicator.
    progresses_in_background = True
    # The host communicator that bootstrapped a device-only one (NCCL); None where this
    # communicator moves host arrays itself.
    bootstrap = None

    def __init__(self):
        self._calls = defaultdict(int)
        self._bytes = defaultdict(int)
        self._call_seq = 0                  # collectives called on this communicator
        self._checked_kinds = set()         # kinds whose signature was exchanged
        self._debug_level = desync.debug_level()
        self._pending = None                # (op, seq, start time) while in a collective

    @property
    def host_communicator(self):
        """The communicator that carries host (NumPy) arrays for this group: the one that
        bootstrapped it where there is one (NCCL moves device arrays only), else itself.

        >>> from minitorch_dist.communication import LocalCommunicator
        >>> comm = LocalCommunicator.create(1)[0]
        >>> comm.host_communicator is comm
        True
        """
        return self if self.bootstrap is None else self.bootstrap

    # ---- desync checks and progress --------------------------------------------------
    def _gather_signatures(self, vector):
        """Allgather a small int64 host vector (a collective signature) as a host array,
        over the host communicator."""
        return np.asarray(self.host_communicator._allgather(vector))

    def _allgatherv_host(self, array):
        """Allgatherv of a 1-D host array, as host arrays (used by parameter-list checks)."""
        data, counts = self.host_communicator._allgatherv(array)
        return np.asarray(data), list(counts)

    def _enter(self, op, array=None, extra=None):
        """Number this collective, check its signature against the other ranks' and mark
        this rank as waiting in it (for the early-exit watchdog)."""
        self._call_seq = getattr(self, "_call_seq", 0) + 1
        box = getattr(self, "_seq_box", None)      # the watchdog's copy (watchdog.watch)
        if box is not None:
            box[0] = self._call_seq
        if not hasattr(self, "_checked_kinds"):
            self._checked_kinds, self._debug_level = set(), desync.debug_level()
        self._pending = (op, self._call_seq, time.monotonic())
        try:
            self._await_peers()
            desync.check_collective(self, op, array, extra)
        except BaseException:
            self._pending = None
            raise

    def _leave(self):
        self._pending = None

    @contextlib.contextmanager
    def _collective(self, op, array=None, extra=None):
        """The frame of one blocking collective: off the compute slot, numbered, checked,
        marked as waiting (``_enter``) until it returns."""
        with hooks.blocking_wait():
            self._enter(op, array, extra)
            try:
                yield
            finally:
                self._leave()

    def _await_peers(self):
        """Return once every rank of the group has reached this collective, without
        spinning; a backend whose blocking calls busy-poll (MPI) does it while
        ``hooks.quiet_waits()``. Here: nothing (the collective itself waits)."""

    def _released_waits(self, request):
        """``request`` whose ``wait()`` runs off the compute slot (``hooks.blocking_wait``)."""
        finish = request._wait_fn

        def wait_off_slot():
            with hooks.blocking_wait():
                return finish()
        request._wait_fn = wait_off_slot
        return request

    def check_same_parameters(self, what, entries):
        """Raise ``CollectiveMismatchError`` on every rank unless all ranks pass the same
        ``entries`` (strings such as "name shape dtype"); see ``desync.check_same_list``."""
        with hooks.blocking_wait():
            self._pending = ("params", getattr(self, "_call_seq", 0), time.monotonic())
            try:
                self._await_peers()
                desync.check_same_list(self, what, list(entries))
            finally:
                self._pending = None

    # ---- statistics -------------------------------------------------------------------
    def _count(self, op, nbytes):
        self._calls[op] += 1
        self._bytes[op] += int(nbytes)

    def comm_stats(self):
        """``{"calls", "bytes_sent", "by_op": {op: {"calls", "bytes_sent"}}}`` since the last reset."""
        return {"calls": sum(self._calls.values()), "bytes_sent": sum(self._bytes.values()),
                "by_op": {op: {"calls": self._calls[op], "bytes_sent": self._bytes[op]}
                          for op in self._calls}}

    def reset_stats(self):
        self._calls.clear()
        self._bytes.clear()

    def allreduce_buffer(self, count, dtype):
        """An empty 1-D host array of ``count`` items that this communicator reduces in place
        at least as fast as any other (``MPICommunicator``: memory its ranks share, see
        ``node_shared``). Here: a plain array."""
        return np.empty(count, dtype)

    # ---- collectives ------------------------------------------------------------------
    def allreduce(self, array, op="sum", out=None):
        """Elementwise reduction over ranks; ``out`` may be ``array`` itself (in place)."""
        _check_array("allreduce", array)
        _check_op(op)
        check_out("allreduce", array, out)      # local errors before any exchange
        self._count("allreduce", array.nbytes)
        with self._collective("allreduce", array, op):
            return self._allreduce(array, op, out)

    def iallreduce(self, array, op="sum", out=None):
        """Nonblocking allreduce; returns a ``Request`` whose ``wait()`` gives the result."""
        _check_array("iallreduce", array)
        _check_op(op)
        check_out("iallreduce", array, out)
        self._count("allreduce", array.nbytes)
        with self._collective("iallreduce", array, op):
            request = self._iallreduce(array, op, out)
        seq = self._call_seq
        finish = request._wait_fn

        def tracked():
            self._pending = ("iallreduce", seq, time.monotonic())
            try:
                return finish()
            finally:
                self._leave()
        request._wait_fn = tracked
        return self._released_waits(request)

    def allgather(self, array):
        """Every rank's equally shaped ``array``, stacked: shape ``(size, *array.shape)``."""
        _check_array("allgather", array)
        self._count("allgather", array.nbytes)
        with self._collective("allgather", array):
            return self._allgather(array)

    def allgatherv(self, array):
        """1-D arrays of different lengths, concatenated in rank order; returns (data, counts)."""
        _check_array("allgatherv", array)
        if array.ndim != 1:
            raise ValueError(f"allgatherv expects a 1-D array, got shape {array.shape}")
        self._count("allgatherv", array.nbytes)
        with self._collective("allgatherv", array):
            return self._allgatherv(array)

    def broadcast(self, array, root=0):
        """Root's ``array`` copied into every rank's ``array`` (in place); returns it."""
        _check_array("broadcast", array)
        _check_rank(root, self.size, "root")
        self._count("broadcast", array.nbytes if self.rank == root else 0)
        with self._collective("broadcast", array, root):
            return self._broadcast(array, root)

    def reduce_scatter(self, array, op="sum"):
        """Reduce over ranks, then rank ``r`` keeps chunk ``r`` of axis 0 (divisible by size)."""
        _check_array("reduce_scatter", array)
        _check_op(op)
        if array.shape[0] % self.size:
            raise ValueError(f"reduce_scatter needs axis 0 ({array.shape[0]}) divisible by the "
                             f"group size {self.size}")
        self._count("reduce_scatter", array.nbytes // self.size * (self.size - 1))
        with self._collective("reduce_scatter", array, op):
            return self._reduce_scatter(array, op)

    def alltoall(self, array):
        """Personalized exchange: axis 0 (divisible by size) is cut into ``size`` equal chunks,
        chunk ``j`` goes to rank ``j``, and the result (same shape as ``array``) holds the
        received chunks along axis 0 in source-rank order: result chunk ``s`` is rank ``s``'s
        chunk ``rank``. Counted: the ``size - 1`` chunks that leave this rank."""
        _check_array("alltoall", array)
        if len(array.shape) == 0 or array.shape[0] % self.size:
            first = array.shape[0] if len(array.shape) else "none, a scalar"
            raise ValueError(f"alltoall needs axis 0 ({first}) divisible by the group size "
                             f"{self.size}")
        self._count("alltoall", array.nbytes // self.size * (self.size - 1))
        with self._collective("alltoall", array):
            return self._alltoall(array)

    def send(self, array, dest, tag=0):
        _check_array("send", array)
        _check_rank(dest, self.size, "dest")
        self._count("send", array.nbytes)
        with hooks.blocking_wait():
            self._send(array, dest, tag)

    def recv(self, out, source, tag=0):
        """Receive into ``out`` (its shape and dtype must match what was sent); returns it."""
        _check_array("recv", out)
        _check_rank(source, self.size, "source")
        self._count("recv", 0)
        with hooks.blocking_wait():
            return self._recv(out, source, tag)

    def isend(self, array, dest, tag=0):
        _check_array("isend", array)
        _check_rank(dest, self.size, "dest")
        self._count("send", array.nbytes)
        return self._released_waits(self._isend(array, dest, tag))

    def irecv(self, out, source, tag=0):
        _check_array("irecv", out)
        _check_rank(source, self.size, "source")
        self._count("recv", 0)
        return self._released_waits(self._irecv(out, source, tag))

    def barrier(self):
        self._count("barrier", 0)
        with self._collective("barrier"):
            self._barrier()

    # ---- to implement -----------------------------------------------------------------
    @abc.abstractmethod
    def _allreduce(self, array, op, out): ...

    def _iallreduce(self, array, op, out):
        return Request.completed(self._allreduce(array, op, out))

    @abc.abstractmethod
    def _allgather(self, array): ...

    @abc.abstractmethod
    def _allgatherv(self, array): ...

    @abc.abstractmethod
    def _broadcast(self, array, root): ...

    @abc.abstractmethod
    def _reduce_scatter(self, array, op): ...

    def _alltoall(self, array):
        # Not abstract: a communicator written before alltoall existed still works for the rest.
        raise NotImplementedError(f"{type(self).__name__} does not implement alltoall")

    @abc.abstractmethod
    def _send(self, array, dest, tag): ...

    @abc.abstractmethod
    def _recv(self, out, source, tag): ...

    def _isend(self, array, dest, tag):
        self._send(array, dest, tag)
        return Request.completed(None)

    def _irecv(self, out, source, tag):
        return Request(lambda: self._recv(out, source, tag))

    @abc.abstractmethod
    def _barrier(self): ...

    def split(self, ranks, name=None):
        """A sub-communicator over ``ranks`` (global ranks of this group); None off-group."""
        raise NotImplementedError(f"{type(self).__name__} does not support groups")

    def __repr__(self):
        return f"{type(self).__name__}(rank={self.rank}, size={self.size})"


def _check_op(op):
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCE_OPS}")


def _check_rank(rank, size, what):
    if not isinstance(rank, int) or not 0 <= rank < size:
        raise ValueError(f"{what} rank must be an int in [0, {size}), got {rank!r}")


def check_buffers(owner, what, arrays, array_type, kind, hint=""):
    """Backends move C-contiguous buffers of their own array type, with no hidden copies:
    anything else is a TypeError/ValueError naming the backend, the call and the array."""
    for array in arrays:
        if not isinstance(array, array_type):
            raise TypeError(f"{owner}.{what} works on {kind} arrays, got "
                            f"{type(array).__name__}{hint}")
        if not array.flags.c_contiguous:
            raise ValueError(f"{owner}.{what} needs C-contiguous arrays (no hidden copies); "
                             f"got strides {array.strides} for shape {array.shape}")


def _check_array(what, array):
    if not (hasattr(array, "nbytes") and hasattr(array, "dtype") and hasattr(array, "shape")):
        raise TypeError(f"Communicator.{what} expects a NumPy or CuPy array, got "
                        f"{type(array).__name__}; convert with numpy.asarray (or "
                        "tensor.asnumpy()) first")
