"""Softmax and LogSoftmax on slices: any split except along the softmax axis.

Every output element of a softmax needs the whole row it normalises over, so the softmax
axis must be whole on every rank (split count 1); the other dimensions may be split freely
and the output keeps the input's layout. To shard a softmax over its class axis, split
another dimension here and let a redistribution gather the axis first.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> plan(ops.Softmax(), ((8, 1),), [(16, 10)], [None], {}, 8).output_maps
((1, 0),)
"""
from ....ops import activation
from .axis_ops import check_axis_whole
from .base import register
from .elementwise import UnaryRule

__all__ = ["SoftmaxRule"]


class SoftmaxRule(UnaryRule):
    types = (activation.Softmax, activation.LogSoftmax)

    def build(self, call, strategy, world, out_strategy):
        axis = call.value("axis", 1, getattr(call.prim, "axis", -1))
        check_axis_whole(call, strategy, axis, "the softmax axis",
                         "the softmax axis must not be split: each row must be whole on one rank")
        return UnaryRule.build(self, call, strategy, world, out_strategy)


register(SoftmaxRule())
