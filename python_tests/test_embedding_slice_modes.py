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


# ---- field_slice: the table's rows by manual_shapes and the ids' fields, on the same ranks ----
FV, FF = 16, 4                                  # table rows; fields (a multiple of the ranks)


def _field_ids(manual, steps=STEPS, seed=1):
    """Ids whose field block k (of len(manual)) stays in row block k, as field_slice needs."""
    fields = FF // len(manual)
    starts = np.cumsum((0,) + tuple(manual))[:-1]
    r = np.random.default_rng(seed).random((steps, B, FF))
    block = np.arange(FF) // fields
    return (starts[block] + np.floor(r * np.asarray(manual)[block])).astype(np.int32)


class FieldNet(Net):
    def __init__(self, mode, sparse, manual):
        nn.Cell.__init__(self)
        ms.set_seed(5)
        self.emb = nn.EmbeddingLookup(FV, E, slice_mode=mode, sparse=sparse, target="DEVICE",
                                      manual_shapes=manual)
        self.w = ms.Parameter(ms.Tensor(np.linspace(-1, 1, FF * E, dtype=np.float32)
                                        .reshape(FF * E, 1)), "w")
        self.reshape, self.mm = ops.Reshape(), ops.MatMul()

    def construct(self, x):
        return self.mm(self.reshape(self.emb(x), (-1, FF * E)), self.w)


def _train_field(net, ids, rows):
    opt = nn.Adam(net.trainable_params(), 0.05) if net.emb.sparse else nn.SGD(net.trainable_params(), 0.5)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    return [float(step(ms.Tensor(ids[s][rows]), ms.Tensor(Y[s][rows])).asnumpy())
            for s in range(STEPS)]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("manual", [(8, 8), (10, 6), (4, 4, 4, 4), (3, 5, 6, 2)],
                         ids=["2-equal", "2-uneven", "4-equal", "4-uneven"])
def test_field_slice_trains_like_one_process(manual, sparse):
    """Rank k holds manual[k] rows and looks up its FF/ranks fields there; losses and the
    merged table equal one process (MindSpore's field_slice: manual_split, ((n,1),(1,n)))."""
    ranks = len(manual)
    ids = _field_ids(manual)
    ref = FieldNet("batch_slice", sparse, manual)
    want = _train_field(ref, ids, slice(None))
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    lock = threading.Lock()
    per = B // ranks

    def rank(comm):
        with sharding_world(comm):
            with lock:
                net = FieldNet("field_slice", sparse, manual)
            losses = _train_field(net, ids, slice(per * comm.rank, per * (comm.rank + 1)))
            table = net.emb.embedding_table
            return losses, table.asnumpy(), table.sharding_layout

    results = run_ranks(ranks, rank, timeout=60)
    for r, (losses, table, _) in enumerate(results):
        assert table.shape == (manual[r], E)
        np.testing.assert_allclose(losses, want, rtol=1e-5)
    merged = assemble_array([r[1] for r in results], results[0][2])
    np.testing.assert_allclose(merged, ref.emb.embedding_table.asnumpy(), rtol=1e-5, atol=1e-6)


def test_field_slice_refuses_what_it_cannot_do():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def make(manual):
        def rank(comm):
            with sharding_world(comm):
                nn.EmbeddingLookup(V, E, slice_mode="field_slice", manual_shapes=manual)
        return rank

    with pytest.raises(ValueError, match=r"add up to 11 rows, but the table has vocab_size=12"):
        run_ranks(2, make((6, 5)), timeout=30)
    with pytest.raises(ValueError, match="one positive row count per rank"):
        run_ranks(2, make((4, 4, 4)), timeout=30)

    def odd_fields(comm):
        with sharding_world(comm):
            net = FieldNet("field_slice", False, (8, 8))
            net(ms.Tensor(np.zeros((4, 3), np.int32)))          # 3 fields over 2 ranks

    with pytest.raises(Exception, match=r"\(8, 3\) has size 3, which cannot be split into 2"):
        run_ranks(2, odd_fields, timeout=30)


def test_column_and_field_slice_outside_semi_auto_keep_the_table_whole(caplog):
    """MindSpore applies these slice modes only under semi/auto parallel; elsewhere the
    table stays whole on every rank, with a one-time note (not an error, not silent)."""
    from minitorch_dist.parallel.embedding import row_slice as embedding_slice
    embedding_slice._noted_modes.clear()

    def rank(comm):
        emb = nn.EmbeddingLookup(V, E, slice_mode="table_column_slice", group=comm)
        return emb.embedding_table.shape

    with caplog.at_level("WARNING", logger="minitorch_dist"):
        shapes = run_ranks(2, rank, timeout=30)
    assert shapes == [(V, E), (V, E)]
    notes = [r.getMessage() for r in caplog.records if "table_column_slice" in r.getMessage()]
    assert len(notes) == 1 and "holds the whole table" in notes[0]
