"""BatchNorm in an operator-sharded run: MindSpore's GPU/CPU behaviour, per-rank statistics.

With the batch split (AUTO_PARALLEL data parallel, or a strategy), MindSpore's BatchNormInfo
inserts a statistics AllReduce only on Ascend (SyncBatchNorm); on GPU/CPU each rank
normalises its slice with its own statistics. Before, BatchNorm had no rule here and ran
whole on every rank: every BatchNorm gathered the batch (52 AllGathers a ResNet-50 step).
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import executor
from minitorch_dist.parallel.sharding.redistribution import plan_redistribution
from minitorch_dist.parallel.sharding.rules import ShardingError, plan
from minitorch_dist.parallel.sharding.scope import sharding_world

RANKS, LOCAL = 2, 4
RNG = np.random.default_rng(0)
X = RNG.standard_normal((RANKS * LOCAL, 3, 6, 6)).astype(np.float32)


class ConvBN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, pad_mode="same", weight_init="normal")
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, pad_mode="same", weight_init="normal")
        self.bn2 = nn.BatchNorm2d(8)

    def construct(self, x):
        return self.bn2(self.conv2(self.relu(self.bn(self.conv(x)))))


def _weights():
    ms.set_seed(3)
    net = ConvBN()
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


def _load(net, weights):
    for p in net.get_parameters():
        p.set_data(ms.Tensor(weights[p.name].copy()))


def _sharded(weights, mode):
    moves = []
    move = executor.LocalRun.move

    def recorded(self, tensor, have, want, node, position):
        moves.append((node.type_name, not plan_redistribution(have, want)))
        return move(self, tensor, have, want, node, position)

    executor.LocalRun.move = recorded
    ms.set_auto_parallel_context(parallel_mode=mode)

    def rank(comm):
        with sharding_world(comm):
            net = ConvBN()
            _load(net, weights)
            lo = comm.rank * LOCAL
            out = net(ms.Tensor(X[lo:lo + LOCAL]))
            return out.asnumpy(), net.bn.moving_mean.asnumpy().copy()
    try:
        return run_ranks(RANKS, rank), moves
    finally:
        executor.LocalRun.move = move
        ms.reset_auto_parallel_context()


@pytest.mark.parametrize("mode", ["auto_parallel", "semi_auto_parallel"])
def test_each_rank_normalises_its_slice_with_its_own_statistics(mode):
    weights = _weights()
    results, moves = _sharded(weights, mode)
    for r, (out, moving_mean) in enumerate(results):
        alone = ConvBN()
        _load(alone, weights)
        lo = r * LOCAL
        expected = alone(ms.Tensor(X[lo:lo + LOCAL])).asnumpy()
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(moving_mean, alone.bn.moving_mean.asnumpy(), rtol=1e-5,
                                   atol=1e-6)
    # the ranks' slices differ, so do their statistics (one process would give one)
    assert not np.allclose(results[0][1], results[1][1])
    # no BatchNorm input is moved (gathered): it takes its producer's batch split
    assert [m for m in moves if m[0] == "BatchNorm"] and all(
        same for name, same in moves if name == "BatchNorm")


def test_gradients_of_gamma_beta_and_the_conv_weight_are_summed_over_the_ranks():
    weights = _weights()
    ms.set_auto_parallel_context(parallel_mode="auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            net = ConvBN()
            _load(net, weights)
            lo = comm.rank * LOCAL
            params = [net.bn.gamma, net.bn.beta, net.conv.weight]
            _, grads = ms.value_and_grad(lambda x: net(x).sum(), None, params)(
                ms.Tensor(X[lo:lo + LOCAL] ** 2))
            return [g.asnumpy() for g in grads]
    try:
        sharded = run_ranks(RANKS, rank)
    finally:
        ms.reset_auto_parallel_context()
    total = [0, 0, 0]
    for r in range(RANKS):
        alone = ConvBN()
        _load(alone, weights)
        lo = r * LOCAL
        _, grads = ms.value_and_grad(lambda x, net=alone: net(x).sum(), None,
                                     [alone.bn.gamma, alone.bn.beta, alone.conv.weight])(
            ms.Tensor(X[lo:lo + LOCAL] ** 2))
        total = [t + g.asnumpy() for t, g in zip(total, grads)]
    for got in sharded:
        for a, b in zip(got, total):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_channel_splits_slice_the_statistics_and_bad_strategies_name_them():
    p = plan(ops.BatchNorm(), ((2, 2, 1, 1), (2,), (2,), (2,), (2,)),
             [(8, 4, 3, 3)] + [(4,)] * 4, [None] * 5, {}, 4)
    assert p.device_matrix == (2, 2, 1, 1) and p.input_maps[1] == (2,)
    assert p.forward_comm == ()
    with pytest.raises(ShardingError, match="split like x's channels"):
        plan(ops.BatchNorm(), ((2, 2, 1, 1), (1,), (2,), (2,), (2,)),
             [(8, 4, 3, 3)] + [(4,)] * 4, [None] * 5, {}, 4)


class ConvPool(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, pad_mode="same", weight_init="normal", has_bias=True)
        self.pool = nn.MaxPool2d(2, 2)
        self.avg = nn.AvgPool2d(3, 3)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(4, 2, weight_init="normal")

    def construct(self, x):
        return self.fc(self.flat(self.avg(self.pool(self.conv(x)))))


def test_convolution_and_pooling_split_the_batch_and_train_like_one_process():
    ms.set_seed(5)
    weights = {p.name: p.asnumpy().copy() for p in ConvPool().get_parameters()}
    x = ms.Tensor(X)
    alone = ConvPool()
    _load(alone, weights)
    expected_out = alone(x).asnumpy()
    _, expected = ms.value_and_grad(lambda v: (alone(v) ** 2).sum(), None,
                                    alone.trainable_params())(x)
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    moves = []
    move = executor.LocalRun.move

    def recorded(self, tensor, have, want, node, position):
        moves.append((node.type_name, not plan_redistribution(have, want)))
        return move(self, tensor, have, want, node, position)

    def rank(comm):
        with sharding_world(comm):
            net = ConvPool()
            _load(net, weights)
            lo = comm.rank * LOCAL
            local = ms.Tensor(X[lo:lo + LOCAL])
            out = net(local).asnumpy()
            _, grads = ms.value_and_grad(lambda v: (net(v) ** 2).sum(), None,
                                         net.trainable_params())(local)
            return out, [g.asnumpy() for g in grads]
    executor.LocalRun.move = recorded
    try:
        results = run_ranks(RANKS, rank)
    finally:
        executor.LocalRun.move = move
        ms.reset_auto_parallel_context()
    for r, (out, grads) in enumerate(results):
        np.testing.assert_allclose(out, expected_out[r * LOCAL:(r + 1) * LOCAL], rtol=1e-5,
                                   atol=1e-6)
        for got, want in zip(grads, expected):
            np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-4, atol=1e-5)
    kinds = {name for name, _ in moves}
    assert {"Conv2D", "MaxPool", "AvgPool"} <= kinds
    assert all(same for name, same in moves if name in ("Conv2D", "MaxPool", "AvgPool"))


@pytest.mark.parametrize("prim,strategy,shapes,message", [
    (ops.Conv2D(out_channel=4, kernel_size=3), ((1, 2, 1, 1), (1, 2, 1, 1)),
     [(8, 4, 6, 6), (4, 4, 3, 3)], "splits x's batch only"),
    (ops.MaxPool(kernel_size=2, strides=2), ((2, 1, 2, 1),), [(8, 4, 6, 6)],
     "splits the batch and channels only"),
])
def test_convolution_and_pooling_refuse_other_splits_naming_them(prim, strategy, shapes, message):
    with pytest.raises(ShardingError, match=message):
        plan(prim, strategy, shapes, [None] * len(shapes), {}, 4)
