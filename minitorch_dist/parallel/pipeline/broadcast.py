"""Broadcast the last stage's results (the loss, evaluation outputs) to every stage of the
replica, so that callbacks and metrics see the same values on every rank. Shapes and
dtypes travel first in a small header: the other stages never computed these tensors."""
import numpy as np

from ...backend import get_device
from ...tensor import Tensor
from .p2p import MAX_DIMS, MAX_TENSORS, _DTYPES, contiguous

__all__ = ["broadcast_values"]

_HEADER_LEN = 1 + MAX_TENSORS * (2 + MAX_DIMS)


def broadcast_values(topology, values):
    """``values`` (Tensors or arrays on the last stage, None elsewhere) on every rank of this
    rank's pipeline replica, as Tensors."""
    comm = topology.pipeline_group()
    root = topology.stages - 1
    host = getattr(comm, "bootstrap", None) or comm
    header = np.zeros(_HEADER_LEN, np.int64)
    if comm.rank == root:
        arrays = [v.data if isinstance(v, Tensor) else v for v in values]
        devices = [v.device if isinstance(v, Tensor) else get_device("CPU") for v in values]
        header[0] = len(arrays)
        for i, a in enumerate(arrays):
            base = 1 + i * (2 + MAX_DIMS)
            header[base:base + 2] = (_DTYPES.index(a.dtype), a.ndim)
            header[base + 2:base + 2 + a.ndim] = a.shape
    host.broadcast(header, root)
    out = []
    for i in range(int(header[0])):
        if comm.rank == root:
            array, device = contiguous(arrays[i]), devices[i]
        else:
            base = 1 + i * (2 + MAX_DIMS)
            code, ndim = int(header[base]), int(header[base + 1])
            device = get_device(None)
            array = device.xp.empty(tuple(int(d) for d in header[base + 2:base + 2 + ndim]),
                                    _DTYPES[code])
        if device.is_host or (host is comm and device.virtual):
            host.broadcast(array, root)
        else:                      # a real device array: NCCL's own broadcast moves it
            comm.broadcast(array, root)
        out.append(Tensor._make(array, device))
    return out
