"""Operators that need one axis whole, and the ternary select.

* ``CumSum`` (its ``axis``), ``L2Normalize`` (its ``axis``) and ``TopK`` (the last axis, two
  outputs laid out alike) run on slices when the axis they scan, normalise or rank along is
  whole on every rank; the other dimensions split freely and the outputs keep the input's
  layout. Splitting that axis is an error that names it and a strategy that works.
* ``Select``/``Where`` broadcasts its three inputs like the binary elementwise operators.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> plan(ops.TopK(), ((4, 1),), [(16, 10)], [None], {"k": 3}, 4).output_maps
((1, 0), (1, 0))
"""
from ....ops import layer_norm, repetition, selection
from .base import ShardPlan, register
from .elementwise import BinaryRule, UnaryRule, broadcast_shape, check_constants

__all__ = ["WholeAxisRule", "SelectRule", "check_axis_whole"]


def check_axis_whole(call, strategy, axis, what, why):
    """Raise (naming ``what``, e.g. "the softmax axis", and ``why``) unless the first input's
    ``axis`` is in range and split 1 way; a strategy that would work is suggested."""
    shape = call.shapes[0]
    if not shape:
        return
    if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        raise call.error(f"axis {axis!r} is out of range for a tensor of shape {shape}")
    axis %= len(shape)
    if strategy[0][axis] > 1:
        fixed = tuple(1 if d == axis else s for d, s in enumerate(strategy[0]))
        raise call.error(f"in_strategy {strategy} splits {what} {axis} {strategy[0][axis]} ways; "
                         f"{why} (e.g. ({fixed},))")


class WholeAxisRule(UnaryRule):
    """A unary operator whose ``axes(call)`` must not be split."""

    types = (repetition.CumSum, layer_norm.L2Normalize, selection.TopK)

    def axes(self, call):
        prim = call.prim
        if isinstance(prim, selection.TopK):
            return (-1,)
        if isinstance(prim, repetition.CumSum):
            return (call.value("axis", 1, 0),)
        return prim.axis if isinstance(prim.axis, (tuple, list)) else (prim.axis,)

    def build(self, call, strategy, world, out_strategy):
        for axis in self.axes(call):
            check_axis_whole(call, strategy, axis, "axis", "that axis must be whole on every rank")
        single = UnaryRule.build(self, call, strategy, world, out_strategy)
        outputs = 2 if isinstance(call.prim, selection.TopK) else 1
        return ShardPlan(single.device_matrix, single.input_maps, single.output_maps * outputs)


class SelectRule(BinaryRule):
    """``Select(cond, x, y)``: three broadcast inputs, one output."""

    types = (selection.Select,)

    def check_call(self, call):
        if len(call.positions) != 3:
            raise call.error(f"expects three tensor inputs (cond, x, y), got shapes "
                             f"{call.in_shapes}")
        check_constants(call)
        broadcast_shape(call, call.shapes)


register(WholeAxisRule())
register(SelectRule())
