"""The sharding trace runs a primitive on one row of the global batch where its rule allows.

Before, every rank ran a whole-batch forward to trace (ResNet-50 at 224x224 on 8 ranks:
147 s per rank before the first step). Now a primitive whose sharding rule cuts its batch
dimension into single rows runs on one row, and its output shapes are scaled up by the
plan's split counts (``row_trace``). The graph and the plan must be the ones a whole-batch
trace gives: same nodes, shapes, dtypes, sources, strategies and layouts. Either way the
trace computes on stand-ins of the parameters, so it updates no real one in place.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, nn, ops
from minitorch_dist.parallel.sharding import row_trace
from minitorch_dist.parallel.sharding.graph import trace, zeros_view
from minitorch_dist.parallel.sharding.propagation import assign_strategies
from minitorch_dist.parallel.sharding.sharded_call import dataset_layouts

RANKS, LOCAL_BATCH, SIDE = 8, 4, 16


class Bottleneck(nn.Cell):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels // 2, 1)
        self.bn1 = nn.BatchNorm2d(channels // 2)
        self.conv2 = nn.Conv2d(channels // 2, channels, 3, pad_mode="same")
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = ops.ReLU()
        self.add = ops.Add()

    def construct(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.add(self.bn2(self.conv2(y)), x))


class SmallResNet(nn.Cell):
    """The operators of the r1.5 sample's ResNet-50: strided conv, BN, max pool, bottlenecks,
    ReduceMean over (2, 3) kept, Squeeze, Dense; and Flatten + Reshape besides."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, pad_mode="same")
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        self.blocks = nn.SequentialCell([Bottleneck(8), Bottleneck(8)])
        self.mean = ops.ReduceMean(keep_dims=True)
        self.squeeze = ops.Squeeze(axis=(2, 3))
        self.flatten = ops.Flatten()
        self.reshape = ops.Reshape()
        self.fc = nn.Dense(8, classes)

    def construct(self, x):
        x = self.pool(ops.relu(self.bn(self.stem(x))))
        x = self.blocks(x)
        pooled = self.squeeze(self.mean(x, (2, 3)))
        flat = self.flatten(x)
        side = self.reshape(flat, (x.shape[0], 8, -1))
        return self.fc(pooled) + ops.ReduceSum()(side, (1, 2)).reshape(-1, 1) * 0.0


def _stand_in(shape, dtype=np.float32):
    device = ms.Tensor(0.0).device
    return Tensor._make(zeros_view(shape, dtype, device), device)


def _graph_and_plan(net, inputs, one_row):
    previous = row_trace.set_one_row_tracing(one_row)
    try:
        graph = trace(net, inputs)
    finally:
        row_trace.set_one_row_tracing(previous)
    local = [(LOCAL_BATCH,) + tuple(x.shape[1:]) for x in inputs]
    _, layouts = dataset_layouts(local, RANKS, "data_parallel")
    plans = assign_strategies(graph, RANKS, layouts, True)
    nodes = [(n.type_name, n.scope, n.in_shapes, n.out_shapes, n.out_dtypes, n.strategy,
              n.out_strategy, [s.describe() if hasattr(s, "describe") else repr(s)
                               for s in n.inputs], sorted(n.consumers)) for n in graph.nodes]
    return nodes, sorted((index, repr(plan)) for index, plan in plans.items())


def _with_loss(net):
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return nn.WithLossCell(net, loss)


@pytest.mark.parametrize("make", [SmallResNet, lambda: _with_loss(SmallResNet())],
                         ids=["network", "with_loss"])
def test_one_row_gives_the_whole_batch_plan(make):
    ms.set_seed(0)
    net = make()
    batch = RANKS * LOCAL_BATCH
    inputs = [_stand_in((batch, 3, SIDE, SIDE))]
    if isinstance(net, nn.WithLossCell):
        inputs.append(_stand_in((batch,), np.int32))
    cheap = _graph_and_plan(net, inputs, one_row=True)
    whole = _graph_and_plan(net, inputs, one_row=False)
    assert len(cheap[0]) > 20 and len(cheap[1]) == len(cheap[0])
    assert any("device_matrix=(8" in plan for _, plan in cheap[1])
    assert cheap == whole


def test_user_strategies_are_planned_the_same():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(12, 16), nn.ReLU(), nn.Dense(16, 4)])
    net[0].matmul.shard(((2, 4), (1, 4)))   # Dense: weight (out, in)
    net[2].matmul.shard(((8, 1), (1, 1)))
    inputs = [_stand_in((RANKS * LOCAL_BATCH, 12))]
    assert _graph_and_plan(net, inputs, True) == _graph_and_plan(net, inputs, False)


def test_the_batch_is_traced_one_row_at_a_time(monkeypatch):
    """The largest array a traced convolution sees is one row of the global batch."""
    seen = []
    conv_run = ops.Conv2D.run

    def spy(self, *args, **kwargs):
        seen.append(args[0].shape[0])
        return conv_run(self, *args, **kwargs)

    monkeypatch.setattr(ops.Conv2D, "run", spy)
    trace(SmallResNet(), [_stand_in((RANKS * LOCAL_BATCH, 3, SIDE, SIDE))])
    assert seen and set(seen) == {1}


def test_one_row_trace_needs_a_fraction_of_a_whole_batch_run():
    net = SmallResNet()
    whole = _stand_in((RANKS * LOCAL_BATCH, 3, 4 * SIDE, 4 * SIDE))
    trace(net, [whole])                                   # warm caches

    def peak(one_row):
        previous = row_trace.set_one_row_tracing(one_row)
        gc.collect()
        tracemalloc.start()
        try:
            trace(net, [whole])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            row_trace.set_one_row_tracing(previous)

    assert peak(True) < peak(False) / 4


def test_a_primitive_without_a_batch_rule_still_runs_whole():
    """No rule (or no batch dimension): the whole-batch run, as before."""
    probe = ops.Sin()       # elementwise: one row
    x = _stand_in((6, 5))
    out, shapes = row_trace.one_row_shapes(probe, (x,), {})
    assert out.shape == (1, 5) and shapes == [(6, 5)]
    assert row_trace.one_row_shapes(ops.Sin(), (_stand_in((1, 5)),), {}) is None
    assert row_trace.one_row_shapes(ops.Sin(), (_stand_in(()),), {}) is None


def test_a_trace_leaves_the_parameters_alone():
    """A training BatchNorm updates its moving statistics in place: the trace (on zeros)
    used to update the real ones, so a sharded first step started from 0.9, not 1.0."""
    net = SmallResNet()
    net.set_train(True)
    before = {p.name: p.asnumpy().copy() for p in net.get_parameters()}
    for one_row in (True, False):
        previous = row_trace.set_one_row_tracing(one_row)
        try:
            trace(net, [_stand_in((RANKS * LOCAL_BATCH, 3, SIDE, SIDE))])
        finally:
            row_trace.set_one_row_tracing(previous)
        assert all(np.array_equal(before[p.name], p.asnumpy()) for p in net.get_parameters())


def test_a_sharded_step_updates_batch_norm_statistics_like_one_process():
    """2 thread ranks under AUTO_PARALLEL: each rank's moving statistics after one step are
    those of one process normalising that rank's rows."""
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.parallel.sharding.scope import sharding_world

    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3, 6, 6)).astype(np.float32) * 2 + 1
    y = rng.integers(0, 4, 8).astype(np.int32)

    def make():
        ms.set_seed(0)
        return nn.SequentialCell([nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.Flatten(), nn.Dense(4 * 36, 4)])

    def train(net, rows, group=None):
        loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True,
                                                                     reduction="mean"))
        step = nn.TrainOneStepCell(loss, nn.Momentum(net.trainable_params(), 0.1, 0.9))
        step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
        return [net[1].moving_mean.asnumpy(), net[1].moving_variance.asnumpy()]

    alone = [train(make(), slice(4 * r, 4 * r + 4)) for r in range(2)]
    ms.set_auto_parallel_context(parallel_mode="auto_parallel",
                                 search_mode="sharding_propagation")
    try:
        def rank(comm):
            with sharding_world(comm):
                return train(make(), slice(4 * comm.rank, 4 * comm.rank + 4))
        sharded = run_ranks(2, rank)
    finally:
        ms.reset_auto_parallel_context()
    for got, want in zip(sharded, alone):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(sharded[0][1], 1.0)
