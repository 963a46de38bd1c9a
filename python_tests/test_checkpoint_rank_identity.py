"""Per-rank checkpoints know their rank (issue 28 item 2, issue 26 item 4): a slice file
records the saving rank, world size, parallel mode and each slice's layout, and loading it
where it does not fit is refused with an error naming both sides. Whole values load
anywhere, as before. Ranks run as threads (``run_ranks``)."""
import json

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell
from minitorch_dist.train.checkpoint_identity import IDENTITY

RNG = np.random.default_rng(7)
W = RNG.standard_normal((8, 6)).astype(np.float32)
X = RNG.random((4, 8), np.float32)


class Net(nn.Cell):
    def __init__(self, strategy):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(W.copy()), "w")
        self.matmul = ops.MatMul().shard(strategy) if strategy else ops.MatMul()

    def construct(self, x):
        return self.matmul(x, self.w)


def _sharded(comm, strategy):
    net = Net(strategy)
    cell = ShardedCell(net, group=comm)
    cell(ms.Tensor(X))                      # the first call slices w
    return net


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def _save_slices(tmp_path, ranks, strategy, tag):
    def rank(comm):
        net = _sharded(comm, strategy)
        path = str(tmp_path / f"{tag}{comm.rank}.ckpt")
        ms.save_checkpoint(net, path, integrated_save=False)
        return net.w.sharding_rank, net.w.asnumpy()
    return run_ranks(ranks, rank, timeout=30)


def test_a_slice_file_records_its_identity(tmp_path):
    _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")
    saved = ms.load_checkpoint(str(tmp_path / "r1.ckpt"))
    identity = json.loads(saved[IDENTITY])
    assert identity["parallel_mode"] == "semi_auto_parallel"
    assert identity["layouts"]["w"]["rank"] == 1
    assert identity["layouts"]["w"]["shape"] == [8, 6]
    assert saved["w"].checkpoint_origin["slice"]["rank"] == 1


def test_another_ranks_slice_file_is_refused_naming_both(tmp_path):
    """Rank 1's file on rank 0 used to give rank 0 rank 1's block, silently."""
    blocks = _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")

    def rank(comm):
        net = _sharded(comm, ((2, 2), (2, 1)))
        ms.load_checkpoint(str(tmp_path / f"r{comm.rank}.ckpt"), net)   # its own: fine
        own = net.w.asnumpy()
        other = (comm.rank + 1) % comm.size
        try:
            ms.load_checkpoint(str(tmp_path / f"r{other}.ckpt"), net)
        except ValueError as err:
            return own, str(err)
        return own, None

    for r, (own, message) in enumerate(run_ranks(4, rank, timeout=30)):
        np.testing.assert_array_equal(own, blocks[r][1])
        assert message is not None, f"rank {r} loaded another rank's slices"
        assert f"is the block of rank {(r + 1) % 4} under device matrix" in message
        assert f"holds the block of rank {r} under device matrix" in message


def test_slices_of_4_ranks_are_refused_on_2(tmp_path):
    """Both layouts cut w in two row blocks of the same shape: the 4-rank files used to load
    on 2 ranks and give rank 1 the wrong block."""
    _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "four")

    def rank(comm):
        net = _sharded(comm, ((1, 2), (2, 1)))
        assert net.w.shape == (4, 6)
        with pytest.raises(ValueError, match=r"device matrix \(2, 2, 1\).*device matrix \(1, 2, 1\)"):
            ms.load_checkpoint(str(tmp_path / f"four{comm.rank}.ckpt"), net)
        return True

    assert run_ranks(2, rank, timeout=30) == [True, True]


def test_a_slice_file_is_refused_in_one_process(tmp_path):
    _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")
    ms.reset_auto_parallel_context()
    with pytest.raises(ValueError, match=r"is the block of rank 0 .* holds the whole value"):
        ms.load_checkpoint(str(tmp_path / "r0.ckpt"), Net(None))


def test_an_old_slice_file_with_layouts_is_still_checked(tmp_path):
    """Files saved before the identity entry carry ``sharding_layout.<name>``: loadable on
    their own rank, refused on another."""
    _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")
    for r in range(4):
        entries = ms.load_checkpoint(str(tmp_path / f"r{r}.ckpt"))
        del entries[IDENTITY]
        ms.save_checkpoint(entries, str(tmp_path / f"old{r}.ckpt"))

    def rank(comm):
        net = _sharded(comm, ((2, 2), (2, 1)))
        ms.load_checkpoint(str(tmp_path / f"old{comm.rank}.ckpt"), net)
        with pytest.raises(ValueError, match="is the block of rank"):
            ms.load_checkpoint(str(tmp_path / f"old{(comm.rank + 2) % 4}.ckpt"), net)
        return True

    assert run_ranks(4, rank, timeout=30) == [True] * 4


def test_a_slice_shaped_value_from_a_file_without_records_is_refused(tmp_path):
    blocks = _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")
    ms.save_checkpoint({"w": ms.Tensor(blocks[1][1])}, str(tmp_path / "bare.ckpt"))

    def rank(comm):
        net = _sharded(comm, ((2, 2), (2, 1)))
        with pytest.raises(ValueError, match="does not record whose slice it is.*re-save"):
            ms.load_checkpoint(str(tmp_path / "bare.ckpt"), net)
        # a value the caller made is still taken at its word (its shape)
        ms.load_param_into_net(net, {"w": ms.Tensor(blocks[comm.rank][1])})
        return True

    assert run_ranks(4, rank, timeout=30) == [True] * 4


def test_whole_checkpoints_load_on_any_rank_and_in_one_process(tmp_path):
    def rank(comm):
        net = _sharded(comm, ((2, 2), (2, 1)))
        ms.save_checkpoint(net, str(tmp_path / f"whole{comm.rank}.ckpt"))
        other = _sharded(comm, ((2, 2), (2, 1)))
        ms.load_checkpoint(str(tmp_path / "whole0.ckpt"), other)
        return np.array_equal(other.w.asnumpy(), net.w.asnumpy())

    assert run_ranks(4, rank, timeout=30) == [True] * 4
    assert IDENTITY not in ms.load_checkpoint(str(tmp_path / "whole0.ckpt"))
    ms.reset_auto_parallel_context()
    plain = Net(None)
    ms.load_checkpoint(str(tmp_path / "whole3.ckpt"), plain)
    np.testing.assert_array_equal(plain.w.asnumpy(), W)


def test_a_merged_checkpoint_holds_no_identity(tmp_path):
    from minitorch_dist.parallel.sharding.checkpoint import merge_sharded_checkpoints
    _save_slices(tmp_path, 4, ((2, 2), (2, 1)), "r")
    merge_sharded_checkpoints([str(tmp_path / f"r{r}.ckpt") for r in range(4)],
                              str(tmp_path / "full.ckpt"))
    merged = ms.load_checkpoint(str(tmp_path / "full.ckpt"))
    assert IDENTITY not in merged
    ms.reset_auto_parallel_context()
    plain = Net(None)
    ms.load_param_into_net(plain, merged)
    np.testing.assert_array_equal(plain.w.asnumpy(), W)


def test_another_ranks_embedding_rows_are_refused(tmp_path):
    """A row-sliced table: rank 1's rows on rank 0 have the same shape (10 rows, 2 ranks)."""
    ms.reset_auto_parallel_context()

    def rank(comm):
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        path = str(tmp_path / f"emb{comm.rank}.ckpt")
        ms.save_checkpoint(emb, path)
        return emb.embedding_table.asnumpy()

    tables = run_ranks(2, rank, timeout=30)

    def load(comm):
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        ms.load_checkpoint(str(tmp_path / f"emb{comm.rank}.ckpt"), emb)
        assert np.array_equal(emb.embedding_table.asnumpy(), tables[comm.rank])
        with pytest.raises(ValueError, match=r"is rows \d\.\.\d of a 10-row table \(rank "
                                             rf"{1 - comm.rank} of 2\)"):
            ms.load_checkpoint(str(tmp_path / f"emb{1 - comm.rank}.ckpt"), emb)
        return True

    assert run_ranks(2, load, timeout=30) == [True, True]
    from minitorch_dist.parallel.embedding.checkpoint import merge_row_sliced_checkpoints
    files = [str(tmp_path / f"emb{r}.ckpt") for r in range(2)]
    with pytest.raises(ValueError, match="holds the rows of rank 1 of 2, but it is file 0"):
        merge_row_sliced_checkpoints(files[::-1], str(tmp_path / "x.ckpt"),
                                     ["embedding_table"])
    merged = merge_row_sliced_checkpoints(files, str(tmp_path / "full.ckpt"),
                                          ["embedding_table"])
    whole = nn.EmbeddingLookup(10, 2)
    ms.load_checkpoint(str(tmp_path / "full.ckpt"), whole)
    np.testing.assert_array_equal(whole.embedding_table.asnumpy(), np.concatenate(tables))
    assert IDENTITY not in merged

    def resume(comm):          # the whole table loads on row-sliced ranks: each its rows
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        ms.load_checkpoint(str(tmp_path / "full.ckpt"), emb)
        return emb.embedding_table.asnumpy()

    for got, want in zip(run_ranks(2, resume, timeout=30), tables):
        np.testing.assert_array_equal(got, want)


def test_the_optimizer_state_of_a_row_sliced_table_knows_its_rows(tmp_path):
    """Adam's moments of a row-sliced table hold the table's rows: their slice files record
    them and another rank's are refused, like the table's own."""
    ms.reset_auto_parallel_context()

    def save(comm):
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        opt = nn.Adam(emb.trainable_params(), 0.1)
        ms.save_checkpoint(opt, str(tmp_path / f"opt{comm.rank}.ckpt"))
        return opt.moment1[0].row_slice is emb.embedding_table.row_slice

    assert run_ranks(2, save, timeout=30) == [True, True]
    record = json.loads(ms.load_checkpoint(str(tmp_path / "opt1.ckpt"))[IDENTITY])
    assert any(name.startswith("moment1") for name in json.dumps(record).split('"')), record

    def load_other(comm):
        emb = nn.EmbeddingLookup(10, 2, slice_mode="table_row_slice", group=comm)
        opt = nn.Adam(emb.trainable_params(), 0.1)
        with pytest.raises(ValueError, match="rows"):
            ms.load_checkpoint(str(tmp_path / f"opt{1 - comm.rank}.ckpt"), opt)
        return True

    assert run_ranks(2, load_other, timeout=30) == [True, True]


def test_thread_ranks_outside_their_world_record_their_own_rank(tmp_path, monkeypatch):
    """A rank run as a thread saving outside ``sharding_world`` took its identity from the
    process's communicator (rank 0 of 1 once an earlier test had initialised one): every
    file then claimed rank 0, and loading a rank's own file on rank 1 was refused. The
    identity now comes from the communicator that sliced the values."""
    from minitorch_dist import communication
    from minitorch_dist.communication import management

    class ProcessWorld:                       # what an earlier init() leaves behind
        rank, size = 0, 1

    monkeypatch.setattr(communication.GlobalComm, "INITED", True)
    monkeypatch.setattr(management, "_world", ProcessWorld)
    blocks = _save_slices(tmp_path, 2, ((1, 2), (2, 1)), "t")
    for r in range(2):
        identity = json.loads(ms.load_checkpoint(str(tmp_path / f"t{r}.ckpt"))[IDENTITY])
        assert (identity["rank"], identity["world_size"]) == (r, 2)

    def rank(comm):
        net = _sharded(comm, ((1, 2), (2, 1)))
        ms.load_checkpoint(str(tmp_path / f"t{comm.rank}.ckpt"), net)
        with pytest.raises(ValueError, match=f"rank {1 - comm.rank} of 2"):
            ms.load_checkpoint(str(tmp_path / f"t{1 - comm.rank}.ckpt"), net)
        return net.w.asnumpy()

    for r, own in enumerate(run_ranks(2, rank, timeout=30)):
        np.testing.assert_array_equal(own, blocks[r][1])
