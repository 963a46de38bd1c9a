"""Tile on slices: the strategy splits the output's positions, as MindSpore's Tile does.

``Tile()(x, multiples)`` has one output dimension per entry of ``multiples`` (a longer
``multiples`` adds leading axes). MindSpore's strategy for Tile has one split count per
entry of ``multiples``, not per dimension of ``x`` ("only support configuring shard strategy
for multiples"), and each count splits:

* a dimension with multiple ``m > 1``: the *copies*. The count must divide ``m``; ``x``'s
  dimension stays whole on every rank and each rank tiles it ``m / s`` times, which is its
  block of the output (the output along that dimension is ``m`` copies of the whole
  dimension, one after another). Splitting ``x`` there instead would give ``AABB`` for
  ``ABAB``;
* a dimension with multiple 1: ``x``'s dimension itself (the count must divide its size);
  the output takes the same split;
* a leading dimension that ``multiples`` adds with multiple 1 has size 1: count 1.

The local call gets the local multiples. No communication; the gradient (sum of the copies)
comes out per rank, and the copies a rank does not hold are summed by the redistribution's
backward or the mirror of a parameter ``x``, which is whole on those ranks.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan, local_call
>>> p = plan(ops.Tile(), ((2, 4),), [(3, 8)], [None], {"multiples": (4, 1)}, 8)
>>> p.input_maps, p.output_maps, local_call(p, [None], {"multiples": (4, 1)}, rank=0)[1]
(((-1, 0),), ((1, 0),), {'multiples': (2, 1)})
"""
from ....ops import repetition
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["TileRule"]


class TileRule(Rule):
    types = (repetition.Tile,)

    @staticmethod
    def _multiples(call):
        multiples = call.value("multiples", 1)
        shape = call.shapes[0]
        if not isinstance(multiples, (tuple, list)) or len(multiples) < len(shape):
            raise call.error(f"multiples {multiples!r} must be a tuple with at least one entry per "
                             f"axis of x (shape {shape})")
        return tuple(int(m) for m in multiples)

    def check_call(self, call):
        call.need_tensors(1, "x")
        self._multiples(call)

    def op_dims(self, call):
        """The size each strategy entry splits: the multiple where it is > 1, else x's
        dimension (1 for a leading dimension the multiples add)."""
        multiples, shape = self._multiples(call), call.shapes[0]
        lead = len(multiples) - len(shape)
        return tuple(m if m > 1 else (shape[i - lead] if i >= lead else 1)
                     for i, m in enumerate(multiples))

    def strategy_shapes(self, call):
        return [self.op_dims(call)], ("Tile's splittable sizes (one per entry of multiples: the "
                                      "multiple where it is > 1, else x's dimension)")

    def strategy_from(self, call, splits):
        return (tuple(splits),)

    def build(self, call, strategy, world, out_strategy):
        multiples, shape = self._multiples(call), call.shapes[0]
        lead = len(multiples) - len(shape)
        split = strategy[0]
        grid = Grid(call, split, world, strategy)
        out_map = tuple(grid.axis(i) for i in range(len(multiples)))
        x_map = tuple(-1 if multiples[lead + d] > 1 else out_map[lead + d] for d in range(len(shape)))
        local = tuple(m // s if m > 1 else m for m, s in zip(multiples, split))

        def local_inputs(inputs, attrs, coords):
            inputs, attrs = list(inputs), dict(attrs)
            if "multiples" in attrs or len(inputs) < 2:
                attrs["multiples"] = local
            else:
                inputs[1] = local
            return inputs, attrs

        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: x_map}),
                         (out_map,), (), local_inputs)


register(TileRule())
