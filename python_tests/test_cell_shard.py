"""``Cell.shard`` / ``ms.shard`` (issue 26 item 1): a block run with its inputs laid out as
asked, strategies propagated inside it, parameters sliced per ``parameter_plan``."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.extension import Extension
from minitorch_dist.parallel.shard_function import LayoutConstraint, ShardFunction, shard
from minitorch_dist.parallel.sharding.layout_api import Layout
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense1 = nn.Dense(16, 32)
        self.gelu = nn.GELU()
        self.dense2 = nn.Dense(32, 16)

    def construct(self, x):
        return self.dense2(self.gelu(self.dense1(x)))


class Net(nn.Cell):
    def __init__(self, sharded, plan_key="self.block1.dense2.weight"):
        super().__init__()
        self.block1 = Block()
        self.head = nn.Dense(16, 4)
        self.block1_shard = None
        if sharded:      # as the tutorial writes it: the shard function is an attribute too
            self.block1_shard = shard(self.block1, in_strategy=((8, 1),), out_strategy=((8, 1),),
                                      parameter_plan={plan_key: (8, 1)})

    def construct(self, x):
        block = self.block1 if self.block1_shard is None else self.block1_shard
        return self.head(block(x))


def _train(net, x, y, group=None, sharded=False, steps=3):
    opt = nn.SGD(net.trainable_params(), 0.1)
    cell = nn.WithLossCell(net, nn.MSELoss())
    if sharded:
        cell = ShardedCell(cell, opt, group=group)
    step = nn.TrainOneStepCell(cell, opt)
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for _ in range(steps)]


def _weights(net, seed=3):
    rng = np.random.default_rng(seed)
    for p in net.trainable_params():
        p.data = (rng.standard_normal(p.shape) * 0.3).astype(np.float32)
    return net


def test_shard_block_trains_like_one_process_with_the_planned_slices():
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 16), np.float32), rng.random((8, 4), np.float32)
    reference = _train(_weights(Net(False)), x, y)
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation",
                                 full_batch=True)

    def rank(comm):
        net = _weights(Net(True))
        losses = _train(net, x, y, group=comm, sharded=True)
        return losses, net.block1.dense2.weight.asnumpy().shape, \
            net.block1.dense2.weight.sharding_layout.splits()

    for losses, shape, splits in run_ranks(8, rank):
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
        assert splits == (8, 1) and shape == (2, 32)          # sliced as parameter_plan asks


def test_the_input_constraint_is_an_identity_carrying_the_strategy():
    lay = Layout((2, 4), ("dp", "mp"))
    fn = shard(lambda a: a * 2, in_strategy=(lay("dp", "mp"),))
    assert isinstance(fn, ShardFunction) and fn.in_strategy[0] == lay("dp", "mp")
    out = fn(ms.Tensor(np.ones((2, 4), np.float32)))       # one process: runs as written
    np.testing.assert_array_equal(out.asnumpy(), 2 * np.ones((2, 4)))
    assert LayoutConstraint((1, 1)).in_strategy == ((1, 1),)


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(in_strategy=((1, 8),), parameter_plan={"self.block1.dense9.weight": (8, 1)}),
     ValueError, "dense9.*not a parameter"),
    (dict(in_strategy=((1, 8),), parameter_plan={"dense2.weight": (3, 1)}), ValueError, "does not fit"),
    (dict(in_strategy=((1, 8),), device="TPU"), ValueError, "device must be one of"),
    (dict(in_strategy=None), ValueError, "in_strategy is required"),
    (dict(in_strategy=(("a", 1),)), TypeError, "positive split"),
])
def test_bad_shard_arguments_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        shard(Net(False).block1, **kwargs)


def test_a_parameter_plan_against_an_annotated_strategy_is_refused_on_every_rank():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    x = np.ones((8, 16), np.float32)

    def rank(comm):
        net = Net(True)
        net.block1.dense2.matmul.shard(((1, 8), (1, 8)))       # slices the weight (1, 8)
        with pytest.raises(ValueError, match="parameter_plan slices parameter") as err:
            ShardedCell(net, group=comm)(ms.Tensor(x))
        return str(err.value)

    assert len(set(run_ranks(8, rank))) == 1


@pytest.mark.skipif(not hasattr(Extension, "shard_function"),
                    reason="Cell.shard reaches the parallel layer through Extension.shard_function")
def test_cell_shard_is_ms_shard():
    block = Net(False).block1
    fn = block.shard(in_strategy=((1, 8),), parameter_plan={"dense2.weight": (8, 1)})
    assert isinstance(fn, ShardFunction) and fn.fn is block


class Probe(nn.Cell):
    """Records, on each call, the shape the layers' checks see and the local one."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def construct(self, x):
        from minitorch_dist.nn.layers.logical_shape import logical_shape
        self.seen.append((logical_shape(x), tuple(x.shape)))
        return x


class ColumnNet(nn.Cell):
    """The tutorial's shape: a block whose input is split along its last axis, then a head
    whose output rows are split, then a loss that checks logits against labels."""

    def __init__(self, ranks):
        super().__init__()
        self.block1 = Block()
        self.probe = Probe()
        self.head = nn.Dense(16, 4)
        self.head.matmul.shard(((2, ranks // 2), (1, ranks // 2)))
        self.block1_shard = self.block1.shard(in_strategy=((1, ranks),),
                                              parameter_plan={"self.block1.dense2.weight":
                                                              (ranks, 1)})

    def construct(self, x):
        return self.head(self.probe(self.block1_shard(self.probe(x))))


def _ce_train(net, x, y, group=None, sharded=False, steps=2):
    opt = nn.SGD(net.trainable_params(), 0.1)
    cell = nn.WithLossCell(net, nn.CrossEntropyLoss())
    if sharded:
        cell = ShardedCell(cell, opt, group=group)
    step = nn.TrainOneStepCell(cell, opt)
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for _ in range(steps)]


def test_code_inside_a_sharded_block_sees_the_whole_shapes():
    """Dense and CrossEntropyLoss check the last axis and the batch: on a rank's slices they
    used to see local shapes and refuse (shard_function_parallel, model_saving_loading's
    retrain). They see the logical shapes now, as in MindSpore, and train as one process."""
    rng = np.random.default_rng(1)
    x, y = rng.random((8, 16), np.float32), rng.integers(0, 4, 8).astype(np.int32)
    reference = _ce_train(_weights(ColumnNet(4)), x, y)
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation",
                                 full_batch=True)

    def rank(comm):
        net = _weights(ColumnNet(4))
        losses = _ce_train(net, x, y, group=comm, sharded=True)
        return losses, net.block1.dense2.weight.asnumpy().shape, net.probe.seen[-2:]

    for losses, shape, seen in run_ranks(4, rank):
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
        assert shape == (4, 32)                               # parameter_plan (4, 1)
        (whole_in, _), (whole_out, _) = seen
        assert whole_in == (8, 16) and whole_out == (8, 16)   # logical, whatever the slice


class ConvNet(nn.Cell):
    def __init__(self, sharded):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, has_bias=True)
        self.bn = nn.BatchNorm2d(6)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(6 * 5 * 5, 3)
        self.conv_s = self.conv.shard(in_strategy=((1, 2, 1, 1),)) if sharded else self.conv
        if sharded:     # whole-batch statistics: a batch split would normalise per rank
            self.bn.bn_train.shard(((1, 2, 1, 1), (2,), (2,), (2,), (2,)))

    def construct(self, x):
        return self.fc(self.flat(self.bn(self.conv_s(x))))


def test_conv_and_batchnorm_check_whole_channels_and_buffers_slice_without_the_optimizer():
    """Conv2d and BatchNorm2d check the channel axis, which an in_strategy of (1, 2, 1, 1)
    splits; and BatchNorm's moving mean, sliced with its channels, is no parameter of the
    optimizer (slicing it asked the optimizer for its state and failed)."""
    rng = np.random.default_rng(0)
    x, y = rng.random((4, 4, 5, 5), np.float32), np.array([0, 1, 2, 1], np.int32)
    reference = _ce_train(_weights(ConvNet(False)), x, y)
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation",
                                 full_batch=True)
    for losses in run_ranks(2, lambda comm: _ce_train(_weights(ConvNet(True)), x, y,
                                                      group=comm, sharded=True)):
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
