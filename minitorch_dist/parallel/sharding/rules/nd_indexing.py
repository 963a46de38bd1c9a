"""GatherNd on slices: split the indices' leading dimensions, keep the table whole.

``GatherNd()(x, indices)``: ``indices`` of shape ``(..., q)`` address the first ``q`` axes of
``x``; the output has shape ``indices.shape[:-1] + x.shape[q:]``. MindSpore's rule
(``GatherNdInfo``): "the input can not be split, and the last dimension of indices can not
be split". The device matrix is the indices' strategy; each rank looks up its block of
index rows in its whole copy of ``x``, and its output block is the matching rows of the
output (the trailing ``x.shape[q:]`` dimensions whole). No communication; the gradient of a
trained ``x`` is summed over the ranks by its mirror.

``ScatterNd(indices, updates, shape)`` has no rule: MindSpore has none for it (only for
``ScatterNdAdd``/``ScatterNdUpdate`` and the ``TensorScatter*`` family, which update an
existing tensor), so it runs whole, and a strategy that splits it is refused.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.GatherNd(), ((1, 1, 1), (4, 1)), [(6, 5, 3), (8, 2)], [None, None], {}, 4)
>>> p.device_matrix, p.input_maps, p.output_maps
((4, 1), ((-1, -1, -1), (1, 0)), ((1, -1),))
"""
import numpy as np

from ....ops import nd_indexing
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["GatherNdRule"]


class GatherNdRule(Rule):
    types = (nd_indexing.GatherNd,)

    @staticmethod
    def _indices(call):
        """(the indices' shape, whether they are a tensor input)."""
        if len(call.in_shapes) > 1 and call.in_shapes[1] is not None:
            return call.in_shapes[1], True
        return np.shape(call.inputs[1]), False

    def check_call(self, call):
        if len(call.in_shapes) != 2 or call.in_shapes[0] is None:
            raise call.error(f"expects tensors (x, indices), got input shapes {call.in_shapes}")
        shape, _ = self._indices(call)
        if not shape or shape[-1] > len(call.in_shapes[0]):
            raise call.error(f"indices of shape {shape} cannot address x of shape "
                             f"{call.in_shapes[0]} (the last axis holds one index per addressed axis)")

    def op_dims(self, call):
        shape, is_tensor = self._indices(call)
        return shape if is_tensor else ()

    def strategy_from(self, call, splits):
        x = (1,) * len(call.in_shapes[0])
        return (x, tuple(splits)) if self._indices(call)[1] else (x,)

    def build(self, call, strategy, world, out_strategy):
        x_shape = call.in_shapes[0]
        shape, is_tensor = self._indices(call)
        if any(s > 1 for s in strategy[0]):
            fix = ((1,) * len(x_shape),) + strategy[1:]
            raise call.error(f"in_strategy {strategy} splits the input x; GatherNd's input can not be "
                             f"split, only the indices' leading dimensions (e.g. {fix})")
        splits = strategy[1] if is_tensor else (1,) * len(shape)
        if splits[-1] > 1:
            fix = strategy[:1] + (splits[:-1] + (1,),)
            raise call.error(f"in_strategy {strategy} splits the last dimension of the indices (one "
                             f"index per addressed axis of x); it can not be split (e.g. {fix})")
        grid = Grid(call, splits, world, strategy)
        indices_map = tuple(grid.axis(d) for d in range(len(shape)))
        out_map = indices_map[:-1] + (-1,) * (len(x_shape) - shape[-1])
        maps = {0: (-1,) * len(x_shape)}
        if is_tensor:
            maps[1] = indices_map
        return ShardPlan(grid.device_matrix, _maps_at(call, maps), (out_map,))


register(GatherNdRule())
