"""MindSpore's point-to-point primitives (issue 26 item 3): ``ops.Send``/``ops.Receive`` move a
tensor between two ranks, ``ops.NeighborExchange`` swaps tensors and back-propagates the
reverse exchange. Ranks run as threads."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.communication import run_ranks


def test_send_and_receive_move_a_tensor():
    def rank(comm):
        if comm.rank == 0:
            x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
            return ops.Depend()(x, ops.Send(sr_tag=3, dest_rank=1, group=comm)(x)).asnumpy()
        return ops.Receive(sr_tag=3, src_rank=0, shape=[2, 3], dtype=ms.float32,
                           group=comm)().asnumpy()

    sent, received = run_ranks(2, rank, timeout=30)
    np.testing.assert_array_equal(received, sent)
    assert received.dtype == np.float32


def test_neighbor_exchange_swaps_and_returns_the_gradients():
    def rank(comm):
        other = 1 - comm.rank
        x = ms.Tensor(np.full((2,), comm.rank + 1.0, np.float32), requires_grad=True)
        exchange = ops.NeighborExchange([other], [other], [[2]], [[2]], ms.float32, group=comm)
        (y,) = exchange((x * 3,))
        (y * (comm.rank + 10)).sum().backward()      # each rank's loss uses what it received
        return y.asnumpy().tolist(), x.grad.asnumpy().tolist()

    (y0, g0), (y1, g1) = run_ranks(2, rank, timeout=30)
    assert y0 == [6.0, 6.0] and y1 == [3.0, 3.0]
    assert g0 == [33.0, 33.0] and g1 == [30.0, 30.0]    # rank 1's loss weight 11, times 3


def test_bad_arguments_are_named():
    def rank(comm):
        with pytest.raises(ValueError, match="dest_rank 5 is not a rank of group"):
            ops.Send(0, 5, group=comm)(ms.Tensor([1.0]))
        with pytest.raises(TypeError, match="Receive takes no inputs"):
            ops.Receive(0, 0, [1], ms.float32, group=comm)(ms.Tensor([1.0]))
        with pytest.raises(ValueError, match="input 0 has shape \\(3,\\), but send_shapes\\[0\\]"):
            ops.NeighborExchange([1 - comm.rank], [1 - comm.rank], [[2]], [[2]], ms.float32,
                                 group=comm)((ms.Tensor([1.0, 2.0, 3.0]),))
        with pytest.raises(ValueError, match="one shape per rank"):
            ops.NeighborExchange([0, 1], [0], [[2]], [[2]], ms.float32)
        return True

    assert run_ranks(2, rank, timeout=30) == [True, True]
