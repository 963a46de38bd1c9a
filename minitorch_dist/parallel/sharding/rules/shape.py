"""Shape primitives on slices: move the layout along with the dimensions.

* **Transpose**: the output dimension ``i`` is input dimension ``perm[i]``, with its split.
* **ExpandDims / Squeeze / BroadcastTo**: a size-1 dimension is never split, so it comes and
  goes without touching the layout (a broadcast dimension is held whole).
* **Concat / Stack / Split**: along an axis that is not split every rank joins or cuts its
  own slices; the inputs must be split alike.
* **Reshape / Flatten**: row-major reshaping works group by group: the input and output
  dimensions fall into runs with equal products (``(4, 6, 5) -> (24, 5)``: ``[4, 6] ->
  [24]`` and ``[5] -> [5]``). A rank's slice of a group is a contiguous block only when
  just the group's *leading* input dimension is split; then the leading output dimension
  takes that split, which must divide it. Anything else (``(4, 6)`` split ``(1, 2)`` into
  ``(24,)``) would need data from other ranks: give a different strategy and let a
  redistribution move the data. The local call gets the local target shape.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan, local_call
>>> p = plan(ops.Reshape(), ((2, 1, 1),), [(4, 6, 5)], [None], {"shape": (24, 5)}, 8)
>>> p.device_matrix, p.output_maps, local_call(p, [None], {"shape": (24, 5)}, rank=0)[1]
((2, 1, 1, 4), ((3, 1),), {'shape': (12, 5)})
"""
import math

from ....ops import shape_ops
from ....ops.axes import normalize_axis
from .base import Grid, OneTensorRule, Rule, ShardPlan, keep_inputs, register
from .elementwise import _maps_at
from .errors import ShardingError

__all__ = ["ReshapeRule", "TransposeRule", "ExpandDimsRule", "SqueezeRule", "BroadcastToRule",
           "JoinRule", "SplitRule", "reshape_groups"]


class _OneTensor(OneTensorRule):
    """Shared parts of the one-tensor shape rules: the work dimensions are the input's."""

    @staticmethod
    def grid_and_map(call, strategy, world):
        grid = Grid(call, strategy[0], world, strategy)
        return grid, tuple(grid.axis(d) for d in range(len(strategy[0])))

    @staticmethod
    def with_attr(key, position, value):
        """A ``local_inputs`` that sets one argument (keyword ``key`` or positional)."""
        def local_inputs(inputs, attrs, coords):
            inputs, attrs = list(inputs), dict(attrs)
            if key not in attrs and position < len(inputs):
                inputs[position] = value
            else:
                attrs[key] = value
            return inputs, attrs
        return local_inputs


# ---- Reshape and Flatten -------------------------------------------------------------------
def reshape_groups(src, dst):
    """Pairs (input dims, output dims) of equal products, in order; size-1 dimensions stand
    alone (with nothing on the other side).

    >>> reshape_groups((4, 6, 5), (24, 5))
    [([0, 1], [0]), ([2], [1])]
    """
    if 0 in src or 0 in dst:
        return [(list(range(len(src))), list(range(len(dst))))]
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        if i < len(src) and src[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(dst) and dst[j] == 1:
            groups.append(([], [j]))
            j += 1
            continue
        ins, outs, p_in, p_out = [i], [j], src[i], dst[j]
        i, j = i + 1, j + 1
        while p_in != p_out:
            if p_in < p_out:
                ins.append(i)
                p_in *= src[i]
                i += 1
            else:
                outs.append(j)
                p_out *= dst[j]
                j += 1
        groups.append((ins, outs))
    return groups


class ReshapeRule(_OneTensor):
    types = (shape_ops.Reshape, shape_ops.Flatten)

    def _target(self, call):
        shape = call.shapes[0]
        if isinstance(call.prim, shape_ops.Flatten):
            if not shape:
                raise call.error("needs a tensor with at least one axis, got a scalar")
            return (shape[0], math.prod(shape[1:]))
        target = call.value("shape", 1)
        if target is None:
            raise call.error("no target shape given")
        target = tuple(int(n) for n in ((target,) if isinstance(target, int) else target))
        size = math.prod(shape)
        if target.count(-1) == 1:
            known = math.prod(n for n in target if n != -1)
            if known == 0 or size % known:
                raise call.error(f"cannot reshape a tensor of shape {shape} into shape {target}")
            target = tuple(size // known if n == -1 else n for n in target)
        if math.prod(target) != size or any(n < 0 for n in target):
            raise call.error(f"cannot reshape a tensor of shape {shape} into shape {target}")
        return target

    def check_call(self, call):
        super().check_call(call)
        self._target(call)

    def build(self, call, strategy, world, out_strategy):
        shape, target, split = call.shapes[0], self._target(call), strategy[0]
        grid, in_map = self.grid_and_map(call, strategy, world)
        out_map, local = [-1] * len(target), list(target)
        for ins, outs in reshape_groups(shape, target):
            inner = [d for d in ins[1:] if split[d] > 1]
            if inner:
                fix = tuple(1 if d in inner else s for d, s in enumerate(split))
                raise call.error(
                    f"in_strategy {strategy} splits dimension {inner[0]} of {shape}, which is not the "
                    f"leading dimension of the group {[shape[d] for d in ins]} -> "
                    f"{[target[d] for d in outs]} that this reshape to {target} merges it into, so "
                    f"a rank's slice is not a contiguous block of the output; split only the leading "
                    f"dimension of each group (e.g. ({fix},)) or let a redistribution gather it first")
            if not ins or not outs:
                continue
            lead = split[ins[0]]
            if target[outs[0]] % lead:
                raise call.error(
                    f"in_strategy {strategy} splits dimension {ins[0]} of {shape} {lead} ways, but "
                    f"after the reshape to {target} it leads output dimension {outs[0]} of size "
                    f"{target[outs[0]]}, which {lead} does not divide; use a split that divides it "
                    "or let a redistribution gather the tensor first")
            out_map[outs[0]] = in_map[ins[0]]
            local[outs[0]] //= lead
        local_inputs = self.with_attr("shape", 1, tuple(local))
        if isinstance(call.prim, shape_ops.Flatten):
            local_inputs = keep_inputs
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (tuple(out_map),), (), local_inputs)


# ---- Transpose, ExpandDims, Squeeze, BroadcastTo --------------------------------------------
class TransposeRule(_OneTensor):
    types = (shape_ops.Transpose,)

    def _perm(self, call):
        n = len(call.shapes[0])
        perm = call.value("perm", 1)
        perm = tuple(range(n - 1, -1, -1)) if perm is None else tuple(int(p) % max(n, 1) for p in perm)
        if sorted(perm) != list(range(n)):
            raise call.error(f"perm {perm} is not a permutation of the {n} axes of {call.shapes[0]}")
        return perm

    def check_call(self, call):
        super().check_call(call)
        self._perm(call)

    def batch_op_dim(self, call):
        return self._perm(call)[0] if call.shapes[0] else None

    def build(self, call, strategy, world, out_strategy):
        grid, in_map = self.grid_and_map(call, strategy, world)
        out_map = tuple(in_map[p] for p in self._perm(call))
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}), (out_map,))


class ExpandDimsRule(_OneTensor):
    types = (shape_ops.ExpandDims,)

    def build(self, call, strategy, world, out_strategy):
        grid, in_map = self.grid_and_map(call, strategy, world)
        axis = normalize_axis(call.value("axis", 1, 0), len(in_map) + 1, call.name,
                              error=ShardingError)
        out_map = in_map[:axis] + (-1,) + in_map[axis:]
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}), (out_map,))


class SqueezeRule(_OneTensor):
    """The axes to drop are fixed from the full shape (a slice may have more size-1 axes)."""

    types = (shape_ops.Squeeze,)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        grid, in_map = self.grid_and_map(call, strategy, world)
        axis = call.value("axis", 1, getattr(call.prim, "axis", ()))
        axis = (axis,) if isinstance(axis, int) else tuple(axis or ())
        if axis:
            drop = tuple(sorted({normalize_axis(a, len(shape), call.name, shape, ShardingError)
                                 for a in axis}))
            wide = [a for a in drop if shape[a] != 1]
            if wide:
                raise call.error(f"cannot squeeze axis {wide[0]} of size {shape[wide[0]]} of {shape}")
        else:
            drop = tuple(d for d, n in enumerate(shape) if n == 1)
            if not drop and any(n == s > 1 for n, s in zip(shape, strategy[0])):
                raise call.error(f"squeezes nothing on {shape}, but in_strategy {strategy} leaves "
                                 "slices of size 1 that Squeeze() would drop; give Squeeze an "
                                 "explicit axis or split less")
        out_map = tuple(m for d, m in enumerate(in_map) if d not in drop)
        local_inputs = self.with_attr("axis", 1, drop) if drop else keep_inputs
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (out_map,), (), local_inputs)


class BroadcastToRule(_OneTensor):
    """New leading dimensions and stretched size-1 ones are whole on every rank."""

    types = (shape_ops.BroadcastTo,)

    def _target(self, call):
        shape = call.shapes[0]
        target = call.value("shape", 1, getattr(call.prim, "shape", ()))
        target = tuple(int(n) for n in target)
        lead = len(target) - len(shape)
        if lead < 0:
            raise call.error(f"cannot broadcast {shape} to the shorter shape {target}")
        full = tuple(shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(target))
        for i, n in enumerate(shape):
            if n != 1 and n != full[lead + i]:
                raise call.error(f"cannot broadcast {shape} to {target}")
        return full, lead

    def check_call(self, call):
        super().check_call(call)
        self._target(call)

    def build(self, call, strategy, world, out_strategy):
        shape = call.shapes[0]
        (full, lead), split = self._target(call), strategy[0]
        grid, in_map = self.grid_and_map(call, strategy, world)
        out_map = [-1] * lead + [m if shape[i] == full[lead + i] else -1 for i, m in enumerate(in_map)]
        local = tuple(n // split[i - lead] if i >= lead and shape[i - lead] == n else n
                      for i, n in enumerate(full))
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (tuple(out_map),), (), self.with_attr("shape", 1, local))


# ---- Concat, Stack, Split ---------------------------------------------------------------
class JoinRule(Rule):
    """Concat (along an existing axis) and Stack (along a new one): inputs split alike,
    the joined axis whole."""

    types = (shape_ops.Concat, shape_ops.Stack)

    def _axis(self, call):
        ndim = len(call.shapes[0]) + (1 if isinstance(call.prim, shape_ops.Stack) else 0)
        return normalize_axis(call.value("axis", None, getattr(call.prim, "axis", 0)), ndim,
                              call.name, error=ShardingError)

    def check_call(self, call):
        if not call.positions:
            raise call.error("needs at least one tensor")
        first = call.shapes[0]
        stack = isinstance(call.prim, shape_ops.Stack)
        axis = self._axis(call)
        for s in call.shapes:
            same = s == first if stack else (len(s) == len(first) and all(
                x == y for d, (x, y) in enumerate(zip(s, first)) if d != axis))
            if not same:
                raise call.error(f"tensors of shapes {tuple(call.shapes)} cannot be joined along axis {axis}")

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        return (tuple(splits),) * len(call.shapes)

    def batch_op_dim(self, call):
        return None if not call.shapes[0] else 0

    def build(self, call, strategy, world, out_strategy):
        if any(s != strategy[0] for s in strategy):
            raise call.error(f"strategies of relevant dimensions are not equal: in_strategy {strategy} "
                             "splits the joined tensors differently; give every input the same split")
        axis = self._axis(call)
        stack = isinstance(call.prim, shape_ops.Stack)
        if not stack and strategy[0][axis] > 1:
            raise call.error(f"in_strategy {strategy} splits the concatenation axis {axis}; it must "
                             "not be split (use 1 there)")
        grid = Grid(call, strategy[0], world, strategy)
        in_map = tuple(grid.axis(d) for d in range(len(strategy[0])))
        out_map = in_map[:axis] + (-1,) + in_map[axis:] if stack else in_map
        return ShardPlan(grid.device_matrix, _maps_at(call, {p: in_map for p in call.positions}),
                         (out_map,))


class SplitRule(_OneTensor):
    types = (shape_ops.Split,)

    def _outputs(self, call):
        n = call.shapes[0][self._axis(call)]
        sizes, part = call.value("sizes"), call.value("part_size")
        if sizes is not None:
            return len(sizes)
        if part:
            return -(-n // part)
        return int(call.value("output_num", None, getattr(call.prim, "output_num", 1)))

    def _axis(self, call):
        return normalize_axis(call.value("axis", 1, getattr(call.prim, "axis", 0)),
                              len(call.shapes[0]), call.name, call.shapes[0], ShardingError)

    def build(self, call, strategy, world, out_strategy):
        axis = self._axis(call)
        if strategy[0][axis] > 1:
            raise call.error(f"in_strategy {strategy} splits axis {axis}, the axis Split cuts; it "
                             "must not be split (use 1 there)")
        grid, in_map = self.grid_and_map(call, strategy, world)
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: in_map}),
                         (in_map,) * self._outputs(call))


for _rule in (ReshapeRule(), TransposeRule(), ExpandDimsRule(), SqueezeRule(), BroadcastToRule(),
              JoinRule(), SplitRule()):
    register(_rule)
