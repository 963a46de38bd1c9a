"""Reductions on slices: reduce locally, then combine across the ranks that split the axis.

``ReduceSum(x, axis)`` with x split over some device-matrix axes: each rank reduces its own
slice with the same ``axis`` and ``keep_dims``. A reduced dimension that was not split is
finished; one that was split leaves a partial result on each rank, and a forward AllReduce
over that dimension's device-matrix axis combines them:

* ReduceSum: AllReduce(sum) of the local sums;
* ReduceMax / ReduceMin: AllReduce(max / min) of the local extremes;
* ReduceMean: AllReduce(mean) of the local means. The slices are equal in size, so the mean
  of the local means is exactly the mean of the whole (it equals summing "local sum / full
  count" over the ranks); the local call needs no change and the AllReduce's backward
  shares the gradient out the same way.

The output keeps the layout of the dimensions that were not reduced; a reduced dimension is
dropped (or kept as size 1, whole, with ``keep_dims``) and the result is replicated along
the axes the AllReduce ran over. Argmax / Argmin and ArgMaxWithValue need their axis whole:
an index cannot be combined across ranks without its value.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.ReduceMean(), ((2, 4),), [(8, 16)], [None], {"axis": 1, "keepdims": False}, 8)
>>> p.output_maps, [str(s) for s in p.forward_comm]
(((1,),), ['AllReduce(mean) over device-matrix axes (0,) on output 0'])
"""
from ....ops import reduction, selection
from ....ops.axes import normalize_axis
from .base import ALL_REDUCE, CommStep, Grid, OneTensorRule, ShardPlan, register
from .elementwise import _maps_at
from .errors import ShardingError

__all__ = ["ReduceRule", "ArgReduceRule", "ArgMaxWithValueRule", "reduced_axes"]

_OP = {reduction.ReduceSum: "sum", reduction.ReduceMean: "mean",
       reduction.ReduceMax: "max", reduction.ReduceMin: "min"}


def reduced_axes(call, axis, ndim):
    """``axis`` (None/() for all, an int or ints) as a sorted tuple of dimensions."""
    if axis is None or axis == ():
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    # a 0-d tensor takes axis 0 or -1 (its one element)
    return tuple(sorted({normalize_axis(a, max(ndim, 1), call.name, error=ShardingError)
                         for a in axes}))


class ReduceRule(OneTensorRule):
    types = tuple(_OP)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        axes = reduced_axes(call, call.value("axis", 1, ()), len(shape))
        keep = bool(call.value("keepdims", 2, getattr(call.prim, "keep_dims", False)))
        grid = Grid(call, strategy[0], world, strategy)
        in_map = tuple(grid.axis(d) for d in range(len(shape)))
        out_map = tuple(-1 if d in axes else in_map[d] for d in range(len(shape))
                        if keep or d not in axes)
        comm = ()
        split = grid.split_axes(axes)
        if split:
            op = next(op for cls, op in _OP.items() if isinstance(call.prim, cls))
            comm = (CommStep(ALL_REDUCE, split, op=op),)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (out_map,), comm)


class ArgReduceRule(ReduceRule):
    types = (reduction.Argmax, reduction.Argmin)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        axis = call.attrs["axis"] if "axis" in call.attrs else getattr(call.prim, "axis", -1)
        axes = reduced_axes(call, axis, len(shape))
        bad = [d for d in axes if strategy[0][d] > 1]
        if bad:
            raise call.error(f"in_strategy {strategy} splits dimension {bad[0]}, the axis the index "
                             "is taken along; that axis must not be split (use 1 there)")
        keep = bool(call.value("keepdims", None, False))
        grid = Grid(call, strategy[0], world, strategy)
        in_map = tuple(grid.axis(d) for d in range(len(shape)))
        out_map = tuple(-1 if d in axes else in_map[d] for d in range(len(shape))
                        if keep or d not in axes)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}), (out_map,))


class ArgMaxWithValueRule(ReduceRule):
    """``(index, value)`` of the maximum along ``axis``: both outputs laid out alike.

    MindSpore lets the axis be split and only warns that the index "may be not compatible
    with the stand alone Primitive" (each rank returns the index within its own slice).
    Here that split is refused: an index cannot be combined across ranks without its
    value, and a result that differs from one process is not silently given."""

    types = (selection.ArgMaxWithValue,)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        (axis,) = reduced_axes(call, call.prim.axis, len(shape))
        if strategy[0][axis] > 1:
            fixed = tuple(1 if d == axis else s for d, s in enumerate(strategy[0]))
            raise call.error(f"in_strategy {strategy} splits dimension {axis}, the axis "
                             f"ArgMaxWithValue takes the index along; it must not be split (e.g. "
                             f"({fixed},)): each rank would return the index within its own slice "
                             "(MindSpore warns and does so)")
        grid = Grid(call, strategy[0], world, strategy)
        in_map = tuple(grid.axis(d) for d in range(len(shape)))
        out_map = tuple(-1 if d == axis else in_map[d] for d in range(len(shape))
                        if call.prim.keep_dims or d != axis)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (out_map, out_map))


register(ReduceRule())
register(ArgReduceRule())
register(ArgMaxWithValueRule())
