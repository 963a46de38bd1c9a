"""LayerNorm on slices: split the rows it normalises independently, never the normalised axes.

``LayerNorm(begin_norm_axis, begin_params_axis)(x, gamma, beta)`` normalises ``x`` over the
axes from ``begin_norm_axis`` on and scales by ``gamma``/``beta`` of shape
``x.shape[begin_params_axis:]``. MindSpore's rule (``LayerNormInfo``):

* the dimensions from ``begin_norm_axis`` on can not be split (each normalised group must
  be whole on one rank); the others split freely;
* gamma's and beta's strategies are ``x``'s, right-aligned (``x_strategy[begin_params_axis:]``):
  a parameter dimension is split exactly like the ``x`` dimension it scales.

The device matrix is ``x``'s strategy. The outputs ``(y, mean, variance)``: ``y`` has
``x``'s layout; ``mean`` and ``variance`` keep the normalised axes as size 1, whole. No
communication: gamma's and beta's gradients (sums over the rows) are partial on each rank
and their mirrors sum them over the ranks that hold the same slice.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.LayerNorm(begin_norm_axis=2, begin_params_axis=1), ((2, 2, 1), (2, 1), (2, 1)),
...          [(4, 6, 8), (6, 8), (6, 8)], [None] * 3, {}, 4)
>>> p.input_maps, p.output_maps
(((2, 1, 0), (1, 0), (1, 0)), ((2, 1, 0), (2, 1, -1), (2, 1, -1)))
"""
from ....ops import layer_norm
from ....ops.axes import normalize_axis
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at
from .errors import ShardingError

__all__ = ["LayerNormRule"]


class LayerNormRule(Rule):
    types = (layer_norm.LayerNorm,)

    @staticmethod
    def _axes(call):
        """(begin_norm_axis, begin_params_axis) as non-negative dimensions of x."""
        shape = call.shapes[0]
        return tuple(normalize_axis(getattr(call.prim, name), len(shape), call.name, shape,
                                    ShardingError, what=name)
                     for name in ("begin_norm_axis", "begin_params_axis"))

    def check_call(self, call):
        call.need_tensors(3, "x, gamma, beta")
        x, gamma, beta = call.shapes
        params = self._axes(call)[1]
        if gamma != x[params:] or beta != x[params:]:
            raise call.error(f"gamma and beta must have shape {x[params:]} (x.shape[begin_params_axis:]) "
                             f"for x of shape {x}, got {gamma} and {beta}")

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        params = self._axes(call)[1]
        splits = tuple(splits)
        return (splits, splits[params:], splits[params:])

    def build(self, call, strategy, world, out_strategy):
        norm, params = self._axes(call)
        x_split, gamma_split, beta_split = strategy
        if any(s > 1 for s in x_split[norm:]):
            fix = x_split[:norm] + (1,) * (len(x_split) - norm)
            raise call.error(f"in_strategy {strategy} splits x from begin_norm_axis {norm} on; "
                             f"LayerNorm's dimensions from begin_norm_axis on can not be split (e.g. "
                             f"x {fix})")
        if gamma_split != x_split[params:] or beta_split != x_split[params:]:
            raise call.error(f"in_strategy {strategy}: LayerNorm's gamma and beta strategies must "
                             f"equal x's from begin_params_axis {params} on, {x_split[params:]} "
                             "(right-aligned with x's), so that each rank holds the parameters of "
                             "its columns")
        grid = Grid(call, x_split, world, strategy)
        x_map = tuple(grid.axis(d) for d in range(len(x_split)))
        stats_map = x_map[:norm] + (-1,) * (len(x_map) - norm)
        maps = dict(zip(call.positions, (x_map, x_map[params:], x_map[params:])))
        return ShardPlan(grid.device_matrix, _maps_at(call, maps), (x_map, stats_map, stats_map))


register(LayerNormRule())
