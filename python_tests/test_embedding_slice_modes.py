"""EmbeddingLookup's slice modes under semi-auto parallel are operator strategies, as in
MindSpore: "batch_slice" splits the ids, "table_row_slice" the table's rows,
"table_column_slice" its columns. Each trains like one process on 2 ranks, with dense and
sparse (RowTensor) gradients; each rank holds only its block of a sliced table."""
import threading

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import assemble_array
from minitorch_dist.parallel.sharding.scope import sharding_world

V, E, B, F, STEPS = 12, 8, 8, 3, 3
rng = np.random.default_rng(0)
IDS = rng.integers(0, V, (STEPS, B, F)).astype(np.int32)
Y = rng.standard_normal((STEPS, B, 1)).astype(np.float32)
LOCAL = {"batch_slice": (V, E), "table_row_slice": (V // 2, E), "table_column_slice": (V, E // 2)}


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


class Net(nn.Cell):
    def __init__(self, mode, sparse):
        super().__init__()
        ms.set_seed(3)
        self.emb = nn.EmbeddingLookup(V, E, slice_mode=mode, sparse=sparse, param_init="normal",
                                      target="DEVICE")
        self.w = ms.Parameter(ms.Tensor(np.full((F * E, 1), 0.1, np.float32)), "w")
        self.reshape = ops.Reshape()
        self.mm = ops.MatMul()

    def construct(self, x):
        return self.mm(self.reshape(self.emb(x), (-1, F * E)), self.w)


def _train(net, rows):
    opt = nn.Adam(net.trainable_params(), 0.05) if net.emb.sparse else nn.SGD(net.trainable_params(), 0.5)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    return [float(step(ms.Tensor(IDS[s][rows]), ms.Tensor(Y[s][rows])).asnumpy())
            for s in range(STEPS)]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("mode", sorted(LOCAL))
def test_slice_modes_train_like_one_process(mode, sparse):
    ref = Net("batch_slice", sparse)
    want = _train(ref, slice(None))
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    lock = threading.Lock()

    def rank(comm):
        with sharding_world(comm):
            with lock:                  # thread ranks share the framework's generator
                net = Net(mode, sparse)
            losses = _train(net, slice(4 * comm.rank, 4 * comm.rank + 4))
            table = net.emb.embedding_table
            return losses, table.asnumpy(), table.sharding_layout

    results = run_ranks(2, rank, timeout=60)
    for losses, table, _ in results:
        assert table.shape == LOCAL[mode]
        np.testing.assert_allclose(losses, want, rtol=1e-5)
    merged = assemble_array([r[1] for r in results], results[0][2])
    np.testing.assert_allclose(merged, ref.emb.embedding_table.asnumpy(), rtol=1e-5, atol=1e-6)


def test_field_slice_under_semi_auto_is_refused_clearly():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            nn.EmbeddingLookup(V, E, slice_mode="field_slice", manual_shapes=(6, 6))

    with pytest.raises(NotImplementedError, match="field_slice.*not implemented under semi/auto"):
        run_ranks(2, rank, timeout=30)
