"""``mindspore.parallel.Layout``: named device axes as strategies (issue 26 item 2)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding import assemble_array
from minitorch_dist.parallel.sharding.layout_api import Layout, is_layout_strategy
from minitorch_dist.parallel.sharding.rules import ShardingError, plan
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


def test_a_called_layout_gives_tensor_map_numbers_from_the_right_and_split_counts():
    layout = Layout((2, 2, 2), ("dp", "sp", "mp"))
    x = layout(("dp", "sp"), "None", "mp")
    assert x.to_dict() == {"device_matrix": (2, 2, 2), "tensor_map": ((2, 1), -1, 0),
                           "interleaved_parallel": False, "alias_name": ("dp", "sp", "mp")}
    assert x.split_counts() == (4, 1, 2) and tuple(x) == (4, 1, 2)
    assert x == layout(("dp", "sp"), "None", "mp") and x != layout("dp", "None", "mp")
    stored = ops.MatMul().shard((layout("dp", "mp"), layout("mp", "None"))).in_strategy
    assert is_layout_strategy(stored) and stored == ((2, 2), (2, 1))


@pytest.mark.parametrize("make,message", [
    (lambda: Layout((2, 2), ("dp", "dp")), "repeated"),
    (lambda: Layout((2, 2), ("dp", "None")), "reserved"),
    (lambda: Layout((2, 2), ("dp",)), "one name per axis"),
    (lambda: Layout((2, 2), ("dp", "mp"))("dp", "tp"), "'tp'.*not an alias"),
    (lambda: Layout((2, 2), ("dp", "mp"))("dp", ("mp", "dp")), "'dp' splits both"),
    (lambda: Layout((2, 2), ("dp", "mp"), rank_list=[3, 2, 1, 0]), "rank_list"),
    (lambda: plan(ops.MatMul(), (Layout((2,), ("dp",))("dp", "None"), (1, 1)),
                  [(2, 2), (2, 2)], [None, None], {}, 2), "mixes"),
])
def test_bad_layouts_are_refused_clearly(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_layout_plans_multi_axis_splits_and_the_reduce_scatter_output():
    lay = Layout((2, 4), ("x", "y"))
    p = plan(ops.ReLU(), (lay("None", ("y", "x")),), [(4, 16)], [None], {}, 16)
    assert p.device_matrix == (2, 2, 4) and p.input_maps == ((-1, (0, 1)),)
    p = plan(ops.MatMul(), (lay("None", "x"), lay("x", "y")), [(8, 16), (16, 8)], [None, None],
             {}, 8, out_strategy=(lay("x", "y"),))
    assert p.output_maps == ((1, 0),) and p.forward_comm[0].kind == "reduce_scatter"
    with pytest.raises(ShardingError, match="does not fit"):
        plan(ops.MatMul(), (lay("None", "x"), lay("x", "y")), [(8, 16), (16, 8)], [None, None],
             {}, 8, out_strategy=(lay("y", "x"),))


def test_unequal_contraction_splits_need_enable_nd_tp():
    lay = Layout((2, 4), ("x", "y"))
    args = ([(8, 16), (16, 8)], [None, None], {}, 8)
    strategy = (lay("None", ("x", "y")), lay("x", "y"))
    with pytest.raises(ShardingError, match="enable_nd_tp"):
        plan(ops.MatMul(), strategy, *args)
    mm = ops.MatMul()
    mm.add_prim_attr("enable_nd_tp", True)
    p = plan(mm, strategy, *args)
    assert p.input_maps == ((-1, 1), (1, 0)) and p.output_maps == ((-1, 0),)


class TwoDimTP(nn.Cell):
    """The high-dimension tensor-parallel tutorial's network, small."""

    def __init__(self, layouts=True):
        super().__init__()
        rng = np.random.default_rng(7)
        self.w1 = ms.Parameter(ms.Tensor(rng.standard_normal((16, 32)).astype(np.float32) * .3), "w1")
        self.w2 = ms.Parameter(ms.Tensor(rng.standard_normal((32, 16)).astype(np.float32) * .3), "w2")
        self.matmul1, self.relu, self.matmul2 = ops.MatMul(), ops.ReLU(), ops.MatMul()
        if layouts:
            lay = Layout((2, 4), ("x", "y"))
            self.matmul1.add_prim_attr("enable_nd_tp", True)
            self.matmul1.shard(in_strategy=(lay("None", ("x", "y")), lay("x", "y")))
            self.relu.shard(in_strategy=(lay("None", ("y", "x")),))
            self.matmul2.add_prim_attr("enable_nd_tp", True)
            self.matmul2.shard(in_strategy=(lay("None", ("y", "x")), lay("y", "x")))

    def construct(self, x):
        return self.matmul2(self.relu(self.matmul1(x, self.w1)), self.w2)


def _train(net, x, y, group=None, sharded=False, steps=3):
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    cell = nn.WithLossCell(net, nn.MSELoss())
    if sharded:
        cell = ShardedCell(cell, opt, group=group)
    step = nn.TrainOneStepCell(cell, opt)
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for _ in range(steps)], net


def test_two_dim_tensor_parallel_trains_like_one_process_with_sliced_weights():
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 16), np.float32), rng.random((8, 16), np.float32)
    reference, ref_net = _train(TwoDimTP(layouts=False), x, y)
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)

    def rank(comm):
        losses, net = _train(TwoDimTP(), x, y, group=comm, sharded=True)
        return losses, {p.name: (p.asnumpy(), p.sharding_layout) for p in net.trainable_params()}

    results = run_ranks(8, rank)
    for losses, _ in results:
        np.testing.assert_allclose(losses, reference, rtol=1e-5)
        assert losses == results[0][0]
    for p in ref_net.trainable_params():
        parts = [results[r][1][p.name][0] for r in range(8)]
        assert parts[0].size * 8 == p.size                     # one eighth of each weight
        full = assemble_array(parts, results[0][1][p.name][1])
        np.testing.assert_allclose(full, p.asnumpy(), rtol=1e-5, atol=1e-6)


def test_a_bad_layout_strategy_fails_the_same_on_every_rank():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
    x = np.ones((8, 16), np.float32)

    def rank(comm):
        net = TwoDimTP(layouts=False)
        lay = Layout((2, 4), ("x", "y"))
        net.matmul1.shard(in_strategy=(lay("None", ("x", "y")), lay("x", "y")))   # no nd_tp
        with pytest.raises(ShardingError, match="enable_nd_tp") as err:
            ShardedCell(net, group=comm)(ms.Tensor(x))
        return str(err.value)

    assert len(set(run_ranks(8, rank))) == 1
