"""Distributed checkpoints across strategies (issue 26 item 4): slices saved on 8 ranks under
one strategy resume on 4 ranks under another and in one process, bit for bit; strategies
that disagree on shapes are refused before anything is written. Ranks run as threads."""
import json
import os

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.checkpoint_transform import (build_searched_strategy,
                                                          rank_list_for_transform,
                                                          transform_checkpoint_by_rank,
                                                          transform_checkpoints)
from minitorch_dist.parallel.context import auto_parallel_scope
from minitorch_dist.parallel.distributed_load import (load_distributed_checkpoint,
                                                      merge_sliced_parameter)
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell

RNG = np.random.default_rng(11)
W1 = RNG.standard_normal((16, 8)).astype(np.float32)
W1[0, 0] = -0.0                       # a sum of blocks would turn it into +0.0
W2 = RNG.standard_normal((8, 8)).astype(np.float32)
X = RNG.random((2, 16), np.float32)
EIGHT = (((2, 1), (1, 4)), ((1, 2), (2, 4)))     # w1 by columns, w2 by rows and columns
FOUR = (((1, 4), (4, 1)), ((2, 2), (2, 1)))      # w1 by rows, w2 by rows


class Net(nn.Cell):
    def __init__(self, strategies=None, w1=W1):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(w1.copy()), "w1")
        self.w2 = ms.Parameter(ms.Tensor(W2.copy()), "w2")
        self.mm1, self.mm2 = ops.MatMul(), ops.MatMul()
        if strategies:
            self.mm1.shard(strategies[0])
            self.mm2.shard(strategies[1])

    def construct(self, x):
        return self.mm2(self.mm1(x, self.w1), self.w2)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def _run(tmp_path, ranks, strategies, tag, save=True, w1=W1):
    """Every rank plans ``strategies`` (writing ``<tag>_strategy.json``) and, with ``save``,
    saves its slices to ``<tag>/rank_<r>/checkpoint-1_1.ckpt``."""
    def rank(comm):
        net = Net(strategies, w1)
        with auto_parallel_scope(strategy_ckpt_save_file=str(tmp_path / f"{tag}_strategy.json")):
            ShardedCell(net, group=comm)(ms.Tensor(X))
        if save:
            path = tmp_path / tag / f"rank_{comm.rank}" / "checkpoint-1_1.ckpt"
            os.makedirs(path.parent, exist_ok=True)
            ms.save_checkpoint(net, str(path), integrated_save=False)
        return net.w1.sharding_layout, net.w2.sharding_layout
    return run_ranks(ranks, rank, timeout=60)[0]


def test_eight_ranks_to_four_to_one_is_exact(tmp_path):
    _run(tmp_path, 8, EIGHT, "src")
    layouts = _run(tmp_path, 4, FOUR, "dst", save=False)
    src, dst = str(tmp_path / "src_strategy.json"), str(tmp_path / "dst_strategy.json")
    assert build_searched_strategy(dst)["w1"] == layouts[0]
    # w1 by rows on 4 ranks: rank 1's rows 4..7 cut across the 4 column blocks of the 8-rank run
    assert rank_list_for_transform(1, src, dst) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert rank_list_for_transform(0, src, None) == list(range(8))
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "four"), "checkpoint_", src, dst)

    def resume(comm):
        net = Net(FOUR)
        ShardedCell(net, group=comm)(ms.Tensor(X))
        ms.load_checkpoint(str(tmp_path / "four" / f"rank_{comm.rank}" /
                                f"checkpoint_{comm.rank}.ckpt"), net)
        for param, whole in ((net.w1, W1), (net.w2, W2)):
            want = whole[param.sharding_layout.slice_for(comm.rank)]
            assert np.array_equal(_bits(param.asnumpy()), _bits(want)), param.name
        with pytest.raises(ValueError, match="block of rank"):     # another rank's file
            ms.load_checkpoint(str(tmp_path / "four" / f"rank_{(comm.rank + 1) % 4}" /
                                    f"checkpoint_{(comm.rank + 1) % 4}.ckpt"), net)
        return True

    assert run_ranks(4, resume, timeout=60) == [True] * 4
    ms.reset_auto_parallel_context()
    files = [str(tmp_path / "four" / f"rank_{r}" / f"checkpoint_{r}.ckpt") for r in range(4)]
    one = Net(None, np.zeros_like(W1))
    load_distributed_checkpoint(one, files, None, dst)
    assert np.array_equal(_bits(one.w1.asnumpy()), _bits(W1))
    assert np.array_equal(_bits(one.w2.asnumpy()), _bits(W2))
    transform_checkpoint_by_rank(0, dict(enumerate(files)), str(tmp_path / "whole.ckpt"), dst)
    whole = ms.load_checkpoint(str(tmp_path / "whole.ckpt"))
    assert np.array_equal(_bits(whole["w1"].asnumpy()), _bits(W1))


def test_merge_sliced_parameter_puts_the_blocks_in_place(tmp_path):
    _run(tmp_path, 4, FOUR, "dst")
    strategy = build_searched_strategy(str(tmp_path / "dst_strategy.json"))
    slices = [ms.load_checkpoint(str(tmp_path / "dst" / f"rank_{r}" / "checkpoint-1_1.ckpt"))["w2"]
              for r in range(4)]
    merged = merge_sliced_parameter(slices, strategy)
    assert merged.name == "w2" and np.array_equal(_bits(merged.asnumpy()), _bits(W2))
    rows = merge_sliced_parameter([ms.Parameter(ms.Tensor(W2[:4]), "w2"),
                                   ms.Parameter(ms.Tensor(W2[4:]), "w2")])
    np.testing.assert_array_equal(rows.asnumpy(), W2)
    with pytest.raises(ValueError, match="laid out over 4 ranks, but 2 slices"):
        merge_sliced_parameter(slices[:2], strategy)


def test_strategies_whose_shapes_disagree_are_refused_before_writing(tmp_path):
    _run(tmp_path, 8, EIGHT, "src")
    src = str(tmp_path / "src_strategy.json")
    # the strategy file of another network: w1 is (16, 12) there
    spec = json.load(open(src))
    spec["w1"]["shape"] = [16, 12]
    spec["w1"]["device_matrix"] = [2, 4]
    json.dump(spec, open(tmp_path / "bad.json", "w"))
    out = tmp_path / "never"
    with pytest.raises(ValueError, match=r"disagree on the shapes of w1: \(16, 8\) in the "
                                         r"source, \(16, 12\) in the destination"):
        transform_checkpoints(str(tmp_path / "src"), str(out), "c", src, str(tmp_path / "bad.json"))
    assert not out.exists()
    with pytest.raises(ValueError, match="disagree on the shapes"):
        rank_list_for_transform(0, src, str(tmp_path / "bad.json"))


def test_bad_arguments_are_named(tmp_path):
    _run(tmp_path, 4, FOUR, "dst")
    src = str(tmp_path / "dst_strategy.json")
    files = {r: str(tmp_path / "dst" / f"rank_{r}" / "checkpoint-1_1.ckpt") for r in range(4)}
    with pytest.raises(ValueError, match="must end with '.ckpt'"):
        transform_checkpoint_by_rank(0, files, str(tmp_path / "x.bin"), src)
    with pytest.raises(ValueError, match=r"files of ranks \[2, 3\] are needed"):
        transform_checkpoint_by_rank(0, {0: files[0], 1: files[1]}, str(tmp_path / "x.ckpt"), src)
    with pytest.raises(ValueError, match="holds rank 0's block of 'w1', but it was given as the file of rank 1"):
        transform_checkpoint_by_rank(0, {0: files[0], 1: files[0], 2: files[2], 3: files[3]},
                                     str(tmp_path / "x.ckpt"), src)
    partial = ms.load_checkpoint(files[1])
    del partial["w2"]
    ms.save_checkpoint(partial, str(tmp_path / "partial.ckpt"))
    with pytest.raises(ValueError, match="'w2' is in .* but not in .*partial.ckpt"):
        transform_checkpoint_by_rank(0, {**files, 1: str(tmp_path / "partial.ckpt")},
                                     str(tmp_path / "x.ckpt"), src)
    with pytest.raises(ValueError, match="rank_id 4 is outside"):
        rank_list_for_transform(4, None, src)
    with pytest.raises(ValueError, match="does not exist"):
        rank_list_for_transform(0, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="dec_key"):
        load_distributed_checkpoint(Net(None), list(files.values()), dec_key=b"k")


def test_slices_without_their_strategy_file_are_refused(tmp_path):
    """Read as whole values, rank 0's blocks would have landed on every rank."""
    _run(tmp_path, 4, FOUR, "dst")
    files = [str(tmp_path / "dst" / f"rank_{r}" / "checkpoint-1_1.ckpt") for r in range(4)]
    with pytest.raises(ValueError, match=r"holds slices of \['w1', 'w2'\], which the source "
                                         r"strategy does not lay out \(no source strategy"):
        load_distributed_checkpoint(Net(None), files)
    with pytest.raises(ValueError, match="holds slices of"):
        transform_checkpoint_by_rank(0, dict(enumerate(files)), str(tmp_path / "x.ckpt"))
    assert not (tmp_path / "x.ckpt").exists()


def test_the_training_strategy_defaults_to_strategy_ckpt_configs_load_file(tmp_path):
    """model_saving_loading's test_loading.py names the strategy only in
    ``strategy_ckpt_config={"load_file": ...}``; the older key alone was read, so its
    slices were refused as having no strategy."""
    _run(tmp_path, 4, FOUR, "dst")
    files = [str(tmp_path / "dst" / f"rank_{r}" / "checkpoint-1_1.ckpt") for r in range(4)]
    ms.set_auto_parallel_context(
        strategy_ckpt_config={"load_file": str(tmp_path / "dst_strategy.json")})
    one = Net(None, np.zeros_like(W1))
    load_distributed_checkpoint(one, files)
    assert np.array_equal(_bits(one.w1.asnumpy()), _bits(W1))
    assert np.array_equal(_bits(one.w2.asnumpy()), _bits(W2))
