"""The sharding trace is cheap: it runs on zero-stride stand-ins and keeps no primitive's data.

``ShardedCall.prepare`` traces the network on the GLOBAL batch (8 ranks: 8 times a rank's
batch). The trace keeps every tensor it saw (ids must stay unique), so before it kept every
activation of a whole-batch forward: a ResNet-50 rank passed 15 GiB in the trace alone.
Now each primitive's output is replaced at once by a shape-only stand-in: the trace holds
about one primitive's arrays at a time, and the plan is the same as with real arrays.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, nn, ops
from minitorch_dist.parallel.sharding import graph as graph_module
from minitorch_dist.parallel.sharding import row_trace
from minitorch_dist.parallel.sharding.graph import trace, zeros_view
from minitorch_dist.parallel.sharding.propagation import assign_strategies
from minitorch_dist.parallel.sharding.sharded_call import dataset_layouts

RANKS, LOCAL_BATCH, CHANNELS, SIDE = 8, 4, 16, 32


class ConvBlock(nn.Cell):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, pad_mode="same")
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x))) + x


class ConvNet(nn.Cell):
    def __init__(self, blocks=6):
        super().__init__()
        self.stem = nn.Conv2d(3, CHANNELS, 3, pad_mode="same")
        self.blocks = nn.SequentialCell([ConvBlock(CHANNELS) for _ in range(blocks)])
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(CHANNELS, 10)

    def construct(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(self.mean(x, (2, 3)))


def _peak(fn):
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _global_stand_in(shape):
    return Tensor._make(zeros_view(shape, np.float32, ms.Tensor(0.0).device),
                        ms.Tensor(0.0).device)


def test_trace_peak_is_below_one_forward_of_the_local_batch():
    ms.set_seed(0)
    net = ConvNet()
    net.set_train(False)
    local = Tensor(np.random.default_rng(0).standard_normal(
        (LOCAL_BATCH, 3, SIDE, SIDE)).astype(np.float32))
    net(local)                                          # warm caches and pools
    forward = _peak(lambda: net(local))
    whole = _global_stand_in((RANKS * LOCAL_BATCH, 3, SIDE, SIDE))
    trace(net, [whole])                                 # the kernels' pools at this size
    traced = _peak(lambda: trace(net, [whole]))
    activation = RANKS * LOCAL_BATCH * CHANNELS * SIDE * SIDE * 4    # one global activation
    # one primitive on the global batch: its input made whole, its workspace (im2col, not
    # pooled in a trace) and its output, whatever the depth (the former trace kept all 13
    # activations of the 6 blocks and a pooled workspace per shape: 50 MiB here, 25 times
    # ``activation``); a forward of the local batch (8 times smaller) keeps its activations
    assert traced < 5 * activation, (traced, activation)
    assert traced < 2 * forward, (traced, forward)


def test_a_deeper_network_traces_in_the_same_memory():
    shallow, deep = ConvNet(blocks=2), ConvNet(blocks=8)
    whole = _global_stand_in((RANKS * LOCAL_BATCH, 3, SIDE, SIDE))
    trace(shallow, [whole])
    first = _peak(lambda: trace(shallow, [whole]))
    second = _peak(lambda: trace(deep, [whole]))
    activation = RANKS * LOCAL_BATCH * CHANNELS * SIDE * SIDE * 4
    assert second < first + activation, (first, second)


def _plan(net, x):
    graph = trace(net, [x])
    _, layouts = dataset_layouts([(LOCAL_BATCH,) + tuple(x.shape[1:])], RANKS, "data_parallel")
    plans = assign_strategies(graph, RANKS, layouts, True)
    nodes = [(n.type_name, n.scope, n.in_shapes, n.out_shapes, n.out_dtypes, n.strategy,
              [s.describe() if hasattr(s, "describe") else repr(s) for s in n.inputs],
              sorted(n.consumers)) for n in graph.nodes]
    return nodes, sorted((index, repr(plan)) for index, plan in plans.items())


def test_the_plan_is_the_one_real_arrays_give(monkeypatch):
    ms.set_seed(0)
    net = ConvNet(blocks=2)
    shape = (RANKS * LOCAL_BATCH, 3, SIDE, SIDE)
    cheap = _plan(net, _global_stand_in(shape))
    # the former trace: real zeros in, every primitive run on the whole batch, its real
    # output kept
    monkeypatch.setattr(graph_module, "shape_only", lambda value: value)
    monkeypatch.setattr(row_trace, "_state", {"enabled": False})
    real = _plan(net, Tensor(np.zeros(shape, np.float32)))
    assert len(cheap[0]) > 10 and len(cheap[1]) == len(cheap[0])
    assert any("device_matrix=(8" in plan for _, plan in cheap[1])
    assert cheap == real


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_a_stand_in_reads_as_zeros_holds_one_element_and_takes_writes(dtype):
    view = zeros_view((64, 3, 8), dtype, ms.Tensor(0.0).device)
    assert view.shape == (64, 3, 8) and view.dtype == dtype
    assert view.base.nbytes == np.dtype(dtype).itemsize
    assert not view.any()
    view[1:3] = 1                       # a primitive writing into its input still works
    assert view.flags.writeable
