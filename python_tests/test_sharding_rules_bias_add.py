"""BiasAdd's sharding rule: the bias is split like x's channel axis, no communication.

Upstream Wide&Deep shards its first layer's bias add ``((n, 1), (1,))`` under
AUTO_PARALLEL; before this rule the program stopped with "BiasAdd has no sharding rule".
"""
import pytest

from minitorch_dist import ops
from minitorch_dist.parallel.sharding.rules import ShardingError, plan, supported_primitives

from test_sharding_rules import check_all, rand

CASES = {
    "2d": (ops.BiasAdd, (rand(8, 6), rand(6, seed=1))),
    "nchw": (ops.BiasAdd, (rand(4, 6, 2, 2), rand(6, seed=1))),
    "nhwc": (lambda: ops.BiasAdd(data_format="NHWC"), (rand(4, 2, 2, 6), rand(6, seed=1))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_candidate_equals_one_process(name):
    make, args = CASES[name]
    assert check_all(make, args, randoms=8) >= 2


def test_plan_maps_the_bias_to_the_channel_axis():
    assert "BiasAdd" in supported_primitives()
    p = plan(ops.BiasAdd(), ((2, 1), (1,)), [(8, 6), (6,)], [None, None], {}, 2)
    assert p.input_maps == ((1, 0), (0,)) and p.forward_comm == ()
    p = plan(ops.BiasAdd(), ((1, 2, 1, 1), (2,)), [(4, 6, 2, 2), (6,)], [None, None], {}, 2)
    assert p.input_maps[1] == (p.input_maps[0][1],)


def test_a_bias_split_unlike_the_channels_is_refused():
    with pytest.raises(ShardingError, match=r"bias must be split like x's channel axis 1"):
        plan(ops.BiasAdd(), ((1, 2), (1,)), [(8, 6), (6,)], [None, None], {}, 2)
    with pytest.raises(ShardingError, match="1-D bias"):
        plan(ops.BiasAdd(), ((1, 1), (1, 1)), [(8, 6), (6, 1)], [None, None], {}, 1)
