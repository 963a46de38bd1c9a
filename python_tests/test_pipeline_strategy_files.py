"""Strategy files of pipelined jobs (issue 26): each rank writes its stage's file, the stages'
files merge into one (``merge_pipeline_strategys``), and the transforms read a parameter's
blocks from its own stage's ranks only. Slices of a 2-stage x 2-rank job (each stage's
MatMuls split over its two ranks) go to one process and to other layouts bit for bit.

The 4 ranks run as threads; each stage's network part is sliced over the stage's two ranks
(``ShardedCell`` on the stage group), as a pipelined job's stage is, and each rank writes its
slices and its stage file as the pipeline does. A real pipelined training job, launched on
4 MPI ranks, is at the end."""
import json
import os
import re
import sys
import textwrap

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import (build_searched_strategy, load_distributed_checkpoint,
                                     merge_pipeline_strategys, rank_list_for_transform,
                                     transform_checkpoint_by_rank, transform_checkpoints)
from minitorch_dist.parallel.context import auto_parallel_scope
from minitorch_dist.parallel.pipeline.topology import PipelineTopology
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell
from minitorch_dist.parallel.strategy_ckpt_pipeline import (check_stage_strategy_file,
                                                            read_placed_strategy,
                                                            write_stage_strategy_file)

from mpi_jobs import launch, needs_mpi

RNG = np.random.default_rng(5)
W1 = RNG.standard_normal((8, 8)).astype(np.float32)
W1[0, 0] = -0.0                       # a sum of blocks would turn it into +0.0
W2 = RNG.standard_normal((8, 4)).astype(np.float32)
W3 = RNG.standard_normal((4, 6)).astype(np.float32)
WHOLE = {"front.w1": W1, "front.w2": W2, "back.w3": W3}
X = RNG.random((4, 8), np.float32)


class Front(nn.Cell):
    """Stage 0: w1 split by columns, w2 by rows over the stage's ranks."""

    def __init__(self, sharded=True):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(W1.copy()), "w1")
        self.w2 = ms.Parameter(ms.Tensor(W2.copy()), "w2")
        self.mm1, self.mm2 = ops.MatMul(), ops.MatMul()
        if sharded:
            self.mm1.shard(((1, 1), (1, 2)))
            self.mm2.shard(((1, 2), (2, 1)))

    def construct(self, x):
        return self.mm2(self.mm1(x, self.w1), self.w2)


class Back(nn.Cell):
    """Stage 1: w3 split by rows."""

    def __init__(self, sharded=True):
        super().__init__()
        self.w3 = ms.Parameter(ms.Tensor(W3.copy()), "w3")
        self.mm = ops.MatMul()
        if sharded:
            self.mm.shard(((1, 2), (2, 1)))

    def construct(self, x):
        return self.mm(x, self.w3)


class Whole(nn.Cell):
    """The network; a pipelined job's stage runs ``front`` (stage 0) or ``back`` (stage 1)."""

    def __init__(self, strategies=None, sharded_parts=False):
        super().__init__()
        self.front, self.back = Front(sharded_parts), Back(sharded_parts)
        if strategies:
            self.front.mm1.shard(strategies[0])
            self.front.mm2.shard(strategies[1])
            self.back.mm.shard(strategies[2])

    def construct(self, x):
        return self.back(self.front(x))


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def _stage_job(tmp_path, world=4, stages=2, sharded=True, tag="src"):
    """Each rank of a ``stages``-stage job slices its stage's part over the stage's ranks,
    saves its slices to ``<tag>/rank_<r>/`` and writes its stage file to
    ``<tag>_strategys/strategy_<r>.ckpt`` (as ``strategy_ckpt_config`` in a pipelined run)."""
    def rank(comm):
        topology = PipelineTopology(comm.rank, world, stages)
        whole = Whole(sharded_parts=sharded)
        part = whole.front if topology.stage == 0 else whole.back
        group = comm.split(topology.data_parallel_ranks)
        with sharding_world(comm):
            if sharded:
                x = X if topology.stage == 0 else X[:, :4]
                ShardedCell(part, group=group)(ms.Tensor(x))
            path = tmp_path / tag / f"rank_{comm.rank}" / "checkpoint-1_1.ckpt"
            os.makedirs(path.parent, exist_ok=True)
            ms.save_checkpoint(part, str(path), integrated_save=False)
        write_stage_strategy_file(str(tmp_path / f"{tag}_strategys" / f"strategy_{comm.rank}.ckpt"),
                                  part, topology, lambda p: {topology.stage})
    run_ranks(world, rank, timeout=60)


def _merged(tmp_path, tag="src"):
    path = str(tmp_path / f"{tag}_merged.ckpt")
    merge_pipeline_strategys(str(tmp_path / f"{tag}_strategys"), path)
    return path


def test_each_stage_file_holds_its_stage_and_ranks(tmp_path):
    _stage_job(tmp_path)
    stage1 = json.loads((tmp_path / "src_strategys" / "strategy_3.ckpt").read_text())
    assert sorted(stage1) == ["back.w3"]
    w3 = stage1["back.w3"]
    assert w3["pipeline"] == {"stages": 2, "held_by": [[1, [2, 3]]], "merged": False}
    assert w3["device_matrix"] == [1, 2, 1] and w3["rank"] == 1
    merged = _merged(tmp_path)
    placed = read_placed_strategy(merged, "test")
    assert sorted(placed) == ["back.w3", "front.w1", "front.w2"]
    assert placed["back.w3"].groups == ((2, 3),) and placed["back.w3"].world == 4
    assert placed["front.w1"].holds(1) and not placed["front.w1"].holds(2)
    # MindSpore's build_searched_strategy: each layout over its stage's ranks
    assert build_searched_strategy(merged)["back.w3"].num_devices == 2


def test_merged_slices_go_to_one_process_bit_for_bit(tmp_path):
    _stage_job(tmp_path)
    merged = _merged(tmp_path)
    # one process needs every block: w1/w2 from ranks 0, 1 and w3 from ranks 2, 3
    assert rank_list_for_transform(0, merged, None) == [0, 1, 2, 3]
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "one"), "c_", merged, None)
    one = ms.load_checkpoint(str(tmp_path / "one" / "rank_0" / "c_0.ckpt"))
    for name, want in WHOLE.items():
        assert np.array_equal(_bits(one[name].asnumpy()), _bits(want)), name
    # the same from the files of the needed ranks, and loaded straight into a network
    files = {r: str(tmp_path / "src" / f"rank_{r}" / "checkpoint-1_1.ckpt") for r in range(4)}
    transform_checkpoint_by_rank(0, files, str(tmp_path / "by_rank.ckpt"), merged, None)
    by_rank = ms.load_checkpoint(str(tmp_path / "by_rank.ckpt"))
    assert all(np.array_equal(_bits(by_rank[n].asnumpy()), _bits(w)) for n, w in WHOLE.items())
    ms.set_auto_parallel_context(parallel_mode="stand_alone")
    net = Whole()
    for p in net.trainable_params():
        p.set_data(ms.Tensor(np.zeros(p.shape, np.float32)))
    load_distributed_checkpoint(net, [files[r] for r in range(4)], None, merged)
    for p in net.trainable_params():
        assert np.array_equal(_bits(p.asnumpy()), _bits(WHOLE[p.name])), p.name


def test_merged_slices_go_to_another_sharded_layout(tmp_path):
    _stage_job(tmp_path)
    merged = _merged(tmp_path)
    strategies = (((1, 2), (2, 1)), ((2, 1), (1, 1)), ((1, 1), (1, 2)))   # w1 rows, w3 columns
    dst = str(tmp_path / "dst_strategy.json")

    def plan(comm):
        net = Whole(strategies)
        with auto_parallel_scope(strategy_ckpt_save_file=dst):
            ShardedCell(net, group=comm)(ms.Tensor(X))
        return {p.name: p.sharding_layout for p in net.trainable_params()}
    layouts = run_ranks(2, plan, timeout=60)[0]
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "two"), "c_", merged, dst)
    for rank in range(2):
        got = ms.load_checkpoint(str(tmp_path / "two" / f"rank_{rank}" / f"c_{rank}.ckpt"))
        for name, want in WHOLE.items():
            block = want if layouts[name] is None else want[layouts[name].slice_for(rank)]
            assert np.array_equal(_bits(got[name].asnumpy()), _bits(block)), (rank, name)
        identity = json.loads(got["__rank_identity__"])
        assert identity["rank"] == rank and identity["world_size"] == 2


def test_slices_go_to_another_pipelined_layout(tmp_path):
    """4 ranks of 2 sharded stages -> 2 ranks of 2 unsliced stages: each destination rank
    gets its own stage's parameters only, whole."""
    _stage_job(tmp_path)
    _stage_job(tmp_path, world=2, sharded=False, tag="dst")
    src, dst = _merged(tmp_path), _merged(tmp_path, "dst")
    assert rank_list_for_transform(1, src, dst) == [0, 2, 3]    # rank 0: the unsliced entries
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "out"), "c_", src, dst)
    first = ms.load_checkpoint(str(tmp_path / "out" / "rank_0" / "c_0.ckpt"))
    second = ms.load_checkpoint(str(tmp_path / "out" / "rank_1" / "c_1.ckpt"))
    assert sorted(n for n in first if n in WHOLE) == ["front.w1", "front.w2"]
    assert sorted(n for n in second if n in WHOLE) == ["back.w3"]
    assert np.array_equal(_bits(first["front.w1"].asnumpy()), _bits(W1))
    assert np.array_equal(_bits(second["back.w3"].asnumpy()), _bits(W3))


def test_a_destination_that_slices_nothing_gets_a_file_per_rank_of_the_job(tmp_path, caplog):
    """``pipeline_transformation_retrain.py``'s case: the destination plans nothing sliced,
    so its strategy file lists nothing and cannot say its rank count; the transform, called
    in a 2-rank job, writes the whole checkpoint for both ranks and says so."""
    _stage_job(tmp_path)
    merged = _merged(tmp_path)
    (tmp_path / "empty.json").write_text("{}")

    def rank(comm):
        with sharding_world(comm):
            if comm.rank == 0:
                transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "out"), "c_", merged,
                                      str(tmp_path / "empty.json"))
    with caplog.at_level("WARNING", logger="minitorch_dist"):
        run_ranks(2, rank, timeout=60)
    assert "slices no parameter" in caplog.text and "2 ranks" in caplog.text
    for r in range(2):
        got = ms.load_checkpoint(str(tmp_path / "out" / f"rank_{r}" / f"c_{r}.ckpt"))
        assert all(np.array_equal(_bits(got[n].asnumpy()), _bits(w)) for n, w in WHOLE.items())
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "alone"), "c_", merged,
                          str(tmp_path / "empty.json"))          # one process: one file
    assert sorted(os.listdir(tmp_path / "alone")) == ["rank_0"]


class _Trio(nn.Cell):
    """``a`` on stage 0, ``b`` on stage 1, ``s`` shared by both (a tied embedding)."""

    STAGES = {"a": {0}, "s": {0, 1}, "b": {1}}

    def __init__(self):
        super().__init__()
        self.a = ms.Parameter(ms.Tensor(W1.copy()), "a")
        self.s = ms.Parameter(ms.Tensor(W2.copy()), "s")
        self.b = ms.Parameter(ms.Tensor(W3.copy()), "b")


def test_a_parameter_shared_by_stages_is_held_by_both(tmp_path):
    net = _Trio()
    for rank in range(2):
        topology = PipelineTopology(rank, 2, 2)
        write_stage_strategy_file(str(tmp_path / "strategys" / f"s{rank}.ckpt"), net, topology,
                                  lambda p: _Trio.STAGES[p.name])
        held = {n: v for n, v in {"a": W1, "s": W2, "b": W3}.items()
                if rank in _Trio.STAGES[n]}
        os.makedirs(tmp_path / "src" / f"rank_{rank}")
        ms.save_checkpoint({n: ms.Tensor(v) for n, v in held.items()},
                           str(tmp_path / "src" / f"rank_{rank}" / "c.ckpt"))
    merged = str(tmp_path / "merged.ckpt")
    merge_pipeline_strategys(str(tmp_path / "strategys"), merged)
    placed = read_placed_strategy(merged, "test")
    assert placed["s"].groups == ((0,), (1,)) and placed["a"].groups == ((0,),)
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "one"), "c_", merged, None)
    one = ms.load_checkpoint(str(tmp_path / "one" / "rank_0" / "c_0.ckpt"))
    assert {n: np.array_equal(one[n].asnumpy(), v) for n, v in
            {"a": W1, "s": W2, "b": W3}.items()} == {"a": True, "s": True, "b": True}
    # the two stages must lay the shared parameter out alike
    path = tmp_path / "strategys" / "s1.ckpt"
    spec = json.loads(path.read_text())
    spec["s"]["device_matrix"] = [1, 1]
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"'s' is laid out as .* by stage 1 .*s1\.ckpt.* by "
                                         r"stage 0 .*s0\.ckpt"):
        merge_pipeline_strategys(str(tmp_path / "strategys"), merged)


def _add_entries(tmp_path, rank, entries):
    """Add ``entries`` to rank ``rank``'s source file (as an optimizer would have saved)."""
    path = str(tmp_path / "src" / f"rank_{rank}" / "checkpoint-1_1.ckpt")
    ms.save_checkpoint({**ms.load_checkpoint(path), **entries}, path)


def test_a_state_is_read_from_its_stage_not_from_a_stale_copy(tmp_path):
    """Stage 0's files hold a zero copy of stage 1's optimizer state (an optimizer built on
    every parameter); the transform reads the state from stage 1's ranks."""
    _stage_job(tmp_path)
    placed = read_placed_strategy(_merged(tmp_path), "test")["back.w3"]
    for rank in (0, 1):
        _add_entries(tmp_path, rank, {"moment1.back.w3": ms.Tensor(np.zeros_like(W3))})
    for rank in (2, 3):
        block = np.ascontiguousarray((W3 * 2)[placed.slice_for(rank)])
        _add_entries(tmp_path, rank, {"moment1.back.w3": ms.Tensor(block)})
    transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "one"), "c_",
                          str(tmp_path / "src_merged.ckpt"), None)
    one = ms.load_checkpoint(str(tmp_path / "one" / "rank_0" / "c_0.ckpt"))
    assert np.array_equal(_bits(one["moment1.back.w3"].asnumpy()), _bits(W3 * 2))


def test_state_slices_the_strategy_does_not_describe_are_refused(tmp_path):
    """Optimizer parallel's flat state slices are not in the strategy file: copied whole they
    would put one rank's half everywhere, so they are refused, naming the entry."""
    _stage_job(tmp_path)
    merged = _merged(tmp_path)
    _add_entries(tmp_path, 0, {"moment1.front.w2": ms.Tensor(W2.reshape(-1)[:16].copy())})
    with pytest.raises(ValueError, match=r"rank_0.*moment1\.front\.w2 \(16,\).*neither its "
                                         r"full shape nor its block"):
        transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "one"), "c_", merged, None)


# ---- bad input ------------------------------------------------------------------------------
def test_a_stage_file_is_refused_by_the_transforms_naming_it(tmp_path):
    _stage_job(tmp_path)
    stage_file = str(tmp_path / "src_strategys" / "strategy_2.ckpt")
    with pytest.raises(ValueError, match=r"strategy_2\.ckpt.*stage 1 of a 2-stage.*"
                                         r"merge_pipeline_strategys"):
        transform_checkpoints(str(tmp_path / "src"), str(tmp_path / "x"), "c_", stage_file, None)
    with pytest.raises(ValueError, match=r"strategy_2\.ckpt.*merge_pipeline_strategys"):
        rank_list_for_transform(0, stage_file, None)
    assert not (tmp_path / "x").exists()


def test_a_merge_missing_a_stage_names_it(tmp_path):
    _stage_job(tmp_path)
    for r in (2, 3):
        os.remove(tmp_path / "src_strategys" / f"strategy_{r}.ckpt")
    with pytest.raises(ValueError, match=r"stage\(s\) \[1\] of the 2-stage job.*strategy_0\.ckpt"):
        merge_pipeline_strategys(str(tmp_path / "src_strategys"), str(tmp_path / "m.ckpt"))
    assert not (tmp_path / "m.ckpt").exists()


def test_a_stage_file_of_another_job_is_refused_naming_both(tmp_path):
    _stage_job(tmp_path)
    other = tmp_path / "other"
    run_ranks(1, lambda comm: write_stage_strategy_file(
        str(other / "strategy_0.ckpt"), Whole().front, PipelineTopology(0, 3, 3), lambda p: {0}))
    os.replace(other / "strategy_0.ckpt", tmp_path / "src_strategys" / "strategy_9.ckpt")
    with pytest.raises(ValueError, match=r"strategy_9\.ckpt.*3-stage job.*strategy_0\.ckpt.*"
                                         r"2-stage"):
        merge_pipeline_strategys(str(tmp_path / "src_strategys"), str(tmp_path / "m.ckpt"))


def test_stage_files_that_disagree_are_refused(tmp_path):
    _stage_job(tmp_path)
    path = tmp_path / "src_strategys" / "strategy_1.ckpt"
    spec = json.loads(path.read_text())
    spec["front.w1"]["tensor_map"] = [0, -1]                    # rows instead of columns
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"strategy_1\.ckpt.*strategy_0\.ckpt.*both stage 0"):
        merge_pipeline_strategys(str(tmp_path / "src_strategys"), str(tmp_path / "m.ckpt"))
    with pytest.raises(NotADirectoryError, match="src_strategy_dirs"):
        merge_pipeline_strategys(str(tmp_path / "nowhere"), str(tmp_path / "m.ckpt"))


def test_a_plain_strategy_file_is_not_a_stage_file(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "s.ckpt").write_text(json.dumps(
        {"front.w1": {"device_matrix": [2, 1], "tensor_map": [1, 0], "shape": [8, 8]}}))
    with pytest.raises(ValueError, match=r"s\.ckpt.*not the strategy file of a pipeline stage"):
        merge_pipeline_strategys(str(folder), str(tmp_path / "m.ckpt"))


def test_a_stage_plan_is_checked_against_a_load_file(tmp_path):
    """``load_file`` in a pipelined run: the stage's plan is checked against a stage file or
    the merged file; another layout, another stage count or a plain file is refused."""
    _stage_job(tmp_path)
    merged = _merged(tmp_path)

    def rank(comm, path):
        topology = PipelineTopology(comm.rank, 4, 2)
        whole = Whole(sharded_parts=True)
        part = whole.front if topology.stage == 0 else whole.back
        with sharding_world(comm):
            group = comm.split(topology.data_parallel_ranks)
            ShardedCell(part, group=group)(ms.Tensor(X if topology.stage == 0 else X[:, :4]))
        check_stage_strategy_file(path, part, topology, lambda p: {topology.stage})
    run_ranks(4, lambda comm: rank(comm, merged), timeout=60)
    with pytest.raises(ValueError, match=r"strategy_3\.ckpt.*none of which stage 0 holds"):
        run_ranks(4, lambda comm: rank(comm, str(tmp_path / "src_strategys" / "strategy_3.ckpt")),
                  timeout=60)
    plain = tmp_path / "plain.ckpt"
    plain.write_text(json.dumps({"back.w3": {"device_matrix": [4], "tensor_map": [-1, -1],
                                             "shape": [4, 6]}}))
    with pytest.raises(ValueError, match=r"plain\.ckpt.*job without pipeline stages"):
        run_ranks(4, lambda comm: rank(comm, str(plain)), timeout=60)
    spec = json.loads((tmp_path / "src_merged.ckpt").read_text())
    spec["back.w3"]["tensor_map"] = [-1, -1]
    (tmp_path / "changed.ckpt").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"stage 1 lays out \['back.w3'\] differently from "
                                         r".*changed\.ckpt"):
        run_ranks(4, lambda comm: rank(comm, str(tmp_path / "changed.ckpt")), timeout=60)


# ---- a real pipelined job -------------------------------------------------------------------
_JOB = textwrap.dedent("""
    import sys
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import communication, nn, ops

    out = sys.argv[1]
    communication.init()
    rank = communication.get_rank()
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((8, 8)).astype(np.float32) * 0.3
    W2 = rng.standard_normal((8, 4)).astype(np.float32) * 0.3
    x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    y = rng.standard_normal((2, 8, 4)).astype(np.float32)

    class Part(nn.Cell):
        def __init__(self, w, name, strategy):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(w.copy()), name)
            self.mm = ops.MatMul().shard(strategy)

        def construct(self, a):
            return self.mm(a, self.w)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.front = Part(W1, "w1", ((1, 1), (1, 2)))
            self.back = Part(W2, "w2", ((1, 2), (2, 1)))
            self.front.pipeline_stage, self.back.pipeline_stage = 0, 1

        def construct(self, a):
            return self.back(self.front(a))

    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=2,
                                 gradients_mean=True, strategy_ckpt_config={
                                     "save_file": f"{out}/strategys/strategy_{rank}.ckpt"})
    net = Net()
    pipe = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 2)
    replica = pipe.topology.replica
    opt = nn.SGD(net.trainable_params(), 0.1)
    grad_fn = ms.value_and_grad(pipe, None, opt.parameters)
    reducer = nn.PipelineGradReducer(opt.parameters)
    for step in range(2):
        rows = slice(replica * 4, replica * 4 + 4)
        loss, grads = grad_fn(ms.Tensor(x[step][rows]), ms.Tensor(y[step][rows]))
        opt(reducer(grads))
    # the plan checked against the stage's own file, then against the other stage's file
    ms.set_auto_parallel_context(strategy_ckpt_config={
        "save_file": "", "load_file": f"{out}/strategys/strategy_{rank}.ckpt"})
    with ms.no_grad():
        pipe(ms.Tensor(x[0][:4]), ms.Tensor(y[0][:4]))
    ms.set_auto_parallel_context(strategy_ckpt_config={
        "load_file": f"{out}/strategys/strategy_{(rank + 2) % 4}.ckpt"})
    try:
        with ms.no_grad():
            pipe(ms.Tensor(x[0][:4]), ms.Tensor(y[0][:4]))
    except ValueError as err:
        print(f"RANK {rank} refused: {err}", flush=True)
    ms.set_auto_parallel_context(strategy_ckpt_config={"load_file": ""})
    ms.save_checkpoint(net, f"{out}/ckpt/rank_{rank}/net.ckpt", integrated_save=False)
    ms.save_checkpoint(net, f"{out}/whole/rank_{rank}.ckpt")      # gathered over the stage
    communication.get_communicator().barrier()
    print(f"RANK {rank} stage {pipe.topology.stage} done", flush=True)
    communication.release()
""")


@needs_mpi
@pytest.mark.skipif(sys.platform == "win32", reason="MPI jobs run on POSIX")
def test_a_pipelined_job_writes_stage_files_that_merge_and_transform_exactly(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    (tmp_path / "ckpt").mkdir()
    for r in range(4):
        (tmp_path / "ckpt" / f"rank_{r}").mkdir()
    (tmp_path / "whole").mkdir()
    done, _ = launch(4, str(script), str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(re.findall(r"RANK \d stage \d done", done.stdout)) == 4, done.stdout
    assert len(re.findall(r"RANK \d refused: .*none of which stage \d holds", done.stdout)) == 4
    merged = str(tmp_path / "merged.ckpt")
    merge_pipeline_strategys(str(tmp_path / "strategys"), merged)
    transform_checkpoints(str(tmp_path / "ckpt"), str(tmp_path / "one"), "c_", merged, None)
    one = ms.load_checkpoint(str(tmp_path / "one" / "rank_0" / "c_0.ckpt"))
    gathered = {**ms.load_checkpoint(str(tmp_path / "whole" / "rank_0.ckpt")),
                **ms.load_checkpoint(str(tmp_path / "whole" / "rank_2.ckpt"))}
    for name in ("front.w", "back.w"):
        assert one[name].shape == gathered[name].shape
        assert np.array_equal(_bits(one[name].asnumpy()), _bits(gathered[name].asnumpy())), name
    # and to 2 ranks of one stage, front.w split by rows and back.w by columns
    dst = str(tmp_path / "dst_strategy.json")

    def plan(comm):
        net = _JobNet(((1, 2), (2, 1)), ((1, 1), (1, 2)))
        with auto_parallel_scope(strategy_ckpt_save_file=dst):
            ShardedCell(net, group=comm)(ms.Tensor(np.ones((4, 8), np.float32)))
        return {p.name: p.sharding_layout for p in net.trainable_params()}
    layouts = run_ranks(2, plan, timeout=60)[0]
    assert [layouts[n].local_shape(0) for n in ("front.w", "back.w")] == [(4, 8), (8, 2)]
    transform_checkpoints(str(tmp_path / "ckpt"), str(tmp_path / "two"), "c_", merged, dst)
    for rank in range(2):
        got = ms.load_checkpoint(str(tmp_path / "two" / f"rank_{rank}" / f"c_{rank}.ckpt"))
        for name in ("front.w", "back.w"):
            block = gathered[name].asnumpy()[layouts[name].slice_for(rank)]
            assert np.array_equal(_bits(got[name].asnumpy()), _bits(block)), (rank, name)


class _JobPart(nn.Cell):
    def __init__(self, shape, strategy):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.zeros(shape, np.float32)), "w")
        self.mm = ops.MatMul().shard(strategy)

    def construct(self, a):
        return self.mm(a, self.w)


class _JobNet(nn.Cell):
    """The job's network, laid out another way: the destination of a transform."""

    def __init__(self, front, back):
        super().__init__()
        self.front, self.back = _JobPart((8, 8), front), _JobPart((8, 4), back)

    def construct(self, a):
        return self.back(self.front(a))
