"""Operator sharding end to end: seed 002 and a Megatron-style MLP, on thread ranks (fast)
and on MPI ranks through the launcher, against one process."""
import os
import re
import sys

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import assemble_array
from minitorch_dist.parallel.sharding.checkpoint import merge_sharded_checkpoints
from minitorch_dist.parallel.sharding.rules import ShardingError
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell

from mpi_jobs import REPO, child_env, needs_mpi, run_process

STEPS = 4


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()
    ms.set_context(save_graphs=False)


class SeedNet(nn.Cell):
    """Seed 002's network; ``strategy`` shards the first MatMul."""

    def __init__(self, strategy=((2, 4), (4, 1)), in_dim=32, hidden=16, out_dim=16):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.zeros((in_dim, hidden), np.float32)), "w")
        self.weight2 = ms.Parameter(ms.Tensor(np.zeros((hidden, out_dim), np.float32)), "w2")
        self.matmul = ops.MatMul().shard(strategy) if strategy else ops.MatMul()
        self.relu = ops.ReLU()
        self.matmul2 = ops.MatMul()

    def construct(self, x):
        return self.matmul2(self.relu(self.matmul(x, self.weight)), self.weight2)


class MegatronMLP(nn.Cell):
    """x @ W1 + b1 -> GeLU -> @ W2 + b2: column- then row-parallel under ``mp``."""

    def __init__(self, dp, mp, d=16, h=32):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(np.zeros((d, h), np.float32)), "w1")
        self.b1 = ms.Parameter(ms.Tensor(np.zeros((h,), np.float32)), "b1")
        self.w2 = ms.Parameter(ms.Tensor(np.zeros((h, d), np.float32)), "w2")
        self.b2 = ms.Parameter(ms.Tensor(np.zeros((d,), np.float32)), "b2")
        self.mm1 = ops.MatMul().shard(((dp, 1), (1, mp)))
        self.add1 = ops.Add().shard(((dp, mp), (mp,)))
        self.act = ops.GeLU().shard(((dp, mp),))
        self.mm2 = ops.MatMul().shard(((dp, mp), (mp, 1)))
        self.add2 = ops.Add().shard(((dp, 1), (1,)))

    def construct(self, x):
        return self.add2(self.mm2(self.act(self.add1(self.mm1(x, self.w1), self.b1)), self.w2), self.b2)


def _weights(net, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape).astype(np.float32) * 0.3 for p in net.trainable_params()]


def _train(net, weights, x, y, steps=STEPS, group=None, sharded=False):
    for p, w in zip(net.trainable_params(), weights):
        p.data = w.copy()
    opt = nn.Momentum(net.trainable_params(), 0.2, 0.1)
    cell = nn.WithLossCell(net, nn.MSELoss())
    if sharded:
        cell = ShardedCell(cell, opt, group=group)
    step = nn.TrainOneStepCell(cell, opt)
    losses = [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for _ in range(steps)]
    return losses, net, opt


def _seed_data(rows=2):
    rng = np.random.default_rng(1)
    return rng.random((rows, 32), np.float32), rng.random((rows, 16), np.float32)


def test_seed_002_on_8_thread_ranks_equals_one_process(tmp_path):
    x, y = _seed_data()
    weights = _weights(SeedNet(None), 0)
    reference, _, _ = _train(SeedNet(None), weights, np.tile(x, (8, 1)), np.tile(y, (8, 1)))
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation")
    ms.set_context(save_graphs=2, save_graphs_path=str(tmp_path))

    def rank(comm):
        losses, net, _ = _train(SeedNet(), weights, x, y, group=comm, sharded=True)
        return losses, {p.name: (p.asnumpy(), p.sharding_layout) for p in net.trainable_params()}

    results = run_ranks(8, rank)
    for losses, _ in results:
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
        assert losses == results[0][0]                       # every rank prints the same
    begin = (tmp_path / "rank_0" / "step_parallel_begin_0000.ir").read_text()
    assert re.search(r"ReLU\(%0\) \{instance name: relu\}.*\{in_strategy: \(\(2, 4\),\)\}  # propagated", begin)
    assert re.search(r"MatMul\(%1, %para_w2\).*\{in_strategy: \(\(2, 4\), \(4, 1\)\)\}  # propagated", begin)
    assert "(<Tensor[Float32], (16, 32)>, <Tensor[Float32], (32, 16)>) -> (<Tensor[Float32], (16, 16)>)" in begin
    execute = (tmp_path / "rank_0" / "18_execute_0000.ir").read_text()
    assert "(<Tensor[Float32], (8, 8)>, <Tensor[Float32], (8, 16)>) -> (<Tensor[Float32], (8, 16)>)" in execute
    assert re.search(r"AllReduce\(%\d+\) \{instance name: forward_op_matmul\}.*rank_list: \(0, 1, 2, 3\)", execute)
    assert "StridedSlice(dim 1" in execute and "(8, 16)>) -> (<Tensor[Float32], (8, 4)>)" in execute
    assert "(<Tensor[Float32], (8, 4)>, <Tensor[Float32], (4, 16)>) -> (<Tensor[Float32], (8, 16)>)" in execute
    # w (32, 16) split 4 ways on rows: each rank holds (8, 16)
    w, layout = results[5][1]["w"]
    assert w.shape == (8, 16) and layout.shape == (32, 16)


@pytest.mark.parametrize("dp,mp", [(4, 1), (1, 4), (2, 2), (1, 2)])
def test_megatron_mlp_strategies_equal_one_process(dp, mp):
    world = 4
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    y = rng.standard_normal((8, 16)).astype(np.float32)
    weights = _weights(MegatronMLP(1, 1), 3)
    ms.reset_auto_parallel_context()
    ref_losses, ref_net, _ = _train(MegatronMLP(1, 1), weights, x, y)
    expected = {p.name: p.asnumpy() for p in ref_net.trainable_params()}
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)

    def rank(comm):
        losses, net, _ = _train(MegatronMLP(dp, mp), weights, x, y, group=comm, sharded=True)
        return losses, {p.name: (p.asnumpy(), p.sharding_layout) for p in net.trainable_params()}

    results = run_ranks(world, rank)
    for losses, _ in results:
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for name, full in expected.items():
        layout = results[0][1][name][1]
        parts = [results[r][1][name][0] for r in range(world)]
        np.testing.assert_allclose(assemble_array(parts, layout), full, rtol=1e-5, atol=1e-6)
        if mp == world and name in ("w1", "w2"):
            assert parts[0].size * world == full.size          # 1/N of the weight per rank


def test_merged_checkpoint_loads_into_a_stand_alone_net(tmp_path):
    x, y = _seed_data()
    weights = _weights(SeedNet(None), 4)
    _, ref_net, _ = _train(SeedNet(None), weights, np.tile(x, (8, 1)), np.tile(y, (8, 1)))
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation")

    def rank(comm):
        _, net, _ = _train(SeedNet(), weights, x, y, group=comm, sharded=True)
        path = str(tmp_path / f"rank{comm.rank}.ckpt")
        ms.save_checkpoint(net, path, integrated_save=False)     # this rank's slices
        ms.save_checkpoint(net, str(tmp_path / f"whole{comm.rank}.ckpt"))   # the default
        return path

    files = run_ranks(8, rank)
    sliced = ms.load_checkpoint(files[3])
    assert any(name.startswith("sharding_layout.") for name in sliced)
    merge_sharded_checkpoints(files[::-1], str(tmp_path / "full.ckpt"))   # any order
    # integrated_save=True (MindSpore's default) wrote the merged tensors on every rank
    merged = ms.load_checkpoint(str(tmp_path / "full.ckpt"))
    for r in (0, 5):
        whole = ms.load_checkpoint(str(tmp_path / f"whole{r}.ckpt"))
        assert sorted(whole) == sorted(merged)
        for name in merged:
            np.testing.assert_array_equal(whole[name].asnumpy(), merged[name].asnumpy())
    ms.reset_auto_parallel_context()
    fresh = SeedNet(None)
    ms.load_param_into_net(fresh, ms.load_checkpoint(str(tmp_path / "full.ckpt")), strict_load=True)
    for p, q in zip(fresh.trainable_params(), ref_net.trainable_params()):
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="needs the files of ranks 0..7"):
        merge_sharded_checkpoints(files[:7], str(tmp_path / "partial.ckpt"))


@pytest.mark.parametrize("strategy,message", [
    (((2, 4), (2, 1)), "matmul"),            # contracting dims split differently
    (((3, 1), (1, 1)), "matmul"),            # 3 does not divide 16 rows, nor the world
    (((4, 4), (4, 1)), "matmul"),            # 16 devices on a world of 8
    (((2, 4),), "matmul"),                   # one input strategy for two inputs
    (((2, 4, 1), (4, 1)), "matmul"),         # three dims for a 2-D input
])
def test_bad_strategies_name_the_primitive(strategy, message):
    x, y = _seed_data()
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with pytest.raises(ShardingError, match=message) as err:
            _train(SeedNet(strategy), _weights(SeedNet(None), 0), x, y, steps=1, group=comm,
                   sharded=True)
        return str(err.value)

    messages = run_ranks(8, rank)
    assert len(set(messages)) == 1                      # the same error on every rank


def test_out_strategy_without_in_strategy_and_non_integers_are_refused():
    with pytest.raises(ValueError, match="out_strategy needs an in_strategy"):
        ops.MatMul().shard(None, ((8, 1),))
    with pytest.raises(ValueError, match="positive split counts"):
        ops.MatMul().shard(((2.0, 4), (4, 1)))
    with pytest.raises(ValueError, match="positive split counts"):
        ops.MatMul().shard(((True, 4), (4, 1)))


@needs_mpi
def test_seed_002_example_on_8_mpi_ranks(tmp_path):
    """The example as a user runs it: 8 ranks, same loss on every rank at every step, equal to
    one process training the unsharded net on the 8 ranks' batches (seed fixed)."""
    env = child_env({"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    proc, _ = run_process([sys.executable, "-m", "minitorch_dist.run", "-n", "8", "--timeout", "100",
                           os.path.join(REPO, "examples", "sharding_quickstart.py"), "--seed", "7"],
                          env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = re.findall(r"epoch: (\d+) step: (\d+), loss is ([0-9.e-]+)", proc.stdout)
    by_step = {}
    for epoch, step, loss in lines:
        by_step.setdefault((int(epoch), int(step)), []).append(float(loss))
    assert len(by_step) == 20 and all(len(v) == 8 and len(set(v)) == 1 for v in by_step.values())
    # one process, the same seed and data, the 8 ranks' batches stacked
    ms.set_seed(7)
    from minitorch_dist.common.initializer import initializer
    w = initializer("normal", [32, 16]).asnumpy()
    w2 = initializer("normal", [16, 16]).asnumpy()
    np.random.seed(1)
    x = np.random.rand(2, 32).astype(np.float32)
    y = np.random.rand(2, 16).astype(np.float32)
    reference, _, _ = _train(SeedNet(None), [w, w2], np.tile(x, (8, 1)), np.tile(y, (8, 1)), steps=20)
    got = [by_step[k][0] for k in sorted(by_step)]
    np.testing.assert_allclose(got, reference, rtol=1e-5)
    out = os.path.join(REPO, "examples", "output", "sharding_quickstart")
    begin = open(os.path.join(out, "saved_graph", "rank_3", "step_parallel_begin_0000.ir")).read()
    assert "{in_strategy: ((2, 4),)}  # propagated" in begin
    assert os.listdir(os.path.join(out, "3"))                  # ModelCheckpoint per rank


@needs_mpi
def test_seed_002_as_written_is_a_clear_shape_error():
    env = child_env({"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    proc, _ = run_process([sys.executable, "-m", "minitorch_dist.run", "-n", "2", "--timeout", "60",
                           os.path.join(REPO, "examples", "sharding_quickstart.py"), "--as-written"],
                          env=env)
    assert proc.returncode != 0
    assert "a of shape (4, 4) and b of shape (32, 16)" in proc.stdout + proc.stderr


def test_model_train_eval_and_predict_run_sharded():
    """Model under AUTO_PARALLEL: training, then eval and predict on the sliced parameters,
    equal to one process; predict gives each rank the rows of its own batch."""
    x, y = _seed_data(rows=4)
    weights = _weights(SeedNet(None), 5)
    ref = SeedNet(None)
    for p, w in zip(ref.trainable_params(), weights):
        p.data = w.copy()
    full_x, full_y = np.tile(x, (4, 1)), np.tile(y, (4, 1))
    ref_model = ms.Model(ref, nn.MSELoss(), nn.Momentum(ref.trainable_params(), 0.2, 0.1),
                         metrics={"loss"})
    ref_model.train(1, ms.dataset.NumpySlicesDataset((full_x, full_y), shuffle=False).batch(16))
    expected_loss = ref_model.eval(ms.dataset.NumpySlicesDataset((full_x, full_y), shuffle=False).batch(16))
    expected_pred = ref_model.predict(ms.Tensor(full_x)).asnumpy()
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation")

    def rank(comm):
        net = SeedNet(((2, 2), (2, 1)))
        for p, w in zip(net.trainable_params(), weights):
            p.data = w.copy()
        model = ms.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.2, 0.1),
                         metrics={"loss"})
        with sharding_world(comm):
            model.train(1, ms.dataset.NumpySlicesDataset((x, y), shuffle=False).batch(4))
            loss = model.eval(ms.dataset.NumpySlicesDataset((x, y), shuffle=False).batch(4))
            return loss, model.predict(ms.Tensor(x)).asnumpy()

    for r, (loss, pred) in enumerate(run_ranks(4, rank)):
        np.testing.assert_allclose(loss["loss"], expected_loss["loss"], rtol=1e-5)
        np.testing.assert_allclose(pred, expected_pred[4 * r:4 * r + 4], rtol=1e-5, atol=1e-6)


class Attention(nn.Cell):
    """One attention block, heads split ``mp`` ways through the projections (Megatron)."""

    def __init__(self, dp, mp, batch=4, seq=8, d=16, heads=4):
        super().__init__()
        self.shape = (batch, seq, heads, d // heads)
        self.flat = (batch * seq, d)
        for name in ("wq", "wk", "wv", "wo"):
            setattr(self, name, ms.Parameter(ms.Tensor(np.zeros((d, d), np.float32)), name))
        self.q = ops.MatMul().shard(((dp, 1), (1, mp)))
        self.k = ops.MatMul().shard(((dp, 1), (1, mp)))
        self.v = ops.MatMul().shard(((dp, 1), (1, mp)))
        self.o = ops.MatMul().shard(((dp, mp), (mp, 1)))
        self.reshape = ops.Reshape()
        self.transpose = ops.Transpose()
        self.scores = ops.BatchMatMul(transpose_b=True)
        self.softmax = ops.Softmax(-1)
        self.mix = ops.BatchMatMul()
        self.scale = ops.Mul()

    def heads(self, x):
        return self.transpose(self.reshape(x, self.shape), (0, 2, 1, 3))

    def construct(self, x):
        flat = self.reshape(x, self.flat)
        q, k, v = (self.heads(mm(flat, w)) for mm, w in ((self.q, self.wq), (self.k, self.wk),
                                                         (self.v, self.wv)))
        attn = self.softmax(self.scale(self.scores(q, k), 0.5))
        out = self.transpose(self.mix(attn, v), (0, 2, 1, 3))
        return self.o(self.reshape(out, self.flat), self.wo)


@pytest.mark.parametrize("mode,dp,mp", [("auto_parallel", 1, 4), ("auto_parallel", 2, 2),
                                        ("semi_auto_parallel", 2, 2)])
def test_attention_block_split_by_heads_equals_one_process(mode, dp, mp):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 8, 16)).astype(np.float32)
    y = rng.standard_normal((32, 16)).astype(np.float32)
    weights = _weights(Attention(1, 1), 8)
    ref_losses, ref_net, _ = _train(Attention(1, 1), weights, x, y, steps=3)
    ms.set_auto_parallel_context(parallel_mode=mode, search_mode="sharding_propagation",
                                 full_batch=True)

    def rank(comm):
        losses, net, _ = _train(Attention(dp, mp), weights, x, y, steps=3, group=comm, sharded=True)
        return losses, {p.name: (p.asnumpy(), p.sharding_layout) for p in net.trainable_params()}

    results = run_ranks(4, rank)
    for losses, _ in results:
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    assert results[0][1]["wq"][0].shape == (16, 16 // mp)      # a rank holds its heads only
    for p in ref_net.trainable_params():
        layout = results[0][1][p.name][1]
        parts = [results[r][1][p.name][0] for r in range(4)]
        np.testing.assert_allclose(assemble_array(parts, layout), p.asnumpy(), rtol=1e-4, atol=1e-6)


class ConvHead(nn.Cell):
    """An adaptive pooling (no sharding rule: it runs whole on every rank) after a
    convolution, under a sharded Dense."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, pad_mode="same", has_bias=False)
        self.pool = nn.AdaptiveMaxPool2d((4, 4))
        self.flatten = nn.Flatten()
        self.w = ms.Parameter(ms.Tensor(np.zeros((32, 4), np.float32)), "w")
        self.mm = ops.MatMul().shard(((2, 1), (1, 2)))

    def construct(self, x):
        return self.mm(self.flatten(self.pool(self.conv(x))), self.w)


def test_primitives_without_a_rule_run_whole_on_every_rank():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 1, 4, 4)).astype(np.float32)
    y = rng.standard_normal((4, 4)).astype(np.float32)
    weights = _weights(ConvHead(), 10)
    ref_losses, _, _ = _train(ConvHead(), weights, x, y, steps=3)
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", full_batch=True)
    results = run_ranks(4, lambda comm: _train(ConvHead(), weights, x, y, steps=3, group=comm,
                                               sharded=True)[0])
    for losses in results:
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)


@needs_mpi
@pytest.mark.parametrize("dp,mp", [(4, 1), (1, 4), (2, 2)])
def test_megatron_mlp_on_4_mpi_ranks_equals_one_process(dp, mp):
    proc, _ = run_process([sys.executable, "-m", "minitorch_dist.run", "-n", "4", "--timeout", "100",
                           os.path.join(REPO, "python_tests", "mpi_scripts", "sharding_check.py"),
                           "--dp", str(dp), "--mp", str(mp)], env=child_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(re.findall(r"OK rank (\d)", proc.stdout)) == ["0", "1", "2", "3"]


def test_dataset_strategy_is_validated_and_its_tuple_form_splits_inputs():
    for bad in ("fullbatch", ((2, 0),), ((2, 1.5),), 3):
        with pytest.raises(ValueError, match="dataset_strategy must be"):
            ms.set_auto_parallel_context(dataset_strategy=bad)
    x, y = _seed_data(rows=8)
    weights = _weights(SeedNet(None), 11)
    reference, _, _ = _train(SeedNet(None), weights, x, y)
    # inputs split 4 ways on rows: each rank is given its own quarter of the batch
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel",
                                 dataset_strategy=((4, 1), (4, 1)))

    def rank(comm):
        part = slice(2 * comm.rank, 2 * comm.rank + 2)
        return _train(SeedNet(((2, 2), (2, 1))), weights, x[part], y[part], group=comm,
                      sharded=True)[0]

    for losses in run_ranks(4, rank):
        np.testing.assert_allclose(losses, reference, rtol=1e-5)


def test_execute_dump_names_inputs_and_parameters(tmp_path):
    x, y = _seed_data()
    ms.set_auto_parallel_context(parallel_mode="auto_parallel")
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    run_ranks(8, lambda comm: _train(SeedNet(), _weights(SeedNet(None), 0), x, y, steps=1,
                                     group=comm, sharded=True))
    execute = (tmp_path / "rank_2" / "18_execute_0000.ir").read_text()
    assert "= Redistribution(%input0)" in execute
    assert re.search(r"MatMul\(%\d+, %para_w\)", execute)


def test_fewer_devices_keep_the_blocks_of_a_full_strategy():
    """The repeated axis on the right (MindSpore's default): after MatMul ((2, 2), (2, 1)) on 4
    ranks, Add ((2, 1), (1,)) wants the row blocks each rank already has, so nothing moves
    (with it on the left an AllGather and a slice were inserted)."""
    from minitorch_dist.parallel.sharding.propagation import input_layout, output_layout
    from minitorch_dist.parallel.sharding.redistribution import plan_cost, plan_redistribution
    from minitorch_dist.parallel.sharding.rules import plan
    mm = plan(ops.MatMul(), ((2, 2), (2, 1)), [(64, 32), (32, 32)], [None, None], {}, 4)
    add = plan(ops.Add(), ((2, 1), (1,)), [(64, 32), (32,)], [None, None], {}, 4)
    have = output_layout(mm, 0, (64, 32))
    want = input_layout(add, 0, (64, 32))
    assert plan_cost(plan_redistribution(have, want), 4) == 0
    assert all(have.slice_for(r) == want.slice_for(r) for r in range(4))


class ReduceScatterNet(nn.Cell):
    """Seed 002's first MatMul with ``out_strategy ((8, 1),)``: a ReduceScatter instead of the
    AllReduce, the output rows split over all 8 ranks."""

    def __init__(self):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.zeros((32, 16), np.float32)), "w")
        self.matmul = ops.MatMul().shard(((2, 4), (4, 1)), out_strategy=((8, 1),))
        self.relu = ops.ReLU()

    def construct(self, x):
        return self.relu(self.matmul(x, self.weight))


def test_out_strategy_reduce_scatter_trains_like_one_process(tmp_path):
    x, y = _seed_data(rows=2)
    weights = _weights(ReduceScatterNet(), 12)
    ms.set_auto_parallel_context(parallel_mode="stand_alone")
    reference, _, _ = _train(ReduceScatterNet(), weights, np.tile(x, (8, 1)), np.tile(y, (8, 1)))
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    results = run_ranks(8, lambda comm: _train(ReduceScatterNet(), weights, x, y, group=comm,
                                               sharded=True)[0])
    for losses in results:
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
    execute = (tmp_path / "rank_0" / "18_execute_0000.ir").read_text()
    assert "ReduceScatter(" in execute and "forward_op_matmul" in execute
    assert "AllReduce(%1)" not in execute


@needs_mpi
def test_functional_operator_parallel_example_on_8_mpi_ranks():
    """MindSpore 2.6's operator-parallel tutorial (AutoParallel over a value_and_grad
    train_step, no_init_parameters): every rank holds its slices and prints the same losses,
    which fall."""
    proc, _ = run_process([sys.executable, "-m", "minitorch_dist.run", "-n", "8", "--timeout", "150",
                           os.path.join(REPO, "examples", "operator_parallel_functional.py"),
                           "--epochs", "2"], env=child_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    slices = re.findall(r"rank \d: slices (.*)", proc.stdout)
    assert slices == ["fc1_weight (196, 512), fc2_weight (64, 512), fc3_weight (512, 10)"] * 8
    by_step = {}
    for epoch, step, loss in re.findall(r"epoch: (\d+), step: (\d+), loss is ([0-9.]+)", proc.stdout):
        by_step.setdefault((int(epoch), int(step)), []).append(float(loss))
    assert all(len(v) == 8 and len(set(v)) == 1 for v in by_step.values())
    losses = [v[0] for _, v in sorted(by_step.items())]
    assert losses[-1] < losses[0]
    assert "data: synthetic MNIST-format files" in proc.stdout
