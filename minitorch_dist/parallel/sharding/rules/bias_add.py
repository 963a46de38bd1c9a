"""BiasAdd: ``x + bias`` along x's channel axis (axis 1 for NCHW, the last for NHWC or 2-D x).

The work dimensions are x's; the bias is a slice of the channel axis, so its one entry in
the strategy must equal x's channel split (MindSpore: ``((a, c, ...), (c,))``). No
communication: each rank adds its slice of the bias to its slice of x. Wide&Deep's
column-sliced first layer uses ``bias_add.shard(((n, 1), (1,)))``.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.BiasAdd(), ((2, 4), (4,)), [(8, 16), (16,)], [None, None], {}, 8)
>>> p.device_matrix, p.input_maps, p.output_maps
((2, 4), ((1, 0), (0,)), ((1, 0),))
"""
from ....ops.arithmetic import BiasAdd
from .base import Grid, Rule, ShardPlan, register

__all__ = ["BiasAddRule"]


class BiasAddRule(Rule):
    types = (BiasAdd,)

    def check_call(self, call):
        call.need_tensors(2, "x, bias")
        x, bias = call.shapes
        if len(x) < 2 or len(bias) != 1:
            raise call.error(f"expects x with at least 2 dimensions and a 1-D bias, got shapes "
                             f"{x} and {bias}")

    def _channel(self, call):
        x = call.shapes[0]
        return len(x) - 1 if call.prim.data_format == "NHWC" or len(x) == 2 else 1

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        return (tuple(splits), (splits[self._channel(call)],))

    def build(self, call, strategy, world, out_strategy):
        x_split, (b_split,) = strategy[0], strategy[1]
        channel = self._channel(call)
        if b_split != x_split[channel]:
            raise call.error(f"the bias must be split like x's channel axis {channel}: in_strategy "
                             f"{strategy} splits x's channels {x_split[channel]} ways and the bias "
                             f"{b_split} ways (write ({x_split}, ({x_split[channel]},)))")
        grid = Grid(call, x_split, world, strategy)
        x_map = tuple(grid.axis(d) for d in range(len(x_split)))
        maps = {call.positions[0]: x_map, call.positions[1]: (x_map[channel],)}
        return ShardPlan(grid.device_matrix,
                         tuple(maps.get(i) for i in range(len(call.in_shapes))), (x_map,))


register(BiasAddRule())
