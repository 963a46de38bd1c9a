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
from .base import register
from .elementwise import UnaryRule

__all__ = ["SoftmaxRule"]


class SoftmaxRule(UnaryRule):
    types = (activation.Softmax, activation.LogSoftmax)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        axis = call.value("axis", 1, getattr(call.prim, "axis", -1))
        if shape:
            if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
                raise call.error(f"axis {axis!r} is out of range for a tensor of shape {shape}")
            axis %= len(shape)
            if strategy[0][axis] > 1:
                fixed = tuple(1 if d == axis else s for d, s in enumerate(strategy[0]))
                raise call.error(f"in_strategy {strategy} splits the softmax axis {axis} "
                                 f"{strategy[0][axis]} ways; the softmax axis must not be split "
                                 f"(e.g. ({fixed},)): each row must be whole on one rank")
        return UnaryRule.build(self, call, strategy, world, out_strategy)


register(SoftmaxRule())
