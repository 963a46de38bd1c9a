"""``NCCLCommunicator``: the collectives over ``cupy.cuda.nccl`` on CuPy (device) arrays.

NCCL needs every rank to share one 128-byte unique id. It is either passed in (``nccl_id``,
e.g. from a ``UniqueId(nccl=True)`` made by a launcher) or created on rank 0 and broadcast
over a host ``bootstrap`` communicator (MPI when launched by mpiexec, TCP for the
multiprocessing launch). The host communicator is kept for sub-groups and host barriers.

All NCCL calls run on the communicator's own CUDA stream: it first waits for the work
already queued on the caller's current stream (so the inputs are ready), and the current
stream then waits for the communication (so later kernels see the results). The host does
not block, except for ``barrier`` and ``allgatherv`` (which must read the lengths).

NCCL has no message tags: sends and receives between a pair of ranks match in the order they
are posted, so a ``tag`` is accepted but does not reorder anything. CuPy is imported lazily.
"""
import numpy as np

from . import hooks
from .communicator import Communicator, Request, check_buffers
from .reduction import divide_in_place

__all__ = ["NCCLCommunicator"]


def _cupy():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as exc:
        raise ImportError('the NCCL backend needs CuPy built with NCCL: pip install '
                          '"minitorch_dist[gpu]"') from exc
    return cupy, nccl


def _nccl_dtype(nccl, dtype):
    table = {np.float16: "NCCL_FLOAT16", np.float32: "NCCL_FLOAT32",
             np.float64: "NCCL_FLOAT64", np.int8: "NCCL_INT8", np.uint8: "NCCL_UINT8",
             np.int32: "NCCL_INT32", np.uint32: "NCCL_UINT32", np.int64: "NCCL_INT64",
             np.uint64: "NCCL_UINT64"}
    name = table.get(np.dtype(dtype).type)
    if name is None:
        raise TypeError(f"NCCLCommunicator: dtype {dtype} is not supported by NCCL; expected "
                        "one of float16/32/64, (u)int8, (u)int32, (u)int64")
    return getattr(nccl, name)


def _nccl_op(nccl, op):
    return {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX,
            "min": nccl.NCCL_MIN, "prod": nccl.NCCL_PROD}[op]


def _id_array(nccl_id):
    """An NCCL unique id (a tuple of ints, or bytes) as 128 int8 values."""
    if isinstance(nccl_id, (bytes, bytearray)):
        return np.frombuffer(bytes(nccl_id), np.int8)
    return np.asarray(tuple(nccl_id), np.int64).astype(np.int8)


def _id_like(values, example):
    """128 int8 ``values`` in the form of ``example`` (what this CuPy's get_unique_id gives)."""
    if isinstance(example, (bytes, bytearray)):
        return np.asarray(values, np.int8).tobytes()
    return tuple(int(v) for v in values)


class NCCLCommunicator(Communicator):
    """One rank of an NCCL group; arrays must be C-contiguous CuPy arrays on this rank's GPU.

    ``NCCLCommunicator(bootstrap=host_comm)`` takes rank, size and local rank from a host
    communicator; ``NCCLCommunicator(rank=r, size=n, nccl_id=uid)`` needs no host at all.
    The GPU used is ``local_rank % device_count``. Its ``host_communicator`` (what carries
    host arrays for the group) is that bootstrap communicator, where there is one.
    """

    backend = "nccl"

    def __init__(self, rank=None, size=None, nccl_id=None, bootstrap=None):
        super().__init__()
        cupy, nccl = _cupy()
        self._cupy, self._nccl, self.bootstrap = cupy, nccl, bootstrap
        if bootstrap is not None:
            self.rank, self.size = bootstrap.rank, bootstrap.size
            self.local_rank, self.local_size = bootstrap.local_rank, bootstrap.local_size
            nccl_id = self._share_id(nccl_id)
        else:
            self.rank, self.size = (0, 1) if size is None else (rank, size)
            self.local_rank, self.local_size = self.rank, self.size
            if nccl_id is None:
                if self.size != 1:
                    raise ValueError("NCCLCommunicator needs an nccl_id or a bootstrap "
                                     "communicator when size > 1")
                nccl_id = nccl.get_unique_id()
        self.device = cupy.cuda.Device(self.local_rank % cupy.cuda.runtime.getDeviceCount())
        self.device.use()
        with hooks.blocking_wait():         # NCCL's init waits for every rank
            self._comm = nccl.NcclCommunicator(
                self.size, _id_like(_id_array(nccl_id), nccl.get_unique_id()), self.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def _share_id(self, nccl_id):
        """Rank 0's id (given or new) broadcast over the host communicator, in the form this
        CuPy's ``NcclCommunicator`` takes (a tuple of 128 ints, or 128 bytes from CuPy 14)."""
        buffer = np.zeros(128, np.int8)
        if self.rank == 0:
            buffer[:] = _id_array(nccl_id if nccl_id is not None else self._nccl.get_unique_id())
        self.bootstrap.broadcast(buffer, root=0)
        return _id_like(buffer, self._nccl.get_unique_id())

    # ---- stream ordering ------------------------------------------------------------
    def _check(self, what, *arrays):
        check_buffers("NCCLCommunicator", what, arrays, self._cupy.ndarray, "CuPy",
                      " (use MPI or TCP for host arrays)")

    def _start(self):
        self.stream.wait_event(self._cupy.cuda.get_current_stream().record())

    def _finish_event(self):
        return self.stream.record()

    def _join(self, event):
        self._cupy.cuda.get_current_stream().wait_event(event)

    def _args(self, array):
        return _nccl_dtype(self._nccl, array.dtype), self.stream.ptr

    # ---- collectives ----------------------------------------------------------------
    def _allreduce(self, array, op, out):
        return self._iallreduce(array, op, out).wait()

    def _iallreduce(self, array, op, out):
        self._check("allreduce", array)
        if out is not None and (out.shape != array.shape or out.dtype != array.dtype):
            raise ValueError(f"allreduce: out must be {array.shape} {array.dtype}, got "
                             f"{out.shape} {out.dtype}")
        result = self._cupy.empty_like(array) if out is None else out
        dtype, stream = self._args(array)
        self._start()
        self._comm.allReduce(array.data.ptr, result.data.ptr, array.size, dtype,
                             _nccl_op(self._nccl, op), stream)
        if op == "mean":
            with self.stream:
                divide_in_place(result, self.size)
        event = self._finish_event()

        def finish():
            self._join(event)
            return result
        return Request(finish)

    def _allgather(self, array):
        self._check("allgather", array)
        result = self._cupy.empty((self.size,) + array.shape, array.dtype)
        dtype, stream = self._args(array)
        self._start()
        self._comm.allGather(array.data.ptr, result.data.ptr, array.size, dtype, stream)
        self._join(self._finish_event())
        return result

    def _allgatherv(self, array):
        self._check("allgatherv", array)
        cupy = self._cupy
        counts = self._allgather(cupy.array([array.shape[0]], np.int64)).get().ravel()
        longest = int(counts.max())
        if longest == 0:
            return cupy.empty(0, array.dtype), counts.tolist()
        padded = cupy.zeros(longest, array.dtype)
        padded[:array.shape[0]] = array
        gathered = self._allgather(padded)
        parts = [gathered[r, :int(counts[r])] for r in range(self.size)]
        return cupy.concatenate(parts), counts.tolist()

    def _broadcast(self, array, root):
        self._check("broadcast", array)
        dtype, stream = self._args(array)
        self._start()
        self._comm.broadcast(array.data.ptr, array.data.ptr, array.size, dtype, root, stream)
        self._join(self._finish_event())
        return array

    def _reduce_scatter(self, array, op):
        self._check("reduce_scatter", array)
        result = self._cupy.empty((array.shape[0] // self.size,) + array.shape[1:], array.dtype)
        dtype, stream = self._args(array)
        self._start()
        self._comm.reduceScatter(array.data.ptr, result.data.ptr, result.size, dtype,
                                 _nccl_op(self._nccl, op), stream)
        if op == "mean":
            with self.stream:
                divide_in_place(result, self.size)
        self._join(self._finish_event())
        return result

    def _alltoall(self, array):
        self._check("alltoall", array)
        result = self._cupy.empty_like(array)
        dtype, stream = self._args(array)
        count = array.size // self.size
        step = count * array.itemsize
        self._start()
        # NCCL has no alltoall: one send and one receive per peer, grouped so that they are
        # issued together and cannot deadlock on each other.
        self._nccl.groupStart()
        for peer in range(self.size):
            self._comm.send(array.data.ptr + peer * step, count, dtype, peer, stream)
            self._comm.recv(result.data.ptr + peer * step, count, dtype, peer, stream)
        self._nccl.groupEnd()
        self._join(self._finish_event())
        return result

    # ---- point to point (tags do not reorder: see the module docstring) -------------
    def _send(self, array, dest, tag):
        self._isend(array, dest, tag).wait()

    def _isend(self, array, dest, tag):
        self._check("send", array)
        dtype, stream = self._args(array)
        self._start()
        self._comm.send(array.data.ptr, array.size, dtype, dest, stream)
        event = self._finish_event()
        return Request(lambda: self._join(event))

    def _recv(self, out, source, tag):
        return self._irecv(out, source, tag).wait()

    def _irecv(self, out, source, tag):
        self._check("recv", out)
        dtype, stream = self._args(out)
        self._start()
        self._comm.recv(out.data.ptr, out.size, dtype, source, stream)
        event = self._finish_event()

        def finish():
            self._join(event)
            return out
        return Request(finish)

    def _barrier(self):
        token = self._cupy.zeros(1, np.int32)
        self._allreduce(token, "sum", token)
        self.stream.synchronize()

    # ---- desync checks (host vectors) ----------------------------------------------------
    def _gather_signatures(self, vector):
        """Signatures over the bootstrap host communicator, else through the GPU."""
        if self.bootstrap is not None:
            return np.asarray(self.bootstrap._allgather(vector))
        return self._cupy.asnumpy(self._allgather(self._cupy.asarray(vector)))

    def _allgatherv_host(self, array):
        """Allgatherv of a host array over the bootstrap communicator, else the GPU."""
        if self.bootstrap is not None:
            data, counts = self.bootstrap._allgatherv(array)
        else:
            data, counts = self._allgatherv(self._cupy.asarray(array))
        return self._cupy.asnumpy(data) if not isinstance(data, np.ndarray) else data, \
            list(counts)

    # ---- groups and teardown --------------------------------------------------------
    def split(self, ranks, name=None):
        """A sub-communicator over ``ranks``; needs the host bootstrap communicator."""
        if self.bootstrap is None:
            raise NotImplementedError("NCCLCommunicator.split needs a bootstrap communicator")
        host = self.bootstrap.split(ranks, name)
        return None if host is None else NCCLCommunicator(bootstrap=host)

    def close(self):
        """Destroy the NCCL communicator (the bootstrap communicator is left alone)."""
        if self._comm is not None:
            self.stream.synchronize()
            self._comm.destroy()
            self._comm = None
