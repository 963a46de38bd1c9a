"""``MPICommunicator``: the collectives over mpi4py's buffer (uppercase) calls.

Arrays travel as they are: contiguous host arrays are handed to MPI without copies, results
land in ``out`` (``MPI.IN_PLACE`` when ``out is array``) or one fresh array, and ``mean`` is a
sum followed by an in-place division.

float16: MPI has no standard half-precision type or arithmetic (some libraries add one,
most do not), so float16 buffers are described to MPI as 16-bit integers (a view, no copy)
and reduced with user-defined MPI ops that view the bytes as float16 and add (max, min,
multiply) with NumPy. Accumulation is therefore in float16, pairwise in MPI's order, and
the bytes on the wire stay half of float32's: the point of fp16 gradient compression.

Quiet waits: Open MPI's blocking calls busy-poll (``mpi_yield_when_idle`` only makes the
spinning rank yield the core between polls; it still shows as 100% CPU). Under the
launcher's ``--compute-slots`` (``hooks.quiet_waits()``) a rank waits instead by testing a
nonblocking request with short sleeps: before each blocking collective it waits in an
``Ibarrier`` until the whole group has arrived, then runs the same blocking call as
without slots (the same algorithm, so the same bits); sends, receives and request waits
poll their own request.
"""
import os
import time

import numpy as np

from ..backend import half
from . import hooks, node_shared
from .communicator import Communicator, Request, check_buffers
from .local import check_group_ranks
from .reduction import check_out, divide_in_place

__all__ = ["MPICommunicator", "import_mpi", "skip_network_probe"]

_MPI = None
_HALF_OPS = {}
# Quiet waits poll from FIRST_POLL_SECONDS, doubling up to LAST_POLL_SECONDS: a handful of
# polls for a short wait, about 500 cheap wake-ups a second for a long one.
FIRST_POLL_SECONDS = 50e-6
LAST_POLL_SECONDS = 2e-3


def import_mpi():
    """``mpi4py.MPI`` (initializing MPI on first use) or a clear ImportError."""
    global _MPI
    if _MPI is None:
        skip_network_probe(os.environ)
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ImportError('the MPI backend needs mpi4py and an MPI library: '
                              'pip install "minitorch_dist[mpi]"') from exc
        _MPI = MPI
    return _MPI


def skip_network_probe(env):
    """Leave Open MPI's ofi BTL out of a job whose ranks are all on this machine, unless
    ``OMPI_MCA_btl`` is set (by the user, or by ``--mca btl`` as this package's launcher
    does). Within one machine messages go through the shared-memory and self BTLs; probing
    for an OFI network still cost about 1 s of every rank's MPI_Init on a machine without one
    (plain ``mpiexec -n 2``: 1.09 s against 0.09 s). Returns whether it set anything.

    >>> env = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    >>> skip_network_probe(env), env["OMPI_MCA_btl"]
    (True, '^ofi')
    >>> skip_network_probe({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    False
    """
    size = env.get("OMPI_COMM_WORLD_SIZE")
    if not size or size != env.get("OMPI_COMM_WORLD_LOCAL_SIZE") or "OMPI_MCA_btl" in env:
        return False
    env["OMPI_MCA_btl"] = "^ofi"
    return True


def _mpi_op(op, dtype):
    MPI = import_mpi()
    if dtype != np.float16:
        return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
                "prod": MPI.PROD}[op]
    return _half_op(op)


def _half_op(op):
    """A commutative user-defined MPI op that reduces float16 data carried as uint16."""
    name = "sum" if op == "mean" else op
    if name not in _HALF_OPS:
        ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[name]

        def reduce_half(inbuf, inoutbuf, datatype):
            # through float32 copies: NumPy's float16 bits, without its slow float16 loop
            incoming = np.frombuffer(inbuf, dtype=np.float16)
            accumulated = np.frombuffer(inoutbuf, dtype=np.float16)
            np.copyto(accumulated, half.elementwise(ufunc, accumulated, incoming))

        _HALF_OPS[name] = import_mpi().Op.Create(reduce_half, commute=True)
    return _HALF_OPS[name]


def wait_quietly(request):
    """Complete an mpi4py request by ``Test`` and sleeps (no busy CPU)."""
    pause = FIRST_POLL_SECONDS
    while not request.Test():
        time.sleep(pause)
        pause = min(2 * pause, LAST_POLL_SECONDS)


def _wait(request):
    """``request.Wait()``, or its quiet form while compute slots are on."""
    if hooks.quiet_waits():
        wait_quietly(request)
    else:
        request.Wait()


def _wire(array):
    """The buffer MPI sees: float16 as a uint16 view (no copy), everything else as is."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


def _world_ranks(comm):
    """The COMM_WORLD ranks of ``comm``'s members, in ``comm``'s rank order."""
    MPI = import_mpi()
    group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        return tuple(int(r) for r in MPI.Group.Translate_ranks(group, list(range(comm.Get_size())),
                                                               world))
    finally:
        group.Free()
        world.Free()


def _check_host(what, *arrays):
    check_buffers("MPICommunicator", what, arrays, np.ndarray, "NumPy host",
                  " (use the NCCL backend for GPU arrays)")


class MPICommunicator(Communicator):
    """Collectives over an mpi4py communicator (``MPI.COMM_WORLD`` by default).

    ``local_rank``/``local_size`` come from splitting by shared-memory node.
    """

    backend = "mpi"
    # Open MPI advances a nonblocking collective only inside later MPI calls, and its
    # Iallreduce uses slower algorithms than the tuned blocking Allreduce (1.2-1.8x on
    # 1-2 MB host buffers between 2 ranks here), so waiting on it right away costs more.
    progresses_in_background = False

    def __init__(self, comm=None):
        super().__init__()
        MPI = import_mpi()
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        with hooks.blocking_wait():        # Split_type is collective: wait off the slot
            self._await_peers()
            node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        # ranks all on one machine reduce large buffers through memory they share
        self._shared = node_shared.SharedBuffers(self.rank, self.size) \
            if 1 < self.size == self.local_size and node_shared.enabled() else None
        self.world_ranks = None if self.comm == MPI.COMM_WORLD else _world_ranks(self.comm)
        hooks.communicator_created(self)   # a launcher's watchdog watches it for early exits

    # ---- reductions -----------------------------------------------------------------
    def _reduce_args(self, array, out):
        _check_host("allreduce", array)
        check_out("allreduce", array, out)
        if out is array:
            return self._in_place(), array
        result = np.empty_like(array) if out is None else out
        _check_host("allreduce", result)
        return _wire(array), result

    def _in_place(self):
        return import_mpi().IN_PLACE

    def _await_peers(self):
        if hooks.quiet_waits() and self.size > 1:
            wait_quietly(self.comm.Ibarrier())

    def allreduce_buffer(self, count, dtype):
        if self._shared is None:
            return np.empty(count, dtype)
        return self._shared.empty(count, dtype)

    def _allreduce(self, array, op, out):
        send, result = self._reduce_args(array, out)
        if not (self._may_share(array, op) and self._shared.allreduce(
                array if out is array else None, self._allgather, self._all_ok, self._barrier)):
            self.comm.Allreduce(send, _wire(result), op=_mpi_op(op, array.dtype))
        return divide_in_place(result, self.size) if op == "mean" else result

    def _may_share(self, array, op):
        """Whether a shared reduction is tried; from what every rank's call has alike (op,
        dtype, byte count), so that all ranks take the header exchange or none does."""
        return self._shared is not None and op in ("sum", "mean") and \
            node_shared.worth_sharing(array)

    def _all_ok(self, ok):
        return bool(self.comm.allreduce(bool(ok), op=import_mpi().LAND))

    def _barrier(self):
        if hooks.quiet_waits():
            wait_quietly(self.comm.Ibarrier())
        else:
            self.comm.Barrier()

    def _iallreduce(self, array, op, out):
        send, result = self._reduce_args(array, out)
        request = self.comm.Iallreduce(send, _wire(result), op=_mpi_op(op, array.dtype))

        def finish():
            _wait(request)
            return divide_in_place(result, self.size) if op == "mean" else result
        return Request(finish)

    def _reduce_scatter(self, array, op):
        _check_host("reduce_scatter", array)
        result = np.empty((array.shape[0] // self.size,) + array.shape[1:], array.dtype)
        self.comm.Reduce_scatter_block(_wire(array), _wire(result),
                                       op=_mpi_op(op, array.dtype))
        return divide_in_place(result, self.size) if op == "mean" else result

    # ---- gathers and broadcast ------------------------------------------------------
    def _allgather(self, array):
        _check_host("allgather", array)
        result = np.empty((self.size,) + array.shape, array.dtype)
        self.comm.Allgather(_wire(array), _wire(result))
        return result

    def _allgatherv(self, array):
        _check_host("allgatherv", array)
        counts = np.empty(self.size, np.int64)
        self.comm.Allgather(np.array([array.shape[0]], np.int64), counts)
        displacements = np.zeros(self.size, np.int64)
        np.cumsum(counts[:-1], out=displacements[1:])
        result = np.empty(int(counts.sum()), array.dtype)
        layout = (counts.tolist(), displacements.tolist())
        self.comm.Allgatherv(_wire(array), [_wire(result), layout])
        return result, counts.tolist()

    def _alltoall(self, array):
        _check_host("alltoall", array)
        result = np.empty_like(array)
        self.comm.Alltoall(_wire(array), _wire(result))  # mpi4py splits the count by size
        return result

    def _broadcast(self, array, root):
        _check_host("broadcast", array)
        self.comm.Bcast(_wire(array), root=root)
        return array

    # ---- point to point -------------------------------------------------------------
    def _send(self, array, dest, tag):
        _check_host("send", array)
        if hooks.quiet_waits():
            wait_quietly(self.comm.Isend(_wire(array), dest=dest, tag=tag))
        else:
            self.comm.Send(_wire(array), dest=dest, tag=tag)

    def _recv(self, out, source, tag):
        _check_host("recv", out)
        if hooks.quiet_waits():
            wait_quietly(self.comm.Irecv(_wire(out), source=source, tag=tag))
        else:
            self.comm.Recv(_wire(out), source=source, tag=tag)
        return out

    def _isend(self, array, dest, tag):
        _check_host("isend", array)
        request = self.comm.Isend(_wire(array), dest=dest, tag=tag)

        def finish():
            _wait(request)
        return Request(finish)

    def _irecv(self, out, source, tag):
        _check_host("irecv", out)
        request = self.comm.Irecv(_wire(out), source=source, tag=tag)

        def finish():
            _wait(request)
            return out
        return Request(finish)

    def _barrier(self):
        self.comm.Barrier()

    # ---- groups -----------------------------------------------------------------------
    def split(self, ranks, name=None):
        """A sub-communicator over ``ranks`` (collective over the members only; others get None).
        MPI keeps each new communicator's traffic apart by itself; ``name`` becomes its MPI
        name (``Get_name``), as the other backends key their groups by it."""
        ranks = check_group_ranks(ranks, self.size)
        if self.rank not in ranks:
            return None
        group = self.comm.Get_group().Incl(list(ranks))
        try:
            with hooks.blocking_wait():     # collective over the members
                sub = self.comm.Create_group(group)
        finally:
            group.Free()
        if name is not None:
            sub.Set_name(str(name))
        return MPICommunicator(sub)

    def close(self):
        """Free the underlying communicator unless it is ``COMM_WORLD``/``COMM_SELF``."""
        MPI = import_mpi()
        if self.comm not in (MPI.COMM_WORLD, MPI.COMM_SELF) and self.comm != MPI.COMM_NULL:
            self.comm.Free()
