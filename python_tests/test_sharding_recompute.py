"""Cell.recompute() inside an operator-sharded run: the cell runs once without the tape and
again in backward, replaying the same traced nodes with the same communication; the
gradients are bit for bit those of the run that keeps the activations."""
import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import executor
from minitorch_dist.parallel.sharding.scope import sharding_world

RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 16)).astype(np.float32)
Y = RNG.standard_normal((8, 16)).astype(np.float32)
W = [RNG.standard_normal((16, 16)).astype(np.float32) * 0.3 for _ in range(4)]


class Block(nn.Cell):
    def __init__(self, w1, w2):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(w1.copy()))
        self.w2 = ms.Parameter(ms.Tensor(w2.copy()))
        self.mm1 = ops.MatMul().shard(((2, 1), (1, 1)))     # rows split
        self.mm2 = ops.MatMul().shard(((1, 2), (2, 1)))     # contracting axis split: AllReduce
        self.act = ops.Tanh()

    def construct(self, x):
        return self.act(self.mm2(self.act(self.mm1(x, self.w1)), self.w2))


class Net(nn.Cell):
    def __init__(self, recompute):
        super().__init__()
        self.b1, self.b2 = Block(W[0], W[1]), Block(W[2], W[3])
        if recompute:
            self.b1.recompute()
            self.b2.recompute()
        self.mm = ops.MatMul().shard(((2, 1), (1, 1)))

    def construct(self, x):
        return self.mm(self.b2(self.b1(x)), self.b1.w1)    # b1.w1 is used outside its block too


def _gradients(recompute):
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            net = nn.WithLossCell(Net(recompute), nn.MSELoss(reduction="sum"))
            loss, grads = ms.value_and_grad(net, None, net.trainable_params())(
                ms.Tensor(X), ms.Tensor(Y))
            return float(loss.asnumpy()), [g.asnumpy() for g in grads]
    try:
        return run_ranks(2, rank)
    finally:
        ms.reset_auto_parallel_context()


def test_recomputed_cells_replay_and_give_the_same_gradients(monkeypatch):
    replays = []
    replay_from = executor.LocalRun.replay_from

    def counted(self, start, inputs, layouts):
        replays.append(start)
        return replay_from(self, start, inputs, layouts)

    monkeypatch.setattr(executor.LocalRun, "replay_from", counted)
    kept = _gradients(False)
    assert replays == []
    again = _gradients(True)
    # each rank replays both blocks in backward: b2 (from call 4), then b1 (from call 0)
    assert sorted(replays) == [0, 0, 4, 4], replays
    for (loss, grads), (loss_again, grads_again) in zip(kept, again):
        assert loss == loss_again
        assert len(grads) == 4
        for a, b in zip(grads, grads_again):
            assert np.abs(a).max() > 0
        # weights used only inside the recomputed cells: bit for bit
        for a, b in zip(grads[1:], grads_again[1:]):
            assert np.array_equal(a, b)
        # b1.w1 is also used outside its cell: the replay lets it in through a mirror of its
        # own, so its two uses' gradients are summed over the ranks apart and then added,
        # not added and then summed: the same sum in another order (one float32 rounding)
        np.testing.assert_allclose(grads[0], grads_again[0], rtol=1e-6, atol=1e-5)



def test_a_recomputed_primitive_in_a_sharded_run_says_it_keeps_its_inputs(caplog):
    from minitorch_dist import runtime
    runtime._said.discard("sharding.primitive_recompute")

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(W[0].copy()))
            self.mm = ops.MatMul().shard(((2, 1), (1, 1)))
            self.mm.recompute()

        def construct(self, x):
            return self.mm(x, self.w)

    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            net = Net()
            return [net(ms.Tensor(X)).shape for _ in range(2)]
    try:
        with caplog.at_level("WARNING", logger="minitorch_dist"):
            shapes = run_ranks(2, rank)
    finally:
        ms.reset_auto_parallel_context()
    assert shapes[0][0] == (8, 16)
    notes = [r for r in caplog.records if "Primitive.recompute: mm in an operator-sharded run"
             in r.getMessage()]
    assert len(notes) == 1
