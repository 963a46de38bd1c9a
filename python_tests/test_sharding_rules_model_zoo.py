"""Sharding rules of the model-zoo primitives: Tile, Unique, GatherNd, ArgMaxWithValue and
LayerNorm (and ScatterNd, which MindSpore gives no rule, running whole).

Each rule is checked three ways: every candidate strategy (and random valid ones), run on
local slices by ``test_sharding_rules``' simulator, reproduces the one-process outputs; the
strategies MindSpore refuses are refused with a message naming the primitive and what is
allowed; and a network of all of them trains on 2 and 4 thread ranks under
SEMI_AUTO_PARALLEL (strategies given) and AUTO_PARALLEL (propagated through them) exactly
like one process, with the bytes the communicators count equal to the layouts' prediction.
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import assemble_array
from minitorch_dist.parallel.sharding.rules import (
    ShardingError, candidates, default_strategy, plan, rule_for, supported_primitives)
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.parallel.sharding.sharded_call import ShardedCall
from minitorch_dist.parallel.sharding.traffic import predicted_step_bytes

from test_sharding_rules import captured_call, check_all, check_plan, rand


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


def ids(*shape, high, seed=0):
    return Tensor(np.random.default_rng(seed).integers(0, high, shape).astype(np.int32))


# ---- every candidate on local slices reproduces one process ----------------------------------
CASES = {
    "tile_copies": (ops.Tile, (rand(3, 8), (4, 1))),
    "tile_both": (ops.Tile, (rand(4, 6), (2, 2))),
    "tile_ones": (ops.Tile, (rand(8, 4), (1, 1))),
    "unique": (ops.Unique, (ids(8, high=5),)),
    "unique_2d": (ops.Unique, (ids(4, 2, high=3),)),
    "gather_nd": (ops.GatherNd, (rand(6, 5, 3), ids(8, 2, high=5))),
    "gather_nd_3d_indices": (ops.GatherNd, (rand(4, 8), ids(4, 2, 1, high=4))),
    "gather_nd_constant": (ops.GatherNd, (rand(6, 4), [[1], [5], [0], [2]])),
    "argmax_with_value": (lambda: ops.ArgMaxWithValue(axis=1), (rand(8, 6, 4),)),
    "argmax_with_value_keep": (lambda: ops.ArgMaxWithValue(axis=-1, keep_dims=True), (rand(8, 4),)),
    "layer_norm": (lambda: ops.LayerNorm(), (rand(8, 6), rand(6, seed=1), rand(6, seed=2))),
    "layer_norm_params_before_norm": (lambda: ops.LayerNorm(begin_norm_axis=2, begin_params_axis=1),
                                      (rand(4, 8, 6), rand(8, 6, seed=1), rand(8, 6, seed=2))),
    "layer_norm_last": (lambda: ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1),
                        (rand(4, 2, 8), rand(8, seed=1), rand(8, seed=2))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_candidate_equals_one_process(name):
    make, args = CASES[name]
    assert check_all(make, args, randoms=8) >= 2


def test_the_rules_are_registered():
    for name in ("Tile", "Unique", "GatherNd", "ArgMaxWithValue", "LayerNorm"):
        assert name in supported_primitives()
    with pytest.raises(ShardingError, match="ScatterNd has no sharding rule"):
        rule_for(ops.ScatterNd())


def _plan(prim, strategy, *args, world=4, **kwargs):
    full, inputs, attrs = captured_call(prim, *args, **kwargs)
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in inputs]
    p = plan(prim, strategy, shapes, inputs, attrs, world)
    check_plan(p, prim, inputs, attrs, full, world)
    return p, shapes, inputs, attrs


# ---- the plans, MindSpore's constraints ------------------------------------------------------
def test_tile_splits_copies_where_the_multiple_is_above_one():
    tile = ops.Tile()
    p, shapes, inputs, attrs = _plan(tile, ((2, 2),), rand(4, 6), (4, 1))
    assert p.input_maps == ((-1, 0),)            # x's tiled dim whole: each rank tiles 4/2 times
    assert p.output_maps == ((1, 0),)
    assert p.local_inputs(list(inputs), dict(attrs), (0, 0))[1] == {"multiples": (2, 1)}
    # the split must divide the multiple (4), not x's dimension (8)
    with pytest.raises(ShardingError, match=r"Tile\S*: in_strategy \(\(8, 1\),\): dimension 0 of "
                                            r"Tile's splittable sizes .* has size 4"):
        plan(tile, ((8, 1),), [(8, 6)], [None], {"multiples": (4, 1)}, 8)
    # MindSpore's strategy has one entry per multiple, also where multiples add axes
    p, shapes, inputs, attrs = _plan(tile, ((2, 1, 2),), rand(4, 2), (2, 1, 2))
    assert p.input_maps == ((1, -1),) and p.output_maps == ((2, 1, 0),)
    found = candidates(tile, shapes, inputs, attrs, 8)
    assert found[0] == ((1, 1, 1),)              # data parallel (8 on the leading 2) is not valid
    assert found[1] == ((1, 4, 2),) and ((2, 4, 1),) in found and len(found) > 5
    full = captured_call(tile, *inputs, **attrs)[0]
    for strategy in found:
        check_plan(plan(tile, strategy, shapes, inputs, attrs, 8), tile, inputs, attrs, full, 8)
    with pytest.raises(ShardingError, match="has 2 entries but Tile's splittable sizes"):
        plan(tile, ((2, 1),), [(4, 2)], [None], {"multiples": (2, 1, 2)}, 4)


def test_unique_only_repeats_the_calculation():
    u = ops.Unique()
    p, *_ = _plan(u, ((1,),), ids(8, high=3))
    assert p.input_maps == ((-1,),) and p.output_maps == ((-1,), (-1,)) and p.world == 4
    assert default_strategy(u, [(8,)], [None], {}, 4) == ((1,),)
    assert candidates(u, [(8,)], [None], {}, 4) == [((1,),)]
    with pytest.raises(ShardingError, match=r"Unique\S*: in_strategy \(\(2,\),\) splits the input; "
                                            r"Unique supports only .* \(\(1,\),\)"):
        plan(u, ((2,),), [(8,)], [None], {}, 4)


def test_gather_nd_splits_only_the_indices_leading_dims():
    g = ops.GatherNd()
    p, shapes, inputs, attrs = _plan(g, ((1, 1, 1), (2, 2, 1)), rand(4, 5, 3), ids(4, 2, 2, high=4))
    assert p.device_matrix == (2, 2, 1)
    assert p.input_maps == ((-1, -1, -1), (2, 1, 0)) and p.output_maps == ((2, 1, -1),)
    assert default_strategy(g, shapes, inputs, attrs, 4) == ((1, 1, 1), (4, 1, 1))
    assert all(s[0] == (1, 1, 1) and s[1][-1] == 1 for s in candidates(g, shapes, inputs, attrs, 4))
    with pytest.raises(ShardingError, match=r"GatherNd\S*: .* splits the input x; GatherNd's input can "
                                            r"not be split.*\(\(1, 1, 1\), \(4, 1, 1\)\)"):
        plan(g, ((2, 1, 1), (4, 1, 1)), shapes, inputs, attrs, 4)
    with pytest.raises(ShardingError, match=r"GatherNd\S*: .* splits the last dimension of the indices"):
        plan(g, ((1, 1, 1), (2, 1, 2)), shapes, inputs, attrs, 4)


def test_argmax_with_value_keeps_its_axis_whole():
    amv = ops.ArgMaxWithValue(axis=1)
    p, *_ = _plan(amv, ((4, 1, 1),), rand(8, 6, 4))
    assert p.output_maps == ((2, 0), (2, 0)) and p.forward_comm == ()
    with pytest.raises(ShardingError, match=r"ArgMaxWithValue\S*: in_strategy \(\(1, 2, 2\),\) splits "
                                            r"dimension 1, the axis ArgMaxWithValue takes the index "
                                            r"along; it must not be split \(e.g. \(\(1, 1, 2\),\)\)"):
        plan(amv, ((1, 2, 2),), [(8, 6, 4)], [None], {}, 4)


def test_layer_norm_splits_rows_and_gamma_beta_follow_x():
    ln = ops.LayerNorm(begin_norm_axis=2, begin_params_axis=1)
    args = (rand(4, 8, 6), rand(8, 6, seed=1), rand(8, 6, seed=2))
    p, shapes, inputs, attrs = _plan(ln, ((2, 2, 1), (2, 1), (2, 1)), *args)
    assert p.input_maps == ((2, 1, 0), (1, 0), (1, 0))
    assert p.output_maps == ((2, 1, 0), (2, 1, -1), (2, 1, -1))
    assert default_strategy(ln, shapes, inputs, attrs, 4) == ((4, 1, 1), (1, 1), (1, 1))
    with pytest.raises(ShardingError, match=r"LayerNorm\S*: .* splits x from begin_norm_axis 2 on; "
                                            r"LayerNorm's dimensions from begin_norm_axis on can "
                                            r"not be split"):
        plan(ln, ((1, 1, 2), (1, 2), (1, 2)), shapes, inputs, attrs, 4)
    with pytest.raises(ShardingError, match=r"LayerNorm\S*: .* LayerNorm's gamma and beta strategies "
                                            r"must equal x's from begin_params_axis 1 on, \(2, 1\)"):
        plan(ln, ((2, 2, 1), (1, 1), (1, 1)), shapes, inputs, attrs, 4)


# ---- a network of them on thread ranks ---------------------------------------------------------
B, D, H, T, E = 8, 4, 6, 16, 6          # rows per rank, features, outputs, table rows, emb width


class ZooNet(nn.Cell):
    """LayerNorm -> Tile -> MatMul, plus a GatherNd lookup and a Unique-then-Gather lookup,
    minus the row maxima (ArgMaxWithValue). ``strategies`` shards some of them."""

    def __init__(self, weights, strategies=None):
        super().__init__()
        w, gamma, beta, table, emb = weights
        self.w = ms.Parameter(Tensor(w.copy()), "w")
        self.gamma = ms.Parameter(Tensor(gamma.copy()), "gamma")
        self.beta = ms.Parameter(Tensor(beta.copy()), "beta")
        self.table = ms.Parameter(Tensor(table.copy()), "table")
        self.emb = ms.Parameter(Tensor(emb.copy()), "emb")
        self.ln, self.tile, self.mm = ops.LayerNorm(), ops.Tile(), ops.MatMul()
        self.gather_nd, self.unique, self.gather = ops.GatherNd(), ops.Unique(), ops.Gather()
        self.add, self.add2, self.sub = ops.Add(), ops.Add(), ops.Sub()
        self.amv = ops.ArgMaxWithValue(axis=1, keep_dims=True)
        for name, strategy in (strategies or {}).items():
            getattr(self, name).shard(strategy)

    def construct(self, x, where, keys):
        y = self.mm(self.tile(self.ln(x, self.gamma, self.beta)[0], (1, 2)), self.w)
        y = self.add(y, self.gather_nd(self.table, where))
        y = self.add2(y, self.gather(self.emb, self.unique(keys)[1], 0))
        return self.sub(y, self.amv(y)[1])


class LossNet(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net, self.loss = net, nn.MSELoss()

    def construct(self, x, where, keys, label):
        return self.loss(self.net(x, where, keys), label)


def _weights():
    rng = np.random.default_rng(7)
    shapes = [(2 * D, H), (D,), (D,), (T, H), (T, E)]
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in shapes]


def _data(world, steps=2):
    rng = np.random.default_rng(11)
    n = world * B
    return [(rng.standard_normal((n, D)).astype(np.float32),
             rng.integers(0, T, (n, 1)).astype(np.int32),
             rng.integers(0, 5, (n,)).astype(np.int32) * 3,
             rng.standard_normal((n, H)).astype(np.float32)) for _ in range(steps)]


def _one_process(data):
    net = ZooNet(_weights())
    step = nn.TrainOneStepCell(LossNet(net), nn.SGD(net.trainable_params(), 0.1))
    predicted = net(*map(Tensor, data[0][:3])).asnumpy()
    losses = [float(step(*map(Tensor, batch)).asnumpy()) for batch in data]
    return predicted, losses, {p.name: p.asnumpy() for p in net.trainable_params()}


def _program(net, rank):
    """This rank's program of the training step (the one with the loss; ``net`` alone, as
    called for the prediction, has a program of its own)."""
    ids_ = {id(p) for p in net.trainable_params()}
    found = [c.program for c in ShardedCall.instances() if c.program is not None
             and c.program.rank == rank and any(id(p) in ids_ for p in c.program.graph.params.values())
             and any(n.type_name == "MSE" for n in c.program.graph.nodes)]
    assert len(found) == 1, found
    return found[0]


def _run_sharded(world, data, mode, strategies):
    ms.set_auto_parallel_context(parallel_mode=mode)

    def rank(comm):
        with sharding_world(comm):
            rows = slice(comm.rank * B, (comm.rank + 1) * B)
            net = ZooNet(_weights(), strategies)
            step = nn.TrainOneStepCell(LossNet(net), nn.SGD(net.trainable_params(), 0.1))
            predicted = net(*(Tensor(a[rows]) for a in data[0][:3])).asnumpy()
            losses, counted, predicted_bytes = [], None, None
            for s, batch in enumerate(data):
                if s == 1:
                    program = _program(net, comm.rank)
                    comms = list({id(c): c for c in program.groups.communicators() + [comm]}.values())
                    for c in comms:
                        c.reset_stats()
                losses.append(float(step(*(Tensor(a[rows]) for a in batch)).asnumpy()))
                if s == 1:
                    counted = sum(c.comm_stats()["bytes_sent"] for c in comms)
                    predicted_bytes = predicted_step_bytes(program)["total"]
            nodes = {n.type_name: n.strategy for n in program.graph.nodes}
            params = {p.name: (p.asnumpy(), p.sharding_layout) for p in net.trainable_params()}
            return predicted, losses, counted, predicted_bytes, nodes, params

    return run_ranks(world, rank, timeout=120)


def _check_equal(results, reference):
    want_out, want_losses, want_params = reference
    np.testing.assert_allclose(np.concatenate([r[0] for r in results]), want_out, rtol=1e-6, atol=1e-6)
    for _, losses, counted, predicted, _, _ in results:
        np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
        assert counted == predicted and counted > 0
    for name, want in want_params.items():
        merged = assemble_array([r[5][name][0] for r in results], results[0][5][name][1])
        np.testing.assert_allclose(merged, want, rtol=1e-6, atol=1e-6, err_msg=name)
        short = name.rsplit(".", 1)[-1]       # "net.w": LossNet holds the network as "net"
        assert not np.allclose(want, _weights()[["w", "gamma", "beta", "table", "emb"].index(short)])


@pytest.mark.parametrize("world", [2, 4])
def test_semi_auto_network_equals_one_process(world):
    data = _data(world)
    strategies = {"ln": ((world, 1), (1,), (1,)), "tile": ((world // 2, 2),),
                  "gather_nd": ((1, 1), (world, 1)), "unique": ((1,),),
                  "amv": ((world, 1),), "mm": ((1, 2), (2, 1))}
    results = _run_sharded(world, data, "semi_auto_parallel", strategies)
    _check_equal(results, _one_process(data))
    assert results[0][4]["Tile"] == ((world // 2, 2),)
    assert results[0][5]["net.w"][0].shape == (D, H)             # MatMul's contraction split: half of w


def test_propagation_goes_through_the_new_rules():
    """Only the MatMul is annotated (rows split 4 ways): sharding propagation gives LayerNorm,
    Tile, GatherNd and ArgMaxWithValue strategies of their own rules, splitting the rows."""
    world = 4
    data = _data(world)
    results = _run_sharded(world, data, "auto_parallel", {"mm": ((4, 1), (1, 1))})
    _check_equal(results, _one_process(data))
    nodes = results[0][4]
    assert nodes["LayerNorm"] == ((4, 1), (1,), (1,))
    assert nodes["Tile"] == ((4, 1),)
    assert nodes["GatherNd"] == ((1, 1), (4, 1))
    assert nodes["ArgMaxWithValue"] == ((4, 1),)
    assert nodes["Unique"] == ((1,),)


def test_a_refused_strategy_stops_the_sharded_run_with_its_message():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    data = _data(2)

    def rank(comm):
        with sharding_world(comm):
            net = ZooNet(_weights(), {"ln": ((1, 2), (2,), (2,))})
            net(*(Tensor(a[:B]) for a in data[0][:3]))

    with pytest.raises(Exception, match=r"ln: in_strategy \(\(1, 2\), \(2,\), \(2,\)\) splits x from "
                                        r"begin_norm_axis 1 on; LayerNorm's dimensions from "
                                        r"begin_norm_axis on can not be split \(e.g. x \(1, 1\)\)"):
        run_ranks(2, rank, timeout=60)


def test_scatter_nd_runs_whole_and_refuses_a_split():
    """MindSpore has no rule for ScatterNd: it runs whole on every rank (its inputs gathered)
    and equals one process; a strategy that splits it is refused."""
    rng = np.random.default_rng(5)
    where = rng.integers(0, 6, (8, 1)).astype(np.int32)
    updates = rng.standard_normal((8, 3)).astype(np.float32)

    class Net(nn.Cell):
        def __init__(self, strategy=None):
            super().__init__()
            self.scatter, self.relu = ops.ScatterNd(), ops.ReLU()
            if strategy:
                self.scatter.shard(strategy)

        def construct(self, w, u):
            return self.relu(self.scatter(w, self.relu(u), (6, 3)))

    want = Net()(Tensor(where), Tensor(updates)).asnumpy()
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)

    def rank(comm, strategy=None):
        with sharding_world(comm):
            return Net(strategy)(Tensor(where), Tensor(updates)).asnumpy()

    for got in run_ranks(2, rank, timeout=60):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(Exception, match=r"ScatterNd has no sharding rule, so it can only run unsplit"):
        run_ranks(2, lambda comm: rank(comm, ((2, 1), (2, 1))), timeout=60)


def test_unique_values_of_data_dependent_length_stay_whole():
    """The trace sees zeros (one unique value); the real count differs. Unannotated readers
    of the values keep them whole, so the run is still one process's."""
    keys = np.array([3, 1, 3, 7, 1, 9, 9, 2], np.int32)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.unique, self.sum, self.cast = ops.Unique(), ops.ReduceSum(), ops.Cast()

        def construct(self, k):
            values, index = self.unique(k)
            return self.sum(self.cast(values, ms.float32)), index

    want_sum, want_index = (t.asnumpy() for t in Net()(Tensor(keys)))
    assert want_sum == 22.0
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            return [t.asnumpy() for t in Net()(Tensor(keys[comm.rank * 4:(comm.rank + 1) * 4]))]

    results = run_ranks(2, rank, timeout=60)
    assert [r[0] for r in results] == [want_sum, want_sum]
    np.testing.assert_array_equal(np.concatenate([r[1] for r in results]), want_index)


def test_tile_adding_a_leading_axis_trains_like_one_process():
    """MindSpore's Tile strategy has one entry per multiple, also where ``multiples`` adds an
    axis: ((2, 1, 2),) splits the new axis' copies and the last axis' copies of w."""
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    y = rng.standard_normal((3, 8)).astype(np.float32)

    class Net(nn.Cell):
        def __init__(self, strategy=None):
            super().__init__()
            self.w = ms.Parameter(Tensor(w0.copy()), "w")
            self.tile, self.mul, self.sum = ops.Tile(), ops.Mul(), ops.ReduceSum()
            if strategy:
                self.tile.shard(strategy)

        def construct(self, a):
            return self.sum(self.mul(self.tile(self.w, (2, 1, 2)), a), 0)

    def train(net):
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1))
        return [float(step(Tensor(x), Tensor(y)).asnumpy()) for _ in range(2)], net.w.asnumpy()

    want_losses, want_w = train(Net())
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)

    def rank(comm):
        with sharding_world(comm):
            return train(Net(((2, 1, 2),)))

    for losses, w in run_ranks(4, rank, timeout=60):
        np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
        np.testing.assert_allclose(w, want_w, rtol=1e-6, atol=1e-6)
    assert not np.allclose(want_w, w0)
