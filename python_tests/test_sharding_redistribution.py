"""Redistribution between tensor layouts (``parallel/sharding/redistribution.py``).

* Every pair of layouts of a 2-D tensor over the device matrices ``[2, 4]``, ``[8]`` and
  ``[4, 2]`` (partial states included), and of a 3-D tensor over ``[2, 2, 2]``, is planned
  and simulated in NumPy: each rank must end with exactly its ``dst`` block.
* The planner picks the cheap plans (slice before gather, AllToAll, ReduceScatter) and
  ``plan_cost`` equals what the communicators count.
* A representative subset runs for real on 8 and 4 thread ranks, forward and backward: the
  gradient of a redistribution is the reverse redistribution of the full-array gradient.
"""
import itertools

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import (GroupCache, LayoutError, Step, TensorLayout,
                                              assemble_array, plan_cost, plan_redistribution,
                                              redistribute, simulate_redistribution)

L = TensorLayout


def layouts_of(device_matrix, shape, partial=True):
    """Every layout of ``shape`` over ``device_matrix``: each dimension unsplit, on one axis or
    on an ordered tuple of axes, each unused axis optionally partial."""
    axes = range(len(device_matrix))
    entries = [-1] + [p for k in range(1, len(device_matrix) + 1)
                      for p in itertools.permutations(axes, k)]
    found = []
    for combo in itertools.product(entries, repeat=len(shape)):
        used = [a for e in combo if e != -1 for a in e]
        if len(used) != len(set(used)):
            continue
        free = [a for a in axes if a not in used]
        choices = [()] + ([c for k in range(1, len(free) + 1)
                           for c in itertools.combinations(free, k)] if partial else [])
        for part in choices:
            try:
                found.append(L(device_matrix, combo, shape,
                               partial=part))
            except LayoutError:
                pass                      # a split that does not divide the dimension
    return found


def random_locals(full, layout, rng):
    """Every rank's block of ``full``; along partial axes a random split into addends (the
    same on copies of a block)."""
    out, addends = [], {}
    for r in range(layout.num_devices):
        block = full[layout.slice_for(r)].copy()
        if layout.partial:
            where = tuple((s.start, s.stop) for s in layout.slice_for(r))
            mine = tuple(layout.coordinate(r, a) for a in layout.partial)
            others = {}
            for g in layout.group_over(layout.partial, r):
                k = tuple(layout.coordinate(g, a) for a in layout.partial)
                if any(k):
                    others[k] = addends.setdefault((where, k), rng.standard_normal(block.shape))
            block = others[mine] if any(mine) else block - sum(others.values())
        out.append(block)
    return out


def check_pair(src, dst, rng):
    full = rng.standard_normal(src.shape)
    plan = plan_redistribution(src, dst)
    result = simulate_redistribution(plan, random_locals(full, src, rng), src, dst)
    if dst.partial:
        np.testing.assert_allclose(assemble_array(result, dst), full, atol=1e-12)
    else:
        for r, block in enumerate(result):
            np.testing.assert_allclose(block, full[dst.slice_for(r)], atol=1e-12,
                                       err_msg=f"rank {r}: {src} -> {dst}: "
                                               f"{[str(s) for s in plan]}")
    return plan


# ---- every pair, simulated -----------------------------------------------------------------------
def test_every_pair_over_2x4_and_8_round_trips():
    shape = (8, 16)
    layouts = layouts_of((2, 4), shape) + layouts_of((8,), shape)
    assert len(layouts) == 18 + 4
    rng = np.random.default_rng(0)
    for src in layouts:
        for dst in layouts:
            plan = check_pair(src, dst, rng)
            if src == dst:
                assert plan == []


def test_pairs_between_2x4_and_4x2_matrices():
    shape = (8, 16)
    rng = np.random.default_rng(1)
    a, b = layouts_of((2, 4), shape, partial=False), layouts_of((4, 2), shape)
    for src, dst in itertools.chain(itertools.product(a, b), itertools.product(b, a)):
        check_pair(src, dst, rng)


def test_3d_tensor_over_2x2x2():
    shape = (4, 2, 8)
    layouts = [lay for lay in layouts_of((2, 2, 2), shape)
               if all(not isinstance(e, tuple) or len(e) <= 2 for e in lay.tensor_map)]
    rng = np.random.default_rng(2)
    picks = rng.choice(len(layouts), size=(300, 2))
    for i, j in picks:
        check_pair(layouts[i], layouts[j], rng)
    # and against the other factorisations of 8 devices
    for other in layouts_of((8,), shape)[:6] + layouts_of((4, 2), shape)[:10]:
        check_pair(layouts[int(rng.integers(len(layouts)))], other, rng)
        check_pair(other, layouts[int(rng.integers(len(layouts)))], rng)


def test_matrices_without_common_refinement_go_through_replicated():
    src, dst = L((2, 3), (1, 0), (6, 6)), L((3, 2), (0, 1), (6, 6), partial=())
    plan = check_pair(src, dst, np.random.default_rng(3))
    assert [s.kind for s in plan] == ["all_gather", "all_gather", "slice", "slice"]
    assert plan[0].device_matrix == (2, 3) and plan[-1].device_matrix == (3, 2)
    check_pair(L((2, 3), (-1, -1), (6, 6), partial=(1, 0)), L((3, 2), (1, -1), (6, 6)),
               np.random.default_rng(4))
    check_pair(L((2, 3), (1, -1), (6, 6)), L((3, 2), (-1, -1), (6, 6), partial=(0,)),
               np.random.default_rng(5))


# ---- which plan ----------------------------------------------------------------------------------
def kinds(src, dst):
    return [s.kind for s in plan_redistribution(src, dst)]


def test_seed_example_matmul_then_relu():
    """MatMul ((2, 4), (4, 1)) then ReLU ((2, 4),) on 8 devices (seed 002): after the
    AllReduce the output is split 2-way on rows and copied over the "4"; ReLU's layout needs
    only a local StridedSlice of the columns, (8, 16) -> (8, 4) at column 4 * (rank % 4)."""
    after = L((2, 4, 1), (2, 0), (16, 16))
    relu = L.from_strategy((2, 4), (16, 16), world=8)
    plan = plan_redistribution(after, relu)
    assert [str(s) for s in plan] == ["StridedSlice(dim 1, axes=[0], dev=[2,4]): (8, 16) -> (8, 4)"]
    assert plan_cost(plan) == 0
    # still partial (before the AllReduce): the cheaper ReduceScatter does both at once
    partial = after.replace(partial=(1,))
    plan = plan_redistribution(partial, relu)
    assert [s.kind for s in plan] == ["reduce_scatter"]
    assert plan_cost(plan, 4) == 8 * 16 * 4 * 3 // 4
    # and to a replicated consumer, one AllReduce and one AllGather
    assert kinds(partial, L.replicated((16, 16), 8)) == ["all_reduce", "all_gather"]


def test_planner_prefers_cheap_plans():
    # slice before gather: cut the columns locally, then gather the (smaller) rows
    plan = plan_redistribution(L((2, 4), (1, -1), (16, 16)), L((2, 4), (-1, 0), (16, 16)))
    assert [s.kind for s in plan] == ["slice", "all_gather"]
    assert plan_cost(plan, 4) == 8 * 4 * 4
    # AllToAll rather than AllGather + slice
    plan = plan_redistribution(L((2, 4), (0, -1), (16, 16)), L((2, 4), (-1, 0), (16, 16)))
    assert [s.kind for s in plan] == ["all_to_all"]
    assert plan_cost(plan, 4) == 4 * 16 * 4 * 3 // 4
    # ReduceScatter rather than AllReduce + slice; one AllReduce over two axes at once
    assert kinds(L((2, 4), (-1, -1), (16, 16), partial=(0,)), L((2, 4), (0, -1), (16, 16))) == \
        ["reduce_scatter"]
    assert kinds(L((2, 4), (-1, -1), (16, 16), partial=(0, 1)), L.replicated((16, 16), 8)) == \
        ["all_reduce"]
    # a dimension split over two axes is gathered by one collective over both
    plan = plan_redistribution(L((2, 4), ((1, 0), -1), (16, 16)), L.replicated((16, 16), 8))
    assert [(s.kind, s.axes) for s in plan] == [("all_gather", (1, 0))]
    # equivalent layouts over different matrices need nothing
    assert plan_redistribution(L((8,), (0, -1), (16, 4)), L((2, 4), ((1, 0), -1), (16, 4))) == []
    assert plan_redistribution(L((2, 4, 1), (1, 2), (8, 2)), L((2, 4), (0, 1), (8, 2))) == []
    # reduce-scatter first, so that the gather moves a quarter of the block
    plan = plan_redistribution(L((4, 2), (0, -1), (8, 16), partial=(1,)),
                               L((4, 2), (-1, 1), (8, 16), partial=(0,)))
    assert [s.kind for s in plan] == ["reduce_scatter", "all_gather", "mask"]
    assert plan_cost(plan, 4) == 4 * 16 * 4 * 3 // 4 + 4 * 4 * 4
    # to a partial layout: a local mask, no communication
    assert kinds(L.replicated((4, 4), 8), L((8,), (-1, -1), (4, 4), partial=(0,))) == ["mask"]


def test_steps_over_different_matrices_are_shown_on_the_common_refinement():
    plan = plan_redistribution(L((2, 4), (1, 0), (16, 16)), L((4, 2), (1, 0), (16, 16)))
    assert all(s.device_matrix == (2, 2, 2) for s in plan)
    assert plan_cost(plan, 4) == 8 * 4 * 4       # one AllGather of the columns over 4 ranks


def test_scalars_and_empty_tensors():
    src, dst = L((4,), (), (), partial=(0,)), L.replicated((), 4)
    plan = plan_redistribution(src, dst)
    assert [str(s) for s in plan] == ["AllReduce(sum, axes=[0], dev=[4]): () -> ()"]
    result = simulate_redistribution(plan, [np.array(1.0)] * 4, src, dst)
    assert [r.shape for r in result] == [()] * 4 and [float(r) for r in result] == [4.0] * 4
    plan = plan_redistribution(L((4,), (0, -1), (0, 4)), L.replicated((0, 4), 4))
    assert [s.kind for s in plan] == ["all_gather"] and plan_cost(plan) == 0


def test_plan_cost_sums_steps():
    step = Step("all_to_all", (1,), (2, 4), (8, 4), dim=0, to_dim=1)
    assert step.group_size == 2 and step.out_shape == (16, 2)
    assert step.bytes_sent(2) == 8 * 4 * 2 // 2
    assert Step("slice", (1, 0), (2, 4), (16, 8), dim=0).out_shape == (2, 8)
    gather = Step("all_gather", (0,), (2, 4), (3, 5), dim=1)
    assert plan_cost([step, gather], 2) == 32 + 30
    assert str(gather) == "AllGather(dim 1, axes=[0], dev=[2,4]): (3, 5) -> (3, 20)"


def test_bad_pairs_are_rejected():
    with pytest.raises(LayoutError, match="same full shape"):
        plan_redistribution(L((2,), (0,), (4,)), L((2,), (0,), (6,)))
    with pytest.raises(LayoutError, match="spans 2, .* spans 4"):
        plan_redistribution(L((2,), (0,), (4,)), L((4,), (0,), (4,)))
    with pytest.raises(TypeError, match="two TensorLayouts"):
        plan_redistribution(L((2,), (0,), (4,)), "layout")


def test_simulator_checks_shapes():
    src = L((2,), (0,), (4,))
    with pytest.raises(ValueError, match="1 arrays for the 2 devices"):
        simulate_redistribution([], [np.zeros(2)], src)
    with pytest.raises(ValueError, match="rank 1 holds"):
        simulate_redistribution([], [np.zeros(2), np.zeros(3)], src)


# ---- real execution on thread ranks, forward and backward -----------------------------------
def run_redistribution(src, dst, seed=0):
    """Every rank redistributes its block of a random full array, with a different weight
    ``w_r`` on its output (loss = sum over ranks of sum(w_r * y_r)); returns the outputs, the
    input gradients, the bytes counted in the forward pass, the full array and the weights."""
    rng = np.random.default_rng(seed)
    full = rng.standard_normal(src.shape)
    inputs = random_locals(full, src, rng)
    weights = [rng.standard_normal(dst.local_shape()) for _ in range(dst.num_devices)]

    def body(comm):
        cache = GroupCache(comm.size, comm.rank, comm)
        x = ms.Tensor(inputs[comm.rank], requires_grad=True)
        for c in cache.communicators():
            c.reset_stats()
        comm.reset_stats()
        y = redistribute(x, src, dst, comm.rank, cache)
        sent = comm.comm_stats()["bytes_sent"] + sum(
            c.comm_stats()["bytes_sent"] for c in cache.communicators() if c is not comm)
        (y * ms.Tensor(weights[comm.rank])).sum().backward()
        grad = x.grad.asnumpy() if x.grad is not None else np.zeros_like(inputs[comm.rank])
        return y.asnumpy(), grad, sent

    results = run_ranks(src.num_devices, body, timeout=60)
    return results, full, weights


def full_gradient(dst, weights):
    """dL/dX of L = sum_r sum(w_r * (dst block of X on rank r)): every rank's weight added
    into its block, copies and partial members alike."""
    grad = np.zeros(dst.shape)
    for r, w in enumerate(weights):
        if dst.partial and any(dst.coordinate(r, a) for a in dst.partial):
            continue                         # a masked rank's output does not depend on X
        grad[dst.slice_for(r)] += w
    return grad


CASES_8 = [
    (L((2, 4, 1), (2, 0), (16, 16), partial=(1,)), L.from_strategy((2, 4), (16, 16), world=8)),
    (L((2, 4, 1), (2, 0), (16, 16)), L.from_strategy((4, 1), (16, 16), world=8)),
    (L((2, 4), (1, 0), (16, 16)), L((2, 4), (0, 1), (16, 16))),
    (L((2, 4), (1, -1), (16, 16), partial=(0,)), L((2, 4), (0, 1), (16, 16))),
    (L((2, 4), (1, 0), (16, 16)), L((8,), (0, -1), (16, 16))),
    (L((2, 4), (1, 0), (16, 16)), L((4, 2), (1, 0), (16, 16))),
    (L((8,), (-1, -1), (16, 16), partial=(0,)), L((2, 4), (-1, 1), (16, 16))),
    (L((2, 4), ((1, 0), -1), (16, 16)), L.replicated((16, 16), 8)),
    (L.replicated((16, 16), 8), L((2, 4), (0, -1), (16, 16), partial=(1,))),
]
CASES_4 = [
    (L((2, 2), (1, -1, 0), (4, 6, 4)), L((2, 2), (-1, 0, 1), (4, 6, 4))),
    (L((2, 2), (-1, -1, 0), (4, 6, 4), partial=(1,)), L((4,), (0, -1, -1), (4, 6, 4))),
    (L((4,), (-1, -1, 0), (4, 6, 4)), L((2, 2), ((0, 1), -1, -1), (4, 6, 4))),
]


@pytest.mark.parametrize("src, dst", CASES_8 + CASES_4, ids=lambda lay: str(lay))
def test_execution_forward_backward_and_bytes(src, dst):
    results, full, weights = run_redistribution(src, dst)
    outputs = [y for y, _, _ in results]
    if dst.partial:
        np.testing.assert_allclose(assemble_array(outputs, dst), full, atol=1e-12)
    else:
        for r, y in enumerate(outputs):
            np.testing.assert_allclose(y, full[dst.slice_for(r)], atol=1e-12)
    # bytes: what plan_cost predicts (float64), on every rank
    cost = plan_cost(plan_redistribution(src, dst), 8)
    assert [sent for _, _, sent in results] == [cost] * src.num_devices
    # backward: summed over the copies of each src block, the input gradients are the full
    # gradient's src blocks (each partial addend gets the whole block's gradient)
    grad = full_gradient(dst, weights)
    grads = [g for _, g, _ in results]
    copies = src.replicated_axes()
    for r in range(src.num_devices):
        if any(src.coordinate(r, a) for a in copies):
            continue
        total = sum(grads[g] for g in src.group_over(copies, r))
        np.testing.assert_allclose(total, grad[src.slice_for(r)], atol=1e-12,
                                   err_msg=f"rank {r}")


def test_backward_is_the_reverse_redistribution():
    """For layouts without copies the input gradient is exactly the reverse redistribution
    of the output gradient: gather <-> scatter, AllToAll <-> AllToAll."""
    src, dst = L((2, 4), (1, 0), (16, 8)), L((8,), (-1, 0), (16, 8))
    results, _, weights = run_redistribution(src, dst, seed=7)
    back = simulate_redistribution(plan_redistribution(dst, src), weights, dst, src)
    for r, (_, g, _) in enumerate(results):
        np.testing.assert_allclose(g, back[r], atol=1e-12)


def test_redistribute_checks_the_local_shape():
    src, dst = L((2,), (0,), (4,)), L((2,), (-1,), (4,))

    def body(comm):
        with pytest.raises(ValueError, match="holds shape \\(3,\\), but"):
            redistribute(ms.Tensor(np.zeros(3)), src, dst, comm.rank,
                         GroupCache(2, comm.rank, comm))
        return True
    assert run_ranks(2, body) == [True, True]
