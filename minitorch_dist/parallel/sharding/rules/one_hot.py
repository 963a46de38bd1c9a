"""OneHot on slices: the indices split like the output's rows, the depth axis whole.

``OneHot(axis)(indices, depth, on_value, off_value)`` adds an axis of length ``depth`` to the
indices. As in MindSpore, its strategy has one split count per dimension of the *output*
(the indices' dimensions with the depth axis at ``axis``), then ``()`` for a Tensor
``on_value``/``off_value``. Each rank turns its slice of the indices into its block of the
output, with no communication. Splitting the depth axis (MindSpore's model-parallel
one-hot, which shifts each rank's indices by its class offset) is refused by name.

Without this rule a data-parallel loss that one-hot encodes its labels gathered every
rank's labels first, at the end of forward (with the activations held): an all-gather for
a few bytes of work.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.OneHot(), ((8, 1),), [(64,), None, None], [None, 1.0, 0.0], {"depth": 10}, 8)
>>> p.input_maps, p.output_maps
(((1,), None, None), ((1, 0),))
"""
from ....ops import indexing
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["OneHotRule"]


class OneHotRule(Rule):
    types = (indexing.OneHot,)

    @staticmethod
    def _axis(call):
        """The depth axis's position in the output."""
        ndim = len(call.in_shapes[0])
        axis = call.value("axis", None, getattr(call.prim, "axis", -1))
        if not -ndim - 1 <= axis <= ndim:
            raise call.error(f"axis {axis} is out of range for indices of shape {call.in_shapes[0]}")
        return axis % (ndim + 1)

    def check_call(self, call):
        if not call.positions or call.positions[0] != 0:
            raise call.error(f"expects the indices as a Tensor (input 0), got shapes {call.in_shapes}")
        for p in call.positions[1:]:
            if call.in_shapes[p] != ():
                raise call.error(f"on_value and off_value must be scalars, got a Tensor of shape "
                                 f"{call.in_shapes[p]}")
        self._axis(call)

    def op_dims(self, call):
        dims = list(call.in_shapes[0])
        dims.insert(self._axis(call), int(call.value("depth", 1, 1)))
        return tuple(dims)

    def batch_op_dim(self, call):
        axis, ndim = self._axis(call), len(call.in_shapes[0])
        return None if ndim == 0 else (1 if axis == 0 else 0)

    def strategy_shapes(self, call):
        return [self.op_dims(call)] + [()] * (len(call.positions) - 1), \
            "OneHot's output (the indices' dimensions and depth)"

    def strategy_from(self, call, splits):
        return (tuple(splits),) + ((),) * (len(call.positions) - 1)

    def build(self, call, strategy, world, out_strategy):
        axis = self._axis(call)
        if strategy[0][axis] > 1:
            whole = tuple(1 if d == axis else s for d, s in enumerate(strategy[0]))
            raise call.error(f"in_strategy {strategy} splits the depth axis {axis} "
                             f"{strategy[0][axis]} ways; it must be whole on every rank "
                             f"(e.g. ({whole},) + one () per Tensor on/off value)")
        grid = Grid(call, strategy[0], world, strategy)
        out_map = tuple(grid.axis(d) for d in range(len(strategy[0])))
        indices_map = out_map[:axis] + out_map[axis + 1:]
        maps = {call.positions[0]: indices_map}
        maps.update((p, ()) for p in call.positions[1:])
        return ShardPlan(grid.device_matrix, _maps_at(call, maps), (out_map,))


register(OneHotRule())
