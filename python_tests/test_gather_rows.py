"""The one row-gather (``parallel/comm/rows.py``): every rank's rows of a ``RowTensor``, used
by ``Mirror``'s backward and by ``DistributedGradReducer`` alike."""
import numpy as np

import minitorch_dist as ms
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.comm.collectives import Mirror
from minitorch_dist.parallel.comm.rows import gather_rows
from minitorch_dist.parallel.data_parallel.grad_reducer import DistributedGradReducer
from minitorch_dist.row_tensor import RowTensor


def _rank_grad(rank):
    """Rank r touches rows [r, r + 1] of a (4, 2) table, row values r + 1 (float64)."""
    indices = ms.Tensor(np.array([rank, rank + 1], np.int32))
    values = ms.Tensor(np.full((2, 2), rank + 1.0, np.float64))
    return RowTensor(indices, values, (4, 2))


def _as_lists(rows):
    return (rows.indices.asnumpy().tolist(), rows.values.asnumpy().tolist(),
            str(rows.indices.dtype), str(rows.values.dtype), rows.dense_shape)


def test_rows_are_gathered_in_rank_order_cast_and_divided():
    def rank_fn(comm):
        return _as_lists(gather_rows(comm, _rank_grad(comm.rank), np.float32, divisor=2))

    expected = ([0, 1, 1, 2], [[0.5, 0.5]] * 2 + [[1.0, 1.0]] * 2, "int64", "float32", (4, 2))
    assert run_ranks(2, rank_fn) == [expected, expected]


def test_mirror_and_the_grad_reducer_gather_the_same_rows():
    def rank_fn(comm):
        grad = _rank_grad(comm.rank)
        (mirrored,) = Mirror(group=comm).backward(_Ctx(comm), grad)
        table = ms.Parameter(ms.Tensor(np.zeros((4, 2), np.float64)), name="table")
        (reduced,) = DistributedGradReducer([table], mean=False, communicator=comm)((grad,))
        return _as_lists(mirrored), _as_lists(reduced)

    for mirrored, reduced in run_ranks(2, rank_fn):
        assert mirrored == reduced
        assert mirrored[0] == [0, 1, 1, 2]


class _Ctx:
    """The part of a primitive's context that ``Mirror.backward`` reads."""

    def __init__(self, comm):
        self.comm, self.xp = comm, np
        self.deferral = None        # no gradient accumulation running
