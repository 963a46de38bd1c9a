"""Sharding rules: every plan, run on local slices by a small simulator, reproduces the
one-process result.

The simulator (test-only, no MPI, no threads) takes a ``ShardPlan`` and full NumPy inputs;
for each of the ``world`` ranks (coordinates row-major over the device matrix) it slices
every tensor input by its tensor map, runs the real primitive on the slices (after the
plan's ``local_inputs``, and ``local_output`` when there is one), then applies the plan's
forward communication by reducing across the ranks of each group (those that differ only
along the communication axes). Every rank's output must equal the slice of the full output
that the output map gives it.
"""
import itertools
import math
import random

import numpy as np
import pytest

from minitorch_dist import Tensor, ops
from minitorch_dist.ops.primitive import set_primitive_hook
from minitorch_dist.parallel.sharding.rules import (
    CommStep, ShardingError, ShardPlan, candidates, coordinates, default_strategy, plan, rule_for,
    run_local, supported_primitives)

WORLDS = (8, 4)


# ---- the simulator ---------------------------------------------------------------------
def captured_call(prim, *args, **kwargs):
    """Run ``prim`` on full inputs; return (outputs as NumPy, inputs, attrs) as dispatch saw them."""
    seen = []

    def hook(p, inputs, attrs):
        if p is prim and not seen:
            seen.append((list(inputs), dict(attrs)))
        return p.run(*inputs, **attrs)

    old = set_primitive_hook(hook)
    try:
        out = prim(*args, **kwargs)
    finally:
        set_primitive_hook(old)
    outs = out if isinstance(out, tuple) else (out,)
    return [o.asnumpy() for o in outs], seen[0][0], seen[0][1]


def block(array, tensor_map, device_matrix, coords):
    """The part of ``array`` a rank at ``coords`` holds under ``tensor_map``."""
    n = len(device_matrix)
    index = []
    for size, entry in zip(array.shape, tensor_map):
        axes = entry if isinstance(entry, tuple) else (entry,)
        axes = [a for a in axes if a >= 0]
        k, count = 0, 1
        for a in axes:
            k = k * device_matrix[n - 1 - a] + coords[n - 1 - a]
            count *= device_matrix[n - 1 - a]
        chunk = size // count
        index.append(slice(k * chunk, (k + 1) * chunk))
    return array[tuple(index)]


_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def simulate(shard_plan, prim, inputs, attrs):
    """Every rank's outputs (lists of NumPy arrays) after local compute and forward comm."""
    dm = shard_plan.device_matrix
    world = math.prod(dm)
    assert len(shard_plan.input_maps) == len(inputs)
    per_rank = []
    for rank in range(world):
        coords = coordinates(dm, rank)
        local = []
        for x, tensor_map in zip(inputs, shard_plan.input_maps):
            if isinstance(x, Tensor):
                assert tensor_map is not None and len(tensor_map) == x.ndim
                part = block(x.asnumpy(), tensor_map, dm, coords)
                assert part.shape == shard_plan.local_shape(tensor_map, x.shape)
                local.append(Tensor(np.array(part)))
            else:
                assert tensor_map is None
                local.append(x)
        out = run_local(shard_plan, prim, local, attrs, rank)
        outs = out if isinstance(out, tuple) else (out,)
        per_rank.append([o.asnumpy() for o in outs])
    n = len(dm)
    for step in shard_plan.forward_comm:
        positions = [n - 1 - a for a in step.axes]
        groups = {}
        for rank in range(world):
            c = coordinates(dm, rank)
            key = tuple(v for i, v in enumerate(c) if i not in positions)
            groups.setdefault(key, []).append(rank)
        for members in groups.values():
            stacked = np.stack([per_rank[r][step.output] for r in members])
            if step.kind == "all_reduce":
                total = _REDUCE[step.op](stacked, axis=0)
                for r in members:
                    per_rank[r][step.output] = total
            else:
                assert step.kind == "reduce_scatter" and step.op == "sum"
                chunks = np.split(stacked.sum(axis=0), len(members), axis=step.dim)
                for k, r in enumerate(members):
                    per_rank[r][step.output] = chunks[k]
    return per_rank


def check_plan(shard_plan, prim, inputs, attrs, full_outs, world):
    assert math.prod(shard_plan.device_matrix) == world
    assert len(shard_plan.output_maps) == len(full_outs)
    per_rank = simulate(shard_plan, prim, inputs, attrs)
    for rank, outs in enumerate(per_rank):
        coords = coordinates(shard_plan.device_matrix, rank)
        for k, (got, full) in enumerate(zip(outs, full_outs)):
            want = block(full, shard_plan.output_maps[k], shard_plan.device_matrix, coords)
            assert got.shape == want.shape, (rank, k, got.shape, want.shape, shard_plan)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12,
                                       err_msg=f"rank {rank} output {k} of {shard_plan}")


def in_shapes_of(inputs):
    return [tuple(x.shape) if isinstance(x, Tensor) else None for x in inputs]


def check_all(make_prim, args, kwargs=None, worlds=WORLDS, randoms=12, seed=0):
    """Every candidate strategy (and some random valid ones) on each world size."""
    kwargs = kwargs or {}
    rng = random.Random(seed)
    tried = 0
    for world in worlds:
        prim = make_prim()
        full, inputs, attrs = captured_call(prim, *args, **kwargs)
        shapes = in_shapes_of(inputs)
        found = candidates(prim, shapes, inputs, attrs, world)
        assert found, "at least the all-ones strategy is valid"
        assert len(set(found)) == len(found)
        assert found == candidates(prim, shapes, inputs, attrs, world)     # deterministic
        ones = tuple((1,) * len(s) for s in shapes if s is not None)
        assert ones in found
        assert default_strategy(prim, shapes, inputs, attrs, world) == found[0]
        for strategy in found:
            check_plan(plan(prim, strategy, shapes, inputs, attrs, world), prim, inputs, attrs,
                       full, world)
            tried += 1
        for _ in range(randoms):                       # random strategies: valid ones must work
            strategy = tuple(tuple(rng.choice([d for d in (1, 2, 4, 8) if n % d == 0 and d <= world])
                                   for n in s) for s in shapes if s is not None)
            try:
                shard_plan = plan(prim, strategy, shapes, inputs, attrs, world)
            except ShardingError:
                continue
            check_plan(shard_plan, prim, inputs, attrs, full, world)
            tried += 1
    return tried


def rand(*shape, seed=0, positive=False):
    x = np.random.default_rng(seed + sum(shape)).standard_normal(shape)
    return Tensor(np.abs(x) + 0.5 if positive else x)


# ---- seed 002: MatMul ((2, 4), (4, 1)) on 8 devices ----------------------------------------
def test_seed_002_matmul_plan_and_allreduce():
    mm = ops.MatMul()
    x, w = rand(16, 32), rand(32, 16, seed=1)
    full, inputs, attrs = captured_call(mm, x, w)
    p = plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], inputs, attrs, 8)
    assert p.device_matrix == (2, 4, 1)
    assert p.input_maps == ((2, 1), (1, 0))
    assert p.output_maps == ((2, 0),)
    assert p.forward_comm == (CommStep("all_reduce", (1,), output=0, dim=None, op="sum"),)
    assert p.local_shape(p.input_maps[0], (16, 32)) == (8, 8)     # the seed's (8, 8) x (8, 16)
    assert p.local_shape(p.input_maps[1], (32, 16)) == (8, 16)
    check_plan(p, mm, inputs, attrs, full, 8)


def test_seed_002_matmul_out_strategy_reduce_scatter():
    mm = ops.MatMul()
    full, inputs, attrs = captured_call(mm, rand(16, 32), rand(32, 16, seed=1))
    p = plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], inputs, attrs, 8, out_strategy=((8, 1),))
    assert p.forward_comm == (CommStep("reduce_scatter", (1,), output=0, dim=0, op="sum"),)
    assert p.output_maps == (((2, 1), 0),)          # rows split over axes 2 (a, major) and 1 (b)
    assert p.splits(p.output_maps[0]) == (8, 1)
    check_plan(p, mm, inputs, attrs, full, 8)
    # out_strategy (a, c) is the plain AllReduce
    same = plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], inputs, attrs, 8, out_strategy=((2, 1),))
    assert same.forward_comm[0].kind == "all_reduce"


def test_matmul_reduce_scatter_with_one_row_split_and_repeated_axis():
    mm = ops.MatMul(transpose_b=True)
    full, inputs, attrs = captured_call(mm, rand(8, 12), rand(6, 12, seed=2))
    p = plan(mm, ((1, 4), (1, 4)), [(8, 12), (6, 12)], inputs, attrs, 8, out_strategy=((4, 1),))
    assert p.device_matrix == (1, 4, 1, 2)          # the repeated axis on the right
    assert p.output_maps == ((2, 1),)
    check_plan(p, mm, inputs, attrs, full, 8)


def test_repeated_axis_is_rightmost():
    """MindSpore's default: neighbouring ranks hold the copies, so (2, 1) on 8 devices gives
    ranks 0-3 the first row block, as (8, 1)'s ranks 0-3 hold its first four blocks."""
    mm = ops.MatMul()
    full, inputs, attrs = captured_call(mm, rand(8, 8), rand(8, 8, seed=3))
    p = plan(mm, ((2, 1), (1, 1)), [(8, 8), (8, 8)], inputs, attrs, 8)
    assert p.device_matrix == (2, 1, 1, 4)
    assert p.forward_comm == ()
    check_plan(p, mm, inputs, attrs, full, 8)


def test_simulator_catches_a_wrong_plan():
    """Without its AllReduce (or with a wrong output map) the seed plan must fail the check."""
    mm = ops.MatMul()
    full, inputs, attrs = captured_call(mm, rand(16, 32), rand(32, 16, seed=1))
    good = plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], inputs, attrs, 8)
    for wrong in (ShardPlan(good.device_matrix, good.input_maps, good.output_maps, ()),
                  ShardPlan(good.device_matrix, good.input_maps, ((1, 0),), good.forward_comm)):
        with pytest.raises(AssertionError):
            check_plan(wrong, mm, inputs, attrs, full, 8)


# ---- every rule over its candidates -----------------------------------------------------------
MATMUL_CASES = [
    (lambda: ops.MatMul(), (rand(16, 32), rand(32, 8, seed=1))),
    (lambda: ops.MatMul(transpose_a=True), (rand(32, 16), rand(32, 8, seed=1))),
    (lambda: ops.MatMul(transpose_b=True), (rand(16, 32), rand(8, 32, seed=1))),
    (lambda: ops.MatMul(True, True), (rand(8, 16), rand(4, 8, seed=1))),
    (lambda: ops.BatchMatMul(), (rand(4, 8, 6), rand(4, 6, 8, seed=1))),
    (lambda: ops.BatchMatMul(), (rand(2, 1, 4, 6), rand(4, 6, 4, seed=1))),
    (lambda: ops.BatchMatMul(transpose_a=True, transpose_b=True), (rand(2, 6, 4), rand(8, 6, seed=1))),
]


@pytest.mark.parametrize("make, args", MATMUL_CASES)
def test_matmul_rules(make, args):
    assert check_all(make, args) > 10


UNARY = [ops.ReLU, ops.Sigmoid, ops.Tanh, ops.GeLU, ops.Exp, ops.Log, ops.Sqrt, ops.Rsqrt, ops.Abs,
         ops.Square, ops.Sign, ops.Neg, lambda: ops.Dropout(keep_prob=1.0)]


@pytest.mark.parametrize("make", UNARY)
def test_unary_rules(make):
    positive = make in (ops.Log, ops.Sqrt, ops.Rsqrt)
    assert check_all(make, (rand(8, 4, 2, positive=positive),), randoms=4) > 5


def test_cast_and_zero_dim():
    check_all(ops.Cast, (rand(8, 4), "float32"))
    check_all(ops.ReLU, (Tensor(np.float64(-2.0)),))


BINARY = [
    (ops.Add, (rand(8, 16), rand(16, seed=1))),                     # bias add ((a, b), (b,))
    (ops.Sub, (rand(8, 1), rand(1, 16, seed=1))),
    (ops.Mul, (rand(4, 8, 16), rand(8, 1, seed=1))),
    (ops.Mul, (rand(8, 4), 2.5)),
    (ops.Div, (rand(8, 4), rand(8, 4, seed=1, positive=True))),
    (ops.Pow, (rand(4, 8, positive=True), rand(8, seed=1))),
    (ops.Maximum, (rand(2, 8, 4), rand(2, 1, 4, seed=1))),
    (ops.Minimum, (rand(8, 4), rand(8, 4, seed=1))),
    (ops.Less, (rand(8, 4), rand(4, seed=1))),
    (ops.GreaterEqual, (rand(8, 4), 0.0)),
    (ops.Equal, (Tensor(np.arange(16).reshape(8, 2) % 3), Tensor(np.array([1, 2])))),
]


@pytest.mark.parametrize("make, args", BINARY)
def test_binary_rules(make, args):
    assert check_all(make, args) > 5


REDUCTIONS = [
    (lambda: ops.ReduceSum(), (rand(8, 4, 2), 1)),
    (lambda: ops.ReduceSum(keep_dims=True), (rand(8, 4, 2), (0, 2))),
    (lambda: ops.ReduceMean(), (rand(8, 4),)),
    (lambda: ops.ReduceMean(keep_dims=True), (rand(8, 4, 2), -1)),
    (lambda: ops.ReduceMax(), (rand(8, 4, 2), (0, 1))),
    (lambda: ops.ReduceMin(keep_dims=True), (rand(8, 4), 0)),
    (lambda: ops.Argmax(axis=1), (rand(8, 4),)),
    (lambda: ops.Argmin(axis=0), (rand(4, 8),)),
]


@pytest.mark.parametrize("make, args", REDUCTIONS)
def test_reduction_rules(make, args):
    assert check_all(make, args) > 3


def test_reduce_mean_over_split_axis_uses_allreduce_mean():
    op = ops.ReduceMean()
    full, inputs, attrs = captured_call(op, rand(8, 4), 0)
    p = plan(op, ((4, 2),), [(8, 4)], inputs, attrs, 8)
    assert p.forward_comm == (CommStep("all_reduce", (1,), op="mean"),)
    assert p.output_maps == ((0,),)
    check_plan(p, op, inputs, attrs, full, 8)
    p = plan(ops.ReduceMax(), ((4, 2),), [(8, 4)], [None], {"axis": (), "keepdims": False}, 8)
    assert p.forward_comm == (CommStep("all_reduce", (1, 0), op="max"),) and p.output_maps == ((),)


SOFTMAX_AND_LOSSES = [
    (lambda: ops.Softmax(), (rand(8, 10),)),
    (lambda: ops.Softmax(axis=0), (rand(8, 4, 2),)),
    (lambda: ops.LogSoftmax(), (rand(4, 2, 8),)),
    (lambda: ops.SparseSoftmaxCrossEntropyWithLogits(), (rand(16, 10), Tensor(np.arange(16) % 10))),
    (lambda: ops.SparseSoftmaxCrossEntropyWithLogits("mean"), (rand(16, 10), Tensor(np.arange(16) % 10))),
    (lambda: ops.SparseSoftmaxCrossEntropyWithLogits("sum"), (rand(16, 10), Tensor(np.arange(16) % 10))),
    (lambda: ops.SoftmaxCrossEntropyWithLogits("mean"),
     (rand(8, 5), Tensor(np.eye(5)[np.arange(8) % 5]))),
    (lambda: ops.MSE(), (rand(8, 4), rand(8, 4, seed=1))),
    (lambda: ops.MSE("mean"), (rand(8, 4), rand(4, seed=1))),
    (lambda: ops.MSE("sum"), (rand(8, 1, 4), rand(2, 4, seed=1))),
    (lambda: ops.BCEWithLogits("mean"), (rand(8, 4), Tensor((np.arange(32).reshape(8, 4) % 2) * 1.0))),
    (lambda: ops.BCEWithLogits("sum"), (rand(8, 4), Tensor((np.arange(32).reshape(8, 4) % 2) * 1.0),
                                        rand(8, 1, seed=2, positive=True), rand(4, seed=3, positive=True))),
    (lambda: ops.BCEWithLogits(), (rand(8, 4), Tensor((np.arange(32).reshape(8, 4) % 2) * 1.0))),
]


@pytest.mark.parametrize("make, args", SOFTMAX_AND_LOSSES)
def test_softmax_and_loss_rules(make, args):
    assert check_all(make, args) > 2


def test_sparse_cross_entropy_mean_plan():
    loss = ops.SparseSoftmaxCrossEntropyWithLogits("mean")
    p = plan(loss, ((4, 1), (4,)), [(16, 10), (16,)], [None, None], {}, 8)
    assert p.device_matrix == (4, 1, 2)            # the repeated axis on the right
    assert p.input_maps == ((2, 1), (2,)) and p.output_maps == ((),)
    assert p.forward_comm == (CommStep("all_reduce", (2,), op="mean"),)


SHAPES = [
    (ops.Reshape, (rand(4, 6, 5), (24, 5))),
    (ops.Reshape, (rand(8, 16), (2, 4, 16))),
    (ops.Reshape, (rand(8, 4, 4), (8, -1))),
    (ops.Reshape, (rand(16,), (4, 4))),
    (ops.Reshape, (rand(8, 1, 6), (2, 4, 3, 2, 1))),
    (ops.Reshape, (rand(6, 4), (4, 6))),
    (ops.Flatten, (rand(8, 2, 3, 4),)),
    (ops.Flatten, (rand(4, 1, 8),)),
    (ops.Transpose, (rand(8, 4, 2), (2, 0, 1))),
    (ops.Transpose, (rand(8, 4),)),
    (ops.ExpandDims, (rand(8, 4), 1)),
    (ops.ExpandDims, (rand(8, 4), -1)),
    (lambda: ops.Squeeze(), (rand(8, 1, 4, 1),)),
    (lambda: ops.Squeeze(1), (rand(8, 1, 4, 1),)),
    (lambda: ops.BroadcastTo((2, 8, 4)), (rand(8, 1),)),
    (lambda: ops.BroadcastTo((-1, 4)), (rand(8, 1),)),
    (lambda: ops.Concat(1), ((rand(8, 2), rand(8, 4, seed=1), rand(8, 2, seed=2)),)),
    (lambda: ops.Stack(1), ((rand(8, 4), rand(8, 4, seed=1)),)),
    (lambda: ops.Split(1, 2), (rand(8, 4, 2),)),
]


@pytest.mark.parametrize("make, args", SHAPES)
def test_shape_rules(make, args):
    assert check_all(make, args) > 1


def test_reshape_local_shape_and_errors():
    with pytest.raises(ShardingError, match="does not divide"):
        plan(ops.Reshape(), ((8, 1),), [(8, 16)], [None], {"shape": (2, 4, 16)}, 8)
    ok = plan(ops.Reshape(), ((2, 1),), [(8, 16)], [None], {"shape": (2, 4, 16)}, 8)
    assert ok.splits(ok.output_maps[0]) == (2, 1, 1)
    assert ok.local_inputs([None], {"shape": (2, 4, 16)}, (0, 0, 0))[1] == {"shape": (1, 4, 16)}
    with pytest.raises(ShardingError, match="not the leading dimension.*redistribution"):
        plan(ops.Reshape(), ((1, 2),), [(4, 6)], [None], {"shape": (24,)}, 2)


def test_squeeze_explicit_local_axes():
    p = plan(ops.Squeeze(), ((8, 1, 1),), [(8, 1, 4)], [None], {"axis": ()}, 8)
    assert p.output_maps == ((2, 0),)
    assert p.local_inputs([None], {"axis": ()}, (0, 0, 0))[1] == {"axis": (1,)}
    with pytest.raises(ShardingError, match="explicit axis"):
        plan(ops.Squeeze(), ((8, 1),), [(8, 4)], [None], {"axis": ()}, 8)


GATHERS = [
    (lambda: ops.Gather(), (rand(16, 4), Tensor(np.array([3, 15, 0, 8, 8, 2, -1, 9])), 0)),
    (lambda: ops.Gather(), (rand(4, 16), Tensor(np.array([[1, 15, 3], [0, 0, -16]])), 1)),
    (lambda: ops.Gather(), (rand(16, 4), [1, 5, 9, 13], 0)),             # constant ids
    (lambda: ops.EmbeddingLookup(), (rand(16, 4), Tensor(np.array([[1, 15], [7, 8], [0, 0], [9, 3]])))),
]


@pytest.mark.parametrize("make, args", GATHERS)
def test_gather_rules(make, args):
    assert check_all(make, args) > 3


def test_gather_row_split_plan():
    g = ops.Gather()
    table, ids = rand(16, 4), Tensor(np.array([3, 15, 0, 8, 12, 2, 7, 9]))
    full, inputs, attrs = captured_call(g, table, ids, 0)
    p = plan(g, ((8, 1), (1,)), [(16, 4), (8,)], inputs, attrs, 8)
    assert p.device_matrix == (8, 1, 1)
    assert p.output_maps == ((0, 1),)
    assert p.forward_comm == (CommStep("all_reduce", (2,)),)
    assert p.local_output is not None
    check_plan(p, g, inputs, attrs, full, 8)
    dp = plan(g, ((1, 1), (8,)), [(16, 4), (8,)], inputs, attrs, 8)
    assert dp.forward_comm == () and dp.local_output is None
    assert dp.output_maps == ((0, 1),) and dp.splits(dp.output_maps[0]) == (8, 1)
    assert default_strategy(g, [(16, 4), (8,)], inputs, attrs, 8) == ((1, 1), (8,))


def test_embedding_row_split_gradient_reaches_only_owned_rows():
    """The local masked lookup is differentiable: the gradient of a rank's table slice
    covers only the ids it owns."""
    emb = ops.EmbeddingLookup(sparse=False)
    table = np.arange(32.0).reshape(8, 4)
    ids = Tensor(np.array([0, 5, 7, 2]))
    p = plan(emb, ((2, 1), (1,)), [(8, 4), (4,)], [None, None], {}, 2)
    local_table = Tensor(table[4:], requires_grad=True)             # rank 1 owns rows 4..7
    out = run_local(p, emb, [local_table, ids], {}, rank=1)
    out.sum().backward()
    np.testing.assert_array_equal(local_table.grad.asnumpy()[:, 0], [0.0, 1.0, 0.0, 1.0])


# ---- defaults and candidates ---------------------------------------------------------------
def test_default_strategies():
    assert default_strategy(ops.MatMul(), [(16, 32), (32, 8)], [None, None], {}, 8) == ((8, 1), (1, 1))
    assert default_strategy(ops.MatMul(transpose_a=True), [(32, 16), (32, 8)], [None, None], {}, 8) \
        == ((1, 8), (1, 1))
    assert default_strategy(ops.Add(), [(8, 16), (16,)], [None, None], {}, 8) == ((8, 1), (1,))
    assert default_strategy(ops.ReLU(), [(6, 4)], [None], {}, 4) == ((1, 1),)       # 6 % 4 != 0
    assert default_strategy(ops.Softmax(axis=0), [(8, 4)], [None], {}, 8) == ((1, 1),)
    assert default_strategy(ops.ReLU(), [()], [None], {}, 8) == ((),)
    assert default_strategy(ops.Transpose(), [(4, 8)], [None], {"perm": (1, 0)}, 8) == ((1, 8),)
    assert default_strategy(ops.ReLU(), [(8, 4)], [None], {}, 1) == ((1, 1),)


def test_candidates_order_and_validity():
    found = candidates(ops.MatMul(), [(8, 8), (8, 8)], [None, None], {}, 4)
    assert found[0] == ((4, 1), (1, 1))
    assert found[-1] == ((1, 1), (1, 1))
    counts = [a * b * c for (a, b), (_, c) in found[1:-1]]
    assert counts == sorted(counts, reverse=True) and set(counts) == {4, 2}
    assert found[1:4] == [((1, 1), (1, 4)), ((1, 2), (2, 2)), ((1, 4), (4, 1))]
    reshape = candidates(ops.Reshape(), [(4, 6, 5)], [None], {"shape": (24, 5)}, 8)
    assert reshape == [((1, 1, 1),), ((4, 1, 1),), ((2, 1, 1),)]   # no data parallel: ones first
    soft = candidates(ops.Softmax(), [(8, 4)], [None], {}, 8)
    assert all(s[0][1] == 1 for s in soft)


# ---- bad input -----------------------------------------------------------------------------
def test_contracting_dims_split_differently():
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match=rf"{mm.name}: strategies of relevant dimensions are not "
                                            r"equal.*4 ways.*2 ways"):
        plan(mm, ((2, 4), (2, 1)), [(16, 32), (32, 16)], [None, None], {}, 8)
    bmm = ops.BatchMatMul()
    with pytest.raises(ShardingError, match="batch dimension 0"):
        plan(bmm, ((2, 1, 1), (4, 1, 1)), [(4, 8, 6), (4, 6, 8)], [None, None], {}, 8)
    add = ops.Add()
    with pytest.raises(ShardingError, match=f"{add.name}: strategies of relevant dimensions"):
        plan(add, ((2, 4), (2,)), [(8, 16), (16,)], [None, None], {}, 8)


def test_split_that_does_not_divide():
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match=rf"{mm.name}: .*dimension 0 of tensor input 0 .*size 6.*4 equal"):
        plan(mm, ((4, 1), (1, 2)), [(6, 8), (8, 8)], [None, None], {}, 8)


def test_strategy_product_exceeds_or_does_not_divide_world():
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match=rf"{mm.name}: .*uses 16 devices.*only 8"):
        plan(mm, ((4, 2), (2, 2)), [(16, 32), (32, 16)], [None, None], {}, 8)
    with pytest.raises(ShardingError, match="uses 3 devices, which does not divide"):
        plan(ops.ReLU(), ((3, 1),), [(6, 4)], [None], {}, 8)


def test_wrong_number_of_inputs_or_dims():
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match=rf"{mm.name}: .*1 tuple.*2 tensor input"):
        plan(mm, ((2, 4),), [(16, 32), (32, 16)], [None, None], {}, 8)
    with pytest.raises(ShardingError, match="tuple 1 .*3 entries.*2 dimensions"):
        plan(mm, ((2, 4), (4, 1, 1)), [(16, 32), (32, 16)], [None, None], {}, 8)
    with pytest.raises(ShardingError, match="two 2-D tensors"):
        plan(mm, ((1, 1, 1), (1, 1)), [(2, 16, 32), (32, 16)], [None, None], {}, 8)


@pytest.mark.parametrize("bad", [((2, 4.0), (4, 1)), ((2, 0), (0, 1)), ((2, True), (True, 1)),
                                 (2, 4), "((2,4),(4,1))", ((2, -4), (-4, 1))])
def test_non_integer_entries(bad):
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match=rf"{mm.name}: in_strategy must be a tuple of tuples of "
                                            "positive split counts"):
        plan(mm, bad, [(16, 32), (32, 16)], [None, None], {}, 8)


def test_messages_match_primitive_shard():
    """Primitive.shard validates the same shape of strategy with the same wording."""
    with pytest.raises(ValueError, match="in_strategy must be a tuple of tuples of positive split counts"):
        ops.MatMul().shard(((2, 4.0), (4, 1)))


def test_out_strategy_checks():
    mm = ops.MatMul()
    with pytest.raises(ShardingError, match="out_strategy was given without in_strategy"):
        plan(mm, None, [(16, 32), (32, 16)], [None, None], {}, 8, out_strategy=((8, 1),))
    with pytest.raises(ShardingError, match=r"output strategy must be \(\(2, 1\),\) \(AllReduce\) or "
                                            r"\(\(8, 1\),\) \(ReduceScatter"):
        plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], [None, None], {}, 8, out_strategy=((4, 1),))
    with pytest.raises(ShardingError, match="cannot be reduce-scattered"):
        plan(mm, ((2, 4), (4, 1)), [(4, 32), (32, 16)], [None, None], {}, 8, out_strategy=((8, 1),))
    relu = ops.ReLU()
    assert plan(relu, ((8, 1),), [(8, 4)], [None], {}, 8, out_strategy=((8, 1),)).output_maps == ((1, 0),)
    with pytest.raises(ShardingError, match="only MatMul takes an out_strategy"):
        plan(relu, ((8, 1),), [(8, 4)], [None], {}, 8, out_strategy=((1, 8),))
    bmm = ops.BatchMatMul()
    with pytest.raises(ShardingError, match=r"must be \(\(2, 2, 1\),\) \(AllReduce\)$"):
        plan(bmm, ((2, 2, 2), (2, 2, 1)), [(4, 8, 6), (4, 6, 8)], [None, None], {}, 8,
             out_strategy=((2, 4, 1),))


def test_axis_must_not_be_split():
    sm = ops.Softmax()
    with pytest.raises(ShardingError, match=rf"{sm.name}: .*softmax axis 1 .*must not be split"):
        plan(sm, ((2, 4),), [(8, 16)], [None], {}, 8)
    loss = ops.SparseSoftmaxCrossEntropyWithLogits()
    with pytest.raises(ShardingError, match="class axis"):
        plan(loss, ((4, 2), (4,)), [(16, 10), (16,)], [None, None], {}, 8)
    with pytest.raises(ShardingError, match="relevant dimensions are not equal"):
        plan(loss, ((4, 1), (2,)), [(16, 10), (16,)], [None, None], {}, 8)
    with pytest.raises(ShardingError, match="concatenation axis"):
        plan(ops.Concat(1), ((1, 2), (1, 2)), [(8, 4), (8, 4)], [None, None], {"axis": 1}, 2)
    with pytest.raises(ShardingError, match="axis the index"):
        plan(ops.Argmax(axis=1), ((1, 2),), [(8, 4)], [None], {"axis": 1, "keepdims": False}, 2)


def test_unsupported_primitive_lists_supported_ones():
    conv = ops.Sort()
    with pytest.raises(ShardingError, match=rf"{conv.name}: .*no sharding rule.*MatMul"):
        rule_for(conv)
    assert {"MatMul", "BatchMatMul", "Add", "ReduceMean", "Softmax", "Reshape", "Gather",
            "EmbeddingLookup", "SparseSoftmaxCrossEntropyWithLogits", "MSE", "OneHot"} <= \
        set(supported_primitives())


def test_constant_array_input_is_rejected():
    with pytest.raises(ShardingError, match="constant array"):
        plan(ops.Add(), ((8, 1),), [(8, 4), None], [None, np.ones((8, 4))], {}, 8)


def test_bad_world():
    with pytest.raises(ShardingError, match="world size"):
        plan(ops.ReLU(), ((1,),), [(4,)], [None], {}, 0)


def test_shard_plan_is_frozen_and_comparable():
    p = plan(ops.ReLU(), ((2, 4),), [(8, 4)], [None], {}, 8)
    assert p == ShardPlan((2, 4), ((1, 0),), ((1, 0),))
    with pytest.raises(Exception):
        p.device_matrix = (8,)
    assert list(itertools.islice(p.local_inputs([1], {"a": 2}, (0, 0)), 2)) == [[1], {"a": 2}]
