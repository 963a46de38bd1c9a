"""Row-sliced embedding tables across ranks (``slice_mode="table_row_slice"``), on ranks run
as threads (``run_ranks``), and at the end on real MPI ranks (``mpi_scripts/
embedding_slice_check.py``, a few seconds per job under the launcher's timeout).

Every check compares with one process holding the whole table and the whole batch: the
forward rows, the gradient routing (closed form and the adjoint identity), several training
steps with the sparse optimizers on the host (row slicing and batch slicing alike), bad ids
(the same IndexError on every rank, no hang), uneven vocabularies, memory per rank, the
gradient reducer's handling, and the merge of the ranks' checkpoints.
"""
import os
import re

import numpy as np
import pytest
from mpi_jobs import SCRIPTS, launch, needs_mpi

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import LocalCommunicator, run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.embedding.checkpoint import (merge_row_sliced_checkpoints,
                                                          row_sliced_names)
from minitorch_dist.parallel.embedding.row_slice import RowSliceLookup, row_slice
from minitorch_dist.row_tensor import RowTensor

V, D, F = 11, 3, 2          # 11 rows: uneven over 2 and 4 ranks
ROW, BATCH = "table_row_slice", "batch_slice"


def full_table(vocab=V, dim=D, seed=0):
    return np.random.default_rng(seed).standard_normal((vocab, dim)).astype(np.float32)


def split(array, rank, size):
    """Rank ``rank``'s share of a global batch (axis 0 divisible by ``size``)."""
    step = array.shape[0] // size
    return array[rank * step:(rank + 1) * step]


# ---- forward and gradient ------------------------------------------------------------------
@pytest.mark.parametrize("size", [2, 4])
def test_forward_equals_the_full_table_lookup(size):
    table = full_table()
    block = -(-V // size)
    batches = [np.array([[0, V - 1], [5, 5]]),           # both ends, a duplicate
               np.arange(block).reshape(1, -1) % block,  # all owned by rank 0
               np.zeros((0, 2), np.int64),               # an empty batch still takes part
               np.array([[3, 3, 3, 3]], np.int32)]       # int32 ids, one row repeated

    def body(comm):
        emb = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), slice_mode=ROW, group=comm)
        ids = batches[comm.rank % len(batches)]
        return emb(ms.Tensor(ids)).asnumpy(), ids

    for out, ids in run_ranks(size, body, timeout=20):
        np.testing.assert_array_equal(out, table[ids])


@pytest.mark.parametrize("size, target", [(2, "CPU"), (4, "CPU"), (2, "DEVICE")])
def test_gradient_rows_reach_their_owners(size, target):
    """Closed form: owner r's table gradient is the scatter-add of every rank's (ids, g) on
    its rows, with local indices; and sum_r <y_r, g_r> == sum_r <T_r, dT_r> (the adjoint)."""
    table = full_table()
    rng = np.random.default_rng(3)
    ids = rng.integers(0, V, (size, 5, F))
    grads = rng.standard_normal((size, 5, F, D)).astype(np.float32)

    def body(comm):
        emb = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), target=target,
                                 slice_mode=ROW, group=comm)
        y = emb(ms.Tensor(ids[comm.rank]))
        (y * ms.Tensor(grads[comm.rank])).sum().backward()
        g = emb.embedding_table.grad
        assert isinstance(g, RowTensor)
        part = emb.embedding_table.row_slice
        return part, g.to_dense().asnumpy(), float((y.asnumpy() * grads[comm.rank]).sum())

    results = run_ranks(size, body, timeout=20)
    expected = np.zeros_like(table)
    np.add.at(expected, ids.reshape(-1), grads.reshape(-1, D))
    for part, dense, _ in results:
        np.testing.assert_allclose(dense, expected[part.offset:part.offset + part.rows],
                                   rtol=1e-6, atol=1e-6)
    forward_side = sum(inner for _, _, inner in results)
    backward_side = sum(float((table[p.offset:p.offset + p.rows] * dense).sum())
                        for p, dense, _ in results)
    assert forward_side == pytest.approx(backward_side, rel=1e-5)


def test_dense_gradient_with_sparse_false():
    table = full_table()
    ids = np.array([[1, 9, 9], [0, 10, 4]])

    def body(comm):
        emb = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), target="DEVICE",
                                 sparse=False, slice_mode=ROW, group=comm)
        emb(ms.Tensor(ids[comm.rank:comm.rank + 1])).sum().backward()
        return emb.embedding_table.grad.asnumpy()

    expected = np.zeros_like(table)
    np.add.at(expected, ids.reshape(-1), 1.0)
    np.testing.assert_array_equal(np.concatenate(run_ranks(2, body, timeout=20)), expected)


def test_device_table_and_lookup_stay_on_the_device(virtual_gpu):
    ms.set_context(device_target="GPU")
    table = full_table()
    ids = np.array([[2, 8], [10, 2]])

    def body(comm):
        emb = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), target="DEVICE",
                                 slice_mode=ROW, group=comm)
        out = emb(ms.Tensor(ids[comm.rank:comm.rank + 1]))
        out.sum().backward()
        return out, emb.embedding_table

    for rank, (out, param) in enumerate(run_ranks(2, body, timeout=20)):
        assert out.device is virtual_gpu and param.device is virtual_gpu
        assert param.grad.device is virtual_gpu
        np.testing.assert_array_equal(out.asnumpy(), table[ids[rank:rank + 1]])


# ---- training equals one process -----------------------------------------------------------
class Net(nn.Cell):
    """Two fields of ids -> embedding rows -> a dense head: a table and dense parameters."""

    def __init__(self, table, slice_mode=BATCH, group=None, head=True):
        super().__init__()
        self.emb = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), target="CPU",
                                      slice_mode=slice_mode, group=group)
        weight = np.random.default_rng(1).standard_normal((1, F * D)).astype(np.float32)
        self.head = nn.Dense(F * D, 1, weight_init=ms.Tensor(weight), bias_init="zeros") \
            if head else None
        self.reshape = ops.Reshape()
        self.sum = ops.ReduceSum(keep_dims=True)

    def construct(self, ids):
        rows = self.reshape(self.emb(ids), (ids.shape[0], F * D))
        return self.head(rows) if self.head is not None else self.sum(rows, 1)


def data(size, per_rank, steps=4, seed=2):
    """Global batches with duplicates, one step whose ids all belong to rank 0's block."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        ids = rng.integers(0, V, (size * per_rank, F))
        if step == 2:
            ids %= -(-V // size)
        y = rng.standard_normal((size * per_rank, 1)).astype(np.float32)
        out.append((ids.astype(np.int32), y))
    return out


OPTIMIZERS = {
    "ftrl": lambda ps: nn.FTRL(ps, learning_rate=0.1, l1=1e-3, l2=1e-3),
    "lazy_adam": lambda ps: nn.LazyAdam(ps, learning_rate=0.05),
    "adam_lazy": lambda ps: nn.Adam(ps, learning_rate=0.05, use_lazy=True),
    "sgd": lambda ps: nn.SGD(ps, learning_rate=0.125),
}


def train(batches, make_opt, comm=None, slice_mode=BATCH, head=True):
    """Train on rank ``comm.rank``'s share of each batch (the whole batch without comm);
    returns (the training cell, its network)."""
    net = Net(full_table(), slice_mode, comm, head)
    opt = make_opt(net.trainable_params())
    opt.target = "CPU"
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    if comm is not None:
        step.grad_reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
    for ids, y in batches:
        if comm is not None:
            ids, y = split(ids, comm.rank, comm.size), split(y, comm.rank, comm.size)
        step(ms.Tensor(ids), ms.Tensor(y))
    return step, net


def assert_close_relative(actual, expected, rel=1e-6):
    scale = max(float(np.abs(expected).max()), 1e-30)
    assert float(np.abs(actual - expected).max()) <= rel * scale


@pytest.mark.parametrize("optimizer", ["ftrl", "lazy_adam", "adam_lazy"])
@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("slice_mode", [ROW, BATCH])
def test_training_equals_one_process(slice_mode, size, optimizer):
    batches = data(size, per_rank=3)
    _, reference = train(batches, OPTIMIZERS[optimizer])
    ref_table, ref_weight = reference.emb.embedding_table.asnumpy(), reference.head.weight.asnumpy()
    ranks = run_ranks(size, lambda comm: train(batches, OPTIMIZERS[optimizer], comm, slice_mode)[1],
                      timeout=30)
    tables = [net.emb.embedding_table.asnumpy() for net in ranks]
    table = np.concatenate(tables) if slice_mode == ROW else tables[0]
    assert_close_relative(table, ref_table)
    for net in ranks:
        assert_close_relative(net.head.weight.asnumpy(), ref_weight)
    if slice_mode == ROW:
        assert [t.shape[0] for t in tables] == [row_slice((V, D), r, size).rows
                                                for r in range(size)]


@pytest.mark.parametrize("size", [2, 4])
def test_sgd_on_the_table_is_bit_equal(size):
    """Batches of powers of two: the mean's division is exact, and an owner receives every
    rank's rows in the order one process sees them, so the sums are the same to the bit."""
    batches = data(size, per_rank=8 // size)
    _, reference = train(batches, OPTIMIZERS["sgd"], head=False)
    ranks = run_ranks(size, lambda comm: train(batches, OPTIMIZERS["sgd"], comm, ROW,
                                               head=False)[1], timeout=30)
    np.testing.assert_array_equal(np.concatenate([n.emb.embedding_table.asnumpy() for n in ranks]),
                                  reference.emb.embedding_table.asnumpy())


# ---- bad ids: the same error everywhere, no hang -------------------------------------------
@pytest.mark.parametrize("bad", [V, -1, 10 ** 9])
def test_a_bad_id_on_one_rank_raises_the_same_error_on_every_rank(bad):
    def body(comm):
        emb = nn.EmbeddingLookup(V, D, slice_mode=ROW, group=comm)
        ids = np.array([[1, bad]]) if comm.rank == 1 else np.array([[0, 2]])
        try:
            emb(ms.Tensor(ids))
        except IndexError as err:
            return str(err)
        return "no error"

    messages = run_ranks(3, body, timeout=10)
    assert len(set(messages)) == 1, messages
    assert messages[0].startswith(f"lookup: id {bad} in the batch of rank 1 is out of range")
    assert f"[0, {V})" in messages[0]


def test_one_process_bad_ids_keep_their_error():
    for mode in (ROW, BATCH):
        emb = nn.EmbeddingLookup(V, D, slice_mode=mode)
        with pytest.raises(IndexError, match=f"id {V} is out of range for a vocabulary of {V}"):
            emb(ms.Tensor([[1, V]]))


def test_float_ids_are_a_type_error():
    emb = nn.EmbeddingLookup(V, D, slice_mode=ROW)
    with pytest.raises(TypeError, match="ids must be integer"):
        emb(ms.Tensor([[1.0]]))


# ---- one process, layout, other modes ------------------------------------------------------
@pytest.mark.parametrize("group", [None, LocalCommunicator.create(1)[0]])
def test_one_process_row_slice_is_batch_slice(group):
    table = full_table()
    row = nn.EmbeddingLookup(V, D, param_init=ms.Tensor(table), slice_mode=ROW, group=group)
    assert row.embedding_table.shape == (V, D)
    assert getattr(row.embedding_table, "row_slice", None) is None
    assert type(row.lookup) is ops.EmbeddingLookup
    out = row(ms.Tensor([[4, 4, 0]]))
    out.sum().backward()
    np.testing.assert_array_equal(out.asnumpy(), table[np.array([[4, 4, 0]])])
    assert row.embedding_table.grad.indices.asnumpy().tolist() == [4, 4, 0]


@pytest.mark.parametrize("vocab, size, rows", [(10, 4, [3, 3, 3, 1]), (5, 4, [2, 2, 1, 0]),
                                               (8, 4, [2, 2, 2, 2]), (3, 2, [2, 1])])
def test_uneven_vocabularies_use_ceil_blocks(vocab, size, rows):
    table = full_table(vocab)
    ids = np.arange(vocab).reshape(1, -1)

    def body(comm):
        emb = nn.EmbeddingLookup(vocab, D, param_init=ms.Tensor(table), slice_mode=ROW, group=comm)
        out = emb(ms.Tensor(ids))
        out.sum().backward()
        return emb.embedding_table, out.asnumpy()

    results = run_ranks(size, body, timeout=20)
    assert [p.shape[0] for p, _ in results] == rows
    assert [p.row_slice.offset for p, _ in results] == list(np.cumsum([0] + rows[:-1]))
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p, _ in results]), table)
    for param, out in results:
        np.testing.assert_array_equal(out, table[ids])
        indices = sorted(param.grad.indices.asnumpy().tolist())
        assert indices == sorted(list(range(param.shape[0])) * size)   # every rank's lookups


def test_each_rank_holds_a_quarter_of_the_table_and_its_optimizer_state():
    vocab, dim = 64, 8

    def body(comm):
        emb = nn.EmbeddingLookup(vocab, dim, slice_mode=ROW, group=comm)
        opt = nn.FTRL([emb.embedding_table])
        return emb.embedding_table.nbytes, opt.moments[0].nbytes, opt.linear[0].nbytes

    full = vocab * dim * 4
    assert run_ranks(4, body) == [(full // 4,) * 3] * 4


def test_slices_start_from_the_seeded_full_table():
    ms.set_seed(7)
    whole = nn.EmbeddingLookup(V, D).embedding_table.asnumpy()
    parts = []
    for comm in LocalCommunicator.create(2):   # building a layer sends nothing
        ms.set_seed(7)
        parts.append(nn.EmbeddingLookup(V, D, slice_mode=ROW, group=comm).embedding_table.asnumpy())
    np.testing.assert_array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("mode, extra", [("field_slice", {"manual_shapes": (5, 6)}),
                                         ("table_column_slice", {})])
def test_field_and_column_slicing_in_data_parallel_keep_the_whole_table(mode, extra):
    """As MindSpore's layer does outside semi/auto parallel (where these modes are operator
    strategies: test_embedding_slice_modes.py); a one-time note says so."""
    nn.EmbeddingLookup(V, D, slice_mode=mode, **extra)        # one process: the whole table

    def body(comm):
        return nn.EmbeddingLookup(V, D, slice_mode=mode, group=comm, **extra).embedding_table.shape

    assert run_ranks(2, body, timeout=10) == [(V, D), (V, D)]


# ---- the gradient reducer ------------------------------------------------------------------
def test_reducer_only_scales_a_row_sliced_gradient():
    def body(comm):
        emb = nn.EmbeddingLookup(V, D, slice_mode=ROW, group=comm)
        dense = ms.Parameter(ms.Tensor(np.full(2, comm.rank, np.float32)), name="dense")
        reducer = DistributedGradReducer([emb.embedding_table, dense], mean=True, communicator=comm)
        reducer.broadcast_parameters()                     # the slices keep their own rows
        g = RowTensor(ms.Tensor(np.array([0, 1])), ms.Tensor(np.ones((2, D), np.float32)),
                      emb.embedding_table.shape)
        comm.reset_stats()
        table_grad, dense_grad = reducer((g, ms.Tensor(np.ones(2, np.float32))))
        return (table_grad.indices.asnumpy().tolist(), table_grad.values.asnumpy()[0, 0],
                dense_grad.asnumpy().tolist(), comm.comm_stats()["by_op"], dense.asnumpy())

    for indices, value, dense, by_op, dense_param in run_ranks(4, body):
        assert indices == [0, 1] and value == 0.25 and dense == [1.0, 1.0]
        assert "allgatherv" not in by_op and by_op["allreduce"]["calls"] == 1
        np.testing.assert_array_equal(dense_param, [0.0, 0.0])   # broadcast from rank 0


# ---- checkpoints ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", [2, 4])
def test_merged_rank_checkpoints_load_into_one_process(tmp_path, size):
    batches = data(size, per_rank=3)
    reference_step, _ = train(batches, OPTIMIZERS["ftrl"])

    def body(comm):
        step, _ = train(batches, OPTIMIZERS["ftrl"], comm, ROW)
        ms.save_checkpoint(step, str(tmp_path / f"rank{comm.rank}.ckpt"))
        return row_sliced_names(step)

    names = run_ranks(size, body, timeout=30)[0]
    assert names == ["emb.embedding_table", "moments.emb.embedding_table",
                     "linear.emb.embedding_table"]       # the table and FTRL's state for it
    files = [str(tmp_path / f"rank{r}.ckpt") for r in range(size)]
    merged = merge_row_sliced_checkpoints(files, str(tmp_path / "full.ckpt"), names)
    fresh_step, _ = train([], OPTIMIZERS["ftrl"])
    not_loaded, _ = ms.load_param_into_net(fresh_step, ms.load_checkpoint(tmp_path / "full.ckpt"))
    assert not_loaded == []
    for want, got in zip(reference_step.get_parameters(), fresh_step.get_parameters()):
        assert_close_relative(got.asnumpy().astype(np.float64), want.asnumpy().astype(np.float64))
    assert merged[names[0]].shape[0] == V
    with pytest.raises(ValueError, match="in rank order"):   # 11 rows: [6, 5] or [3, 3, 3, 2]
        merge_row_sliced_checkpoints(files[::-1], str(tmp_path / "bad.ckpt"), names)
    with pytest.raises(ValueError, match="is not row-sliced but differs"):
        merge_row_sliced_checkpoints(files, str(tmp_path / "bad.ckpt"), [])


def test_row_slice_lookup_rejects_a_table_of_the_wrong_size():
    part = row_slice((V, D), 0, 2)
    comm = LocalCommunicator.create(1)[0]
    with pytest.raises(ValueError, match=r"holds rows \[0, 6\) of the table, but the table given"):
        RowSliceLookup(part, comm)(ms.Tensor(np.zeros((5, D), np.float32)), ms.Tensor([[0]]))


# ---- real MPI ranks ------------------------------------------------------------------------
def mpi_job(test):
    return pytest.mark.mpi(needs_mpi(test))


CHECK = os.path.join(SCRIPTS, "embedding_slice_check.py")


@mpi_job
@pytest.mark.parametrize("world", [2, 4])
def test_mpi_row_sliced_training_equals_one_process(world, tmp_path):
    done, _ = launch(world, CHECK, "train", "--ckpt-dir", str(tmp_path), launcher_timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    match = re.search(rf"EMB_SLICE_CHECK OK world={world} max_rel=(\S+)", done.stdout)
    assert match and float(match.group(1)) <= 1e-6, out
    match = re.search(r"EMB_SLICE_CKPT OK names=(\S+) max_rel=(\S+)", done.stdout)
    assert match and float(match.group(2)) <= 1e-6, out
    assert match.group(1).split(",") == ["emb.embedding_table", "moments.emb.embedding_table",
                                         "linear.emb.embedding_table"]
    # 11 rows in blocks of ceil(11 / world): each rank holds its block only
    block = -(-11 // world)
    held = {int(r): (int(a), int(b), int(n)) for r, a, b, n in
            re.findall(r"rank (\d+): table rows (\d+)-(\d+) of 11, bytes (\d+)", done.stdout)}
    assert sorted(held) == list(range(world)), out
    for r, (start, stop, nbytes) in held.items():
        assert (start, stop) == (r * block, min((r + 1) * block, 11))
        assert nbytes == (stop - start) * 4 * 4


@mpi_job
def test_mpi_a_bad_id_on_one_rank_stops_every_rank():
    done, seconds = launch(4, CHECK, "bad_ids", launcher_timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode not in (0, 124), out          # 124: the launcher's timeout
    lines = [line for line in done.stdout.splitlines() if " ERROR " in line]
    assert sorted(int(line.split()[1]) for line in lines) == [0, 1, 2, 3], out
    assert len({line.split(" ", 2)[2] for line in lines}) == 1, out
    assert "id 14 in the batch of rank 1 is out of range" in lines[0] and "[0, 11)" in lines[0]
    assert seconds < 50


def test_dist_opt_refuses_a_row_sliced_table():
    """DistOpt averages whole parameters: a row-sliced table would mix ranks' different rows
    (regression: it used to try, and either failed on shapes or averaged wrong rows)."""
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.parallel import DistOpt

    def rank(comm):
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        with pytest.raises(ValueError, match="slice of a table split across ranks"):
            DistOpt(nn.SGD(emb.trainable_params(), 0.1), communicator=comm)
        return True

    assert run_ranks(2, rank) == [True, True]
