"""Loss primitives on slices: per-sample losses locally, then one AllReduce for a mean or sum.

With ``reduction="none"`` a loss is elementwise over its samples (its elements, for MSE and
BCE): split the batch and each rank computes its own samples' losses; the output has the
batch layout. With ``"sum"`` each rank sums its slice and an AllReduce(sum) over the split
axes adds the pieces. With ``"mean"`` each rank takes the mean of its slice and an
AllReduce(mean) averages them; the slices are equal in size, so that is exactly the mean
over everything (the same as AllReduce(sum) of "local sum / full count").

The softmax cross-entropies need every class of a sample on one rank: their class axis must
not be split, and the labels must be split like the logits' batch dimension.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> loss = ops.SparseSoftmaxCrossEntropyWithLogits(reduction="mean")
>>> p = plan(loss, ((8, 1), (8,)), [(16, 10), (16,)], [None, None], {}, 8)
>>> p.device_matrix, p.output_maps, [str(s) for s in p.forward_comm]
((8, 1), ((),), ['AllReduce(mean) over device-matrix axes (1,) on output 0'])
"""
from ....ops import loss
from .base import ALL_REDUCE, CommStep, Grid, Rule, ShardPlan, register
from .elementwise import _maps_at, broadcast_layout, broadcast_shape, broadcast_strategy, check_constants

__all__ = ["SoftmaxCrossEntropyRule", "ElementwiseLossRule"]


def _reduced(call, grid, out_map, axes, in_maps):
    """The plan for a loss whose unreduced output has ``out_map`` over work dims ``axes``."""
    reduction = getattr(call.prim, "reduction", "none")
    if reduction == "none":
        return ShardPlan(grid.device_matrix, in_maps, (out_map,))
    split = grid.split_axes(axes)
    comm = (CommStep(ALL_REDUCE, split, op="mean" if reduction == "mean" else "sum"),) if split else ()
    return ShardPlan(grid.device_matrix, in_maps, ((),), comm)


class SoftmaxCrossEntropyRule(Rule):
    """SparseSoftmaxCrossEntropyWithLogits ((N, C) logits, (N,) labels) and
    SoftmaxCrossEntropyWithLogits ((N, C) logits and labels): batch split only."""

    types = (loss.SparseSoftmaxCrossEntropyWithLogits, loss.SoftmaxCrossEntropyWithLogits)

    @staticmethod
    def _sparse(call):
        return isinstance(call.prim, loss.SparseSoftmaxCrossEntropyWithLogits)

    def check_call(self, call):
        call.need_tensors(2, "logits and labels")
        logits, labels = call.shapes
        want = logits[:1] if self._sparse(call) else logits
        if len(logits) != 2 or labels != want:
            raise call.error(f"expects logits of shape (N, C) and labels of shape "
                             f"{'(N,)' if self._sparse(call) else '(N, C)'}, got {logits} and {labels}")

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        n, c = splits
        return ((n, c), (n,) if self._sparse(call) else (n, c))

    def build(self, call, strategy, world, out_strategy):
        (n, c), labels = strategy
        if c > 1:
            raise call.error(f"in_strategy {strategy} splits the class axis {c} ways; the class axis "
                             f"of the logits must not be split (e.g. (({n}, 1), {((n,) if self._sparse(call) else (n, 1))}))")
        if labels[0] != n or (not self._sparse(call) and labels[1] != 1):
            raise call.error(f"strategies of relevant dimensions are not equal: in_strategy {strategy} "
                             f"splits the logits' batch dimension {n} ways but the labels "
                             f"{labels} ways; split the labels like the logits")
        grid = Grid(call, (n, c), world, strategy)
        logits_map = (grid.axis(0), grid.axis(1))
        labels_map = logits_map[:1] if self._sparse(call) else logits_map
        in_maps = _maps_at(call, dict(zip(call.positions, (logits_map, labels_map))))
        return _reduced(call, grid, (grid.axis(0),), (0,), in_maps)


class ElementwiseLossRule(Rule):
    """MSE (x, y broadcast) and BCEWithLogits (logits, labels, optional weight and
    pos_weight broadcast to the logits): any split of the (broadcast) elements."""

    types = (loss.MSE, loss.BCEWithLogits)

    def _out_shape(self, call):
        if isinstance(call.prim, loss.BCEWithLogits):
            return call.in_shapes[0]
        return broadcast_shape(call, call.shapes)

    def check_call(self, call):
        if isinstance(call.prim, loss.BCEWithLogits):
            if len(call.positions) < 2 or call.positions[:2] != [0, 1] \
                    or call.in_shapes[1] != call.in_shapes[0]:
                raise call.error(f"expects logits and labels of one shape (plus optional weight and "
                                 f"pos_weight tensors), got shapes {call.in_shapes}")
        else:
            call.need_tensors(2, "x and y")
        check_constants(call)
        if broadcast_shape(call, call.shapes) != self._out_shape(call):
            raise call.error(f"weight and pos_weight must broadcast to the logits' shape "
                             f"{call.in_shapes[0]}, got shapes {call.in_shapes}")

    def op_dims(self, call):
        return self._out_shape(call)

    def strategy_from(self, call, splits):
        return broadcast_strategy(call, splits, self._out_shape(call))

    def build(self, call, strategy, world, out_strategy):
        out_shape = self._out_shape(call)
        grid, in_maps, out_map = broadcast_layout(call, strategy, world, out_shape)
        return _reduced(call, grid, out_map, range(len(out_shape)), in_maps)


register(SoftmaxCrossEntropyRule())
register(ElementwiseLossRule())
