"""MindSpore's collective primitives with its signatures (issue 26 item 3):
``ops.AllReduce(op, group)``, ``AllGather(group)``, ``ReduceScatter(op, group)``,
``AlltoAll(split_count, split_dim, concat_dim, group)``, ``Broadcast(root_rank, group)``."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import communication as C
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.comm.collective_ops import (AllGather, AllReduce, AlltoAll,
                                                          Broadcast, ReduceOp, ReduceScatter)


def test_forward_and_mindspore_backward_on_four_ranks():
    def rank(comm):
        r = comm.rank
        x = ms.Tensor(np.full((4, 2), r + 1.0, np.float32), requires_grad=True)
        outs = {
            "allreduce": AllReduce(ReduceOp.SUM, comm)(x),
            "allgather": AllGather(comm)(x),
            "reducescatter": ReduceScatter(ReduceOp.SUM, comm)(x),
            "alltoall": AlltoAll(4, 0, 1, comm)(x),
            "broadcast": Broadcast(2, comm)((x,))[0],
        }
        grads = {}
        for name, y in outs.items():
            (g,) = ms.grad(lambda t, name=name: _again(name, t, comm).sum() * (r + 1))(x),
            grads[name] = g.asnumpy()
        return {k: v.asnumpy() for k, v in outs.items()}, grads

    results = run_ranks(4, rank)
    outs, grads = results[1]
    assert np.all(outs["allreduce"] == 10) and outs["allgather"].shape == (16, 2)
    assert outs["reducescatter"].shape == (1, 2) and np.all(outs["reducescatter"] == 10)
    assert outs["alltoall"].shape == (1, 8) and outs["alltoall"][0].tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert np.all(outs["broadcast"] == 3)
    # L = sum_r (r + 1) * sum(y_r): each backward is the adjoint collective
    assert np.all(grads["allreduce"] == 10)                 # AllReduce(sum) of the seeds
    assert np.all(grads["allgather"] == 10)                 # ReduceScatter of the seeds
    # AllGather of the seeds: row s holds rank s's seed s + 1, on every rank
    assert grads["reducescatter"][:, 0].tolist() == [1, 2, 3, 4]
    assert np.all(results[0][1]["reducescatter"] == grads["reducescatter"])
    assert np.all(grads["broadcast"] == 0) and np.all(results[2][1]["broadcast"] == 10)


def _again(name, x, comm):
    return {"allreduce": lambda: AllReduce(ReduceOp.SUM, comm)(x),
            "allgather": lambda: AllGather(comm)(x),
            "reducescatter": lambda: ReduceScatter(ReduceOp.SUM, comm)(x),
            "alltoall": lambda: AlltoAll(4, 0, 1, comm)(x),
            "broadcast": lambda: Broadcast(2, comm)((x,))[0]}[name]()


class ManualLoss(nn.Cell):
    """The manual-parallel tutorial's loss: each rank's loss all-reduced and averaged."""

    def __init__(self, comm):
        super().__init__()
        self.loss = nn.MSELoss()
        self.all_reduce = AllReduce(group=comm)
        self.size = comm.size

    def construct(self, logits, label):
        return self.all_reduce(self.loss(logits, label)) / self.size


def test_an_all_reduced_loss_trains_in_train_one_step_cell():
    """The printed loss is the global mean on every rank; AllReduce's backward (an AllReduce
    of the seeds 1/N) gives each rank the gradient of its own rows' loss, as in MindSpore."""
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 4), np.float32), rng.random((8, 2), np.float32)
    w = rng.standard_normal((2, 4)).astype(np.float32)

    def train(data, label, loss, steps=3):
        net = nn.Dense(4, 2, weight_init=ms.Tensor(w), bias_init="zeros")
        step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.SGD(net.trainable_params(), .5))
        losses = [float(step(ms.Tensor(data), ms.Tensor(label)).asnumpy()) for _ in range(steps)]
        return losses, net.weight.asnumpy()

    first, _ = train(x, y, nn.MSELoss(), steps=1)

    def rank(comm):
        rows = slice(2 * comm.rank, 2 * comm.rank + 2)
        _, own = train(x[rows], y[rows], nn.MSELoss(), steps=1)
        return train(x[rows], y[rows], ManualLoss(comm), steps=1)[1], own, \
            train(x[rows], y[rows], ManualLoss(comm))[0]

    results = run_ranks(4, rank)
    for weight, own, losses in results:
        np.testing.assert_allclose(losses[0], first[0], rtol=1e-5)
        np.testing.assert_allclose(weight, own, rtol=1e-6)
        assert losses == results[0][2]


@pytest.fixture
def released():
    C.release()
    yield
    C.release()


def test_group_names_resolve_at_the_first_call_and_bad_ones_are_refused(released, monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    C.init()
    C.create_group("solo", [0])
    x = ms.Tensor([1.0, 2.0])
    assert AllReduce(ReduceOp.MAX, "solo")(x).asnumpy().tolist() == [1.0, 2.0]
    lazy = AllGather("later")                      # built before its group exists: fine
    C.create_group("later", [0])
    assert lazy(x).asnumpy().tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="unknown group 'nope'"):
        ReduceScatter(group="nope")(x)
    with pytest.raises(ValueError, match="op must be one of"):
        AllReduce(ReduceOp.PROD)
    with pytest.raises(ValueError, match="split_count 2 must equal the size 1"):
        AlltoAll(2, 0, 0)(x)
    with pytest.raises(TypeError, match="tuple of tensors"):
        Broadcast(0)(x)
