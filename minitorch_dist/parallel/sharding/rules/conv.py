"""Conv2D and 2-D pooling on slices: the batch (and a pooling's channels) split, nothing else.

MindSpore's ``Conv2DInfo`` also splits the input and output channels (an AllReduce over a
split input channel) and the height and width (halo exchanges between neighbours); here a
convolution splits its batch only, which is what data parallelism asks of it, and a pooling
its batch and channels. A strategy splitting anything else is refused, naming what is
supported. No communication: the weight's gradient is partial on each rank and its mirror
sums it over the ranks.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.Conv2D(out_channel=4, kernel_size=3), ((4, 1, 1, 1), (1, 1, 1, 1)),
...          [(8, 3, 6, 6), (4, 3, 3, 3)], [None] * 2, {}, 4)
>>> p.input_maps, p.output_maps
(((0, -1, -1, -1), (-1, -1, -1, -1)), ((0, -1, -1, -1),))
"""
from ....ops import conv, pooling
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["Conv2DRule", "Pool2DRule"]


class Conv2DRule(Rule):
    types = (conv.Conv2D,)

    def check_call(self, call):
        if len(call.positions) not in (2, 3) or any(len(s) != 4 for s in call.shapes[:2]):
            raise call.error(f"expects a 4-D x, a 4-D weight and an optional bias, got shapes "
                             f"{call.shapes}")

    def op_dims(self, call):
        return (call.shapes[0][0],)        # the batch

    def strategy_from(self, call, splits):
        ones = tuple((1,) * len(s) for s in call.shapes[1:])
        return ((splits[0], 1, 1, 1),) + ones

    def build(self, call, strategy, world, out_strategy):
        if tuple(strategy) != self.strategy_from(call, (strategy[0][0],)):
            raise call.error(f"in_strategy {strategy} splits more than the batch; a convolution "
                             f"here splits x's batch only, e.g. {self.strategy_from(call, (2,))} "
                             "(MindSpore's channel and height/width splits are not served)")
        grid = Grid(call, (strategy[0][0],), world, strategy)
        batch = grid.axis(0)
        maps = {i: (-1,) * len(call.in_shapes[i]) for i in call.positions[1:]}
        maps[call.positions[0]] = (batch, -1, -1, -1)
        return ShardPlan(grid.device_matrix, _maps_at(call, maps), ((batch, -1, -1, -1),))


class Pool2DRule(Rule):
    types = (pooling.MaxPool, pooling.AvgPool)

    def check_call(self, call):
        call.need_tensors(1, "x")
        if len(call.shapes[0]) != 4:
            raise call.error(f"expects a 4-D NCHW x, got shape {call.shapes[0]}")

    def op_dims(self, call):
        return call.shapes[0][:2]           # batch and channels

    def strategy_from(self, call, splits):
        return ((splits[0], splits[1], 1, 1),)

    def build(self, call, strategy, world, out_strategy):
        n, c, h, w = strategy[0]
        if (h, w) != (1, 1):
            raise call.error(f"in_strategy {strategy} splits the height or width; a pooling "
                             f"here splits the batch and channels only, e.g. (({n}, {c}, 1, 1),)")
        grid = Grid(call, (n, c), world, strategy)
        x_map = (grid.axis(0), grid.axis(1), -1, -1)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: x_map}),
                         (x_map,))


register(Conv2DRule())
register(Pool2DRule())
