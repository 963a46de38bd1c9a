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


def test_send_and_receive_carry_the_gradient_back():
    """Receive's backward sends the gradient of what it received; Send's backward returns
    it (the gradient of Send's own output is not used, as in MindSpore)."""
    def rank(comm):
        x = ms.Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
        if comm.rank == 0:
            out = ops.Send(sr_tag=7, dest_rank=1, group=comm)(x * 3)
            (out * 100).sum().backward()
            return x.grad.asnumpy().tolist()
        y = ops.Receive(sr_tag=7, src_rank=0, shape=[2], dtype=ms.float32, group=comm)()
        (y * y * 5).sum().backward()              # d/dy = 10 y = 10 * 3x
        return y.asnumpy().tolist()

    grad0, received = run_ranks(2, rank, timeout=30)
    assert received == [3.0, 6.0]
    assert grad0 == [90.0, 180.0]                 # 10 * 3x * 3


def test_a_manual_two_rank_pipeline_trains_like_one_process():
    """Stage 0 (a Dense) sends to stage 1 (a Dense and the loss): the weight gradients that
    value_and_grad gives each rank are those of the whole network in one process."""
    from minitorch_dist import nn
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    labels = np.array([0, 1, 1, 0], np.int32)

    def layers():
        ms.set_seed(5)
        return nn.Dense(3, 5), nn.Dense(5, 2)

    first, second = layers()
    loss_fn = nn.CrossEntropyLoss()
    whole = ms.value_and_grad(lambda a: loss_fn(second(first(a)), ms.Tensor(labels)), None,
                              first.trainable_params() + second.trainable_params())
    want_loss, want = whole(ms.Tensor(x))

    # the ranks are threads sharing the framework's random state: each takes its stage from
    # the layers built once here (two threads seeding and drawing at once drew different ones)
    def rank(comm):
        stage0, stage1 = first, second
        if comm.rank == 0:
            send = ops.Send(sr_tag=0, dest_rank=1, group=comm)
            step = ms.value_and_grad(lambda a: send(stage0(a)), None, stage0.trainable_params())
            _, grads = step(ms.Tensor(x))
            return None, [g.asnumpy() for g in grads]
        receive = ops.Receive(sr_tag=0, src_rank=0, shape=[4, 5], dtype=ms.float32, group=comm)
        step = ms.value_and_grad(lambda: loss_fn(stage1(receive()), ms.Tensor(labels)), None,
                                 stage1.trainable_params())
        loss, grads = step()
        return float(loss.asnumpy()), [g.asnumpy() for g in grads]

    (_, grads0), (loss1, grads1) = run_ranks(2, rank, timeout=60)
    assert loss1 == pytest.approx(float(want_loss.asnumpy()), rel=1e-6)
    for got, expected in zip(grads0 + grads1, want):
        np.testing.assert_allclose(got, expected.asnumpy(), rtol=1e-5, atol=1e-6)


def test_sr_tag_out_of_range_is_refused():
    with pytest.raises(ValueError, match="sr_tag must be in"):
        ops.Send(1 << 14, 0)
    with pytest.raises(ValueError, match="sr_tag must be in"):
        ops.Receive(-1, 0, [1], ms.float32)
