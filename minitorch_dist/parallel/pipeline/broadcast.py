"""Broadcast the last stage's results (the loss, evaluation outputs) to every stage of the
replica, so that callbacks and metrics see the same values on every rank. Shapes and
dtypes travel first in a small header: the other stages never computed these tensors."""
import numpy as np

from ...backend import get_device
from ...backend.arrays import contiguous
from ...tensor import Tensor
from ..comm.collectives import communicator_for
from ..comm.p2p import HEADER_LEN, pack_header, unpack_header

__all__ = ["broadcast_values"]


def broadcast_values(topology, values):
    """``values`` (Tensors or arrays on the last stage, None elsewhere) on every rank of this
    rank's pipeline replica, as Tensors."""
    comm = topology.pipeline_group()
    root = topology.stages - 1
    if comm.rank == root:
        arrays = [contiguous(v.data if isinstance(v, Tensor) else v) for v in values]
        devices = [v.device if isinstance(v, Tensor) else get_device("CPU") for v in values]
        header = pack_header(arrays, devices, "from the last stage")
    else:
        header = np.empty(HEADER_LEN, np.int64)
    comm.host_communicator.broadcast(header, root)
    out = []
    for i, (shape, dtype, device) in enumerate(unpack_header(header)):
        if comm.rank == root:
            array, device = arrays[i], devices[i]
        else:
            array = device.xp.empty(shape, dtype)
        communicator_for(comm, device).broadcast(array, root)
        out.append(Tensor._make(array, device))
    return out
