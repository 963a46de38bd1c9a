"""OneHot's sharding rule: the indices split like the output's rows, the depth axis whole.
A loss that one-hot encodes its labels (MindSpore's ResNet-50 sample's
``SoftmaxCrossEntropyExpand``) no longer gathers every rank's labels at the end of forward."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import LocalCommunicator, run_ranks
from minitorch_dist.parallel.sharding.rules import ShardingError, plan
from minitorch_dist.parallel.sharding.scope import sharding_world

RANKS, LOCAL_BATCH = 4, 2


def test_the_indices_take_the_output_rows_split_and_the_depth_stays_whole():
    p = plan(ops.OneHot(), ((4, 1), (), ()), [(16,), (), ()], [None, None, None], {"depth": 5}, 8)
    assert p.device_matrix == (4, 1, 2)              # 2 copies of each block (repeated axis)
    assert p.input_maps == ((2,), (), ()) and p.output_maps == ((2, 1),)
    # axis 0: the depth comes first in the output, the indices' rows second
    p = plan(ops.OneHot(axis=0), ((1, 2, 2),), [(6, 4), None, None], [None, 1.0, 0.0],
             {"depth": 3, "axis": 0}, 4)
    assert p.input_maps == ((1, 0), None, None) and p.output_maps == ((2, 1, 0),)


def test_splitting_the_depth_axis_is_refused_by_name():
    with pytest.raises(ShardingError, match=r"splits the depth axis 1 2 ways.*\(\(4, 1\),\)"):
        plan(ops.OneHot(), ((4, 2),), [(16,), None, None], [None, 1.0, 0.0], {"depth": 4}, 8)
    with pytest.raises(ShardingError, match="on_value and off_value must be scalars"):
        plan(ops.OneHot(), ((4, 1), (1,), ()), [(16,), (2,), ()], [None] * 3, {"depth": 4}, 4)


class OneHotLoss(nn.Cell):
    """Cross-entropy through OneHot, as MindSpore's ResNet-50 sample writes it."""

    def __init__(self):
        super().__init__()
        self.onehot, self.log_softmax = ops.OneHot(), ops.LogSoftmax()
        self.on, self.off = ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32)
        self.sum, self.mean = ops.ReduceSum(keep_dims=False), ops.ReduceMean(keep_dims=False)

    def construct(self, logits, label):
        hot = self.onehot(label, ops.shape(logits)[1], self.on, self.off)
        return self.mean(-self.sum(self.log_softmax(logits) * hot, -1), -1)


def _data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((RANKS * LOCAL_BATCH, 6)).astype(np.float32)
    return x, rng.integers(0, 4, len(x)).astype(np.int32)


def test_a_one_hot_loss_trains_data_parallel_without_gathering_the_labels(monkeypatch):
    gathered, allgather = [], LocalCommunicator.allgather

    def counted(self, *args, **kwargs):
        gathered.append(1)
        return allgather(self, *args, **kwargs)

    monkeypatch.setattr(LocalCommunicator, "allgather", counted)
    ms.set_auto_parallel_context(parallel_mode="auto_parallel",
                                 search_mode="sharding_propagation", gradients_mean=True)
    ms.set_seed(0)
    start = [p.asnumpy().copy() for p in nn.Dense(6, 4).trainable_params()]
    x, y = _data()

    def net():
        dense = nn.Dense(6, 4)
        for p, w in zip(dense.trainable_params(), start):
            p.set_data(ms.Tensor(w.copy()))
        return dense

    def rank(comm):
        dense = net()
        step = nn.TrainOneStepCell(nn.WithLossCell(dense, OneHotLoss()),
                                   nn.SGD(dense.trainable_params(), 0.5))
        rows = slice(comm.rank * LOCAL_BATCH, (comm.rank + 1) * LOCAL_BATCH)
        with sharding_world(comm):
            loss = step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
        return float(loss.asnumpy()), [p.asnumpy() for p in dense.trainable_params()]

    try:
        results = run_ranks(RANKS, rank)
    finally:
        ms.reset_auto_parallel_context()
    assert gathered == []
    dense = net()
    one = nn.TrainOneStepCell(nn.WithLossCell(dense, OneHotLoss()),
                              nn.SGD(dense.trainable_params(), 0.5))
    want_loss = float(one(ms.Tensor(x), ms.Tensor(y)).asnumpy())
    for loss, params in results:
        assert loss == pytest.approx(want_loss, rel=1e-6)
        for got, want in zip(params, dense.trainable_params()):
            np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-6, atol=1e-7)
        assert not np.array_equal(params[0], start[0])
