"""Unique under operator sharding: every rank computes all of it (MindSpore's only strategy).

``Unique()(x)`` returns the distinct values in order of first appearance and, for each
element, its index among them. Neither can be assembled from slices without communicating
the values, and MindSpore's Unique supports only "the repeat calculate shard strategy
(1,)": the input whole on every rank, both outputs whole. This rule is that strategy; any
split is refused, naming what is allowed. (MindSpore takes 1-D input only; this Unique
flattens any shape, and the rule takes any shape with all ones.)

The first output's length depends on the values. The graph is traced on zeros, so the
traced length (1) is not the real one: keep Unique's outputs whole (no split strategy on
the operators that read its first output) -- which is what the rules here give them unless
a strategy asks otherwise.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> plan(ops.Unique(), ((1,),), [(8,)], [None], {}, 4).output_maps
((-1,), (-1,))
"""
from ....ops import selection
from .base import Grid, OneTensorRule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["UniqueRule"]


class UniqueRule(OneTensorRule):
    types = (selection.Unique,)

    def batch_op_dim(self, call):
        return None

    def build(self, call, strategy, world, out_strategy):
        ones = tuple(1 for _ in strategy[0])
        if strategy[0] != ones:
            raise call.error(f"in_strategy {strategy} splits the input; Unique supports only the "
                             f"repeated-calculation strategy ({ones},) (every rank computes all of "
                             "it, as in MindSpore)")
        grid = Grid(call, ones, world, strategy)
        whole = (-1,) * len(ones)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: whole}),
                         ((-1,), whole))


register(UniqueRule())
