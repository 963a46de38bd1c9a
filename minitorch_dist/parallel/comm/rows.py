"""Gathering a sparse row gradient (``RowTensor``) over the ranks of a group.

Rows are gathered, not summed: every rank receives every rank's indices and rows (two
``allgatherv`` calls), so only the touched rows travel and the result stays sparse. An
index repeated across ranks appears once per rank; optimizers merge repeated ids, so the
result acts as the sum of the ranks' gradients. ``Mirror``'s backward and
``DistributedGradReducer`` both gather rows this way.
"""
import numpy as np

from ...row_tensor import RowTensor
from ...tensor import Tensor

__all__ = ["gather_rows"]


def gather_rows(comm, grad, dtype=None, divisor=1):
    """The ``RowTensor`` of every rank's rows of ``grad``, in rank order, on ``grad``'s device.

    ``comm`` must move arrays of that device (see ``collectives.communicator_for``). The
    values are cast to ``dtype`` first when given, and divided by ``divisor`` after.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> def rank_fn(comm):
    ...     grad = RowTensor(ms.Tensor([comm.rank]), ms.Tensor([[1.0 + comm.rank]]), (3, 1))
    ...     rows = gather_rows(comm, grad, divisor=2)
    ...     return rows.indices.asnumpy().tolist(), rows.values.asnumpy().tolist()
    >>> run_ranks(2, rank_fn)[0]
    ([0, 1], [[0.5], [1.0]])
    """
    device = grad.device
    xp = device.xp
    indices = xp.ascontiguousarray(grad.indices.data.astype(np.int64, copy=False))
    values = xp.ascontiguousarray(grad.values.data)
    if dtype is not None and values.dtype != dtype:
        values = values.astype(dtype)
    all_indices, _ = comm.allgatherv(indices)
    all_values, _ = comm.allgatherv(values.reshape(-1))
    if divisor != 1:
        all_values /= divisor
    rows = all_values.reshape((-1,) + tuple(grad.dense_shape[1:]))
    return RowTensor(Tensor._make(all_indices, device), Tensor._make(rows, device),
                     grad.dense_shape)
