"""A ``ShardPlan`` from ``Layout`` strategies: named device axes instead of split counts.

The rules plan an operator from split counts, one device-matrix axis per work dimension
(MatMul's rows, contraction, columns). A Layout strategy says more: which named axes split
each tensor dimension, several at once if it likes. This module reuses the rule and renames
its axes:

1. each work dimension's tensor dimensions are found by asking the rule for the strategy
   that splits only that work dimension (``strategy_from``);
2. every tensor dimension of a work dimension must name the same axes. Under
   ``add_prim_attr("enable_nd_tp", True)`` (MindSpore's high-dimension tensor parallel) they
   may differ when one is a prefix of all the others: the work dimension keeps the common
   prefix and the inputs split further are gathered to it first (the redistribution the
   executor inserts), as MindSpore's 2D/3D MatMul does;
3. the rule builds its plan from the resulting split counts, and every rule axis becomes the
   named axes of its work dimension: tensor maps, the forward communication's groups, and
   the rank coordinates the plan's local functions read.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.layout_api import Layout
>>> lay = Layout((2, 4), ("x", "y"))
>>> p = layout_plan(ops.MatMul(), (lay("None", "x"), lay("x", "y")), [(8, 16), (16, 8)],
...                 [None, None], {}, 8)
>>> p.input_maps, p.output_maps, [str(s) for s in p.forward_comm]
(((-1, 1), (1, 0)), ((-1, 0),), ['AllReduce(sum) over device-matrix axes (1,) on output 0'])
"""
import math

from ..layout import LayoutError
from ..layout_api import layout_entries
from .base import Call, CommStep, ShardPlan, rule_for

__all__ = ["layout_plan"]


def _axes(entry):
    return () if entry == -1 else entry if isinstance(entry, tuple) else (entry,)


def _entry(axes):
    return -1 if not axes else axes[0] if len(axes) == 1 else tuple(axes)


def _work_dims(rule, call, n_work):
    """For every (input, dimension) of the strategy: the work dimensions that split it."""
    owners = {}
    for k in range(n_work):
        marker = tuple(2 if j == k else 1 for j in range(n_work))
        for i, counts in enumerate(rule.strategy_from(call, marker)):
            for d, c in enumerate(counts):
                if c > 1:
                    owners.setdefault((i, d), []).append(k)
    return owners


def _nd_tp(prim):
    return bool(getattr(prim, "enable_nd_tp", False) or
                getattr(prim, "__dict__", {}).get("attrs", {}).get("enable_nd_tp", False))


def _work_axes(call, maps, owners, n_work):
    """Each work dimension's named axes (numbers from the right), per step 2."""
    seen = {k: [] for k in range(n_work)}
    for (i, d), ks in owners.items():
        axes = _axes(maps[i][d])
        if len(ks) > 1:
            if axes:
                raise call.error(f"a Layout cannot split input {i}'s dimension {d}: it spans "
                                 f"several of {call.kind}'s work dimensions; use split counts")
            continue
        seen[ks[0]].append((i, d, axes))
    work, nd_tp = {}, _nd_tp(call.prim)
    for k, uses in seen.items():
        sets = {axes for _, _, axes in uses}
        if len(sets) <= 1:
            work[k] = sets.pop() if sets else ()
            continue
        common = min(sets, key=len)
        if not nd_tp or any(s[:len(common)] != common for s in sets):
            listed = ", ".join(f"input {i} dimension {d}: {_entry(a)}" for i, d, a in uses)
            raise call.error(f"the Layouts split one dimension of the work differently ({listed}); "
                             "give them the same axes (or, for MatMul's high-dimension tensor "
                             "parallel, add_prim_attr('enable_nd_tp', True) with one a prefix "
                             "of the other)")
        work[k] = common
    owner = {}
    for k, axes in work.items():
        for a in axes:
            if a in owner:
                raise call.error(f"device axis {a} splits two of {call.kind}'s work dimensions; "
                                 "an axis can split only one")
            owner[a] = k
    return work


def _effective_maps(maps, owners, work):
    out = []
    for i, tensor_map in enumerate(maps):
        entries = list(tensor_map)
        for d in range(len(entries)):
            ks = owners.get((i, d), [])
            if len(ks) == 1:
                entries[d] = _entry(work[ks[0]])
        out.append(tuple(entries))
    return tuple(out)


class _Renamer:
    """Rule axis -> named axes, and the layout's coordinates -> the rule's."""

    def __init__(self, call, base, strategy, maps, sizes):
        self.names = {}
        self.sizes = sizes            # named axis number -> its size
        self.base = base
        for rule_map, named in zip(base.input_maps, maps):
            if rule_map is None or named is None:
                continue
            for d, (r, n) in enumerate(zip(rule_map, named)):
                for a in _axes(r):
                    want = _axes(n) if len(_axes(r)) == 1 else None
                    if want is None:
                        raise call.error("a Layout strategy cannot express a multi-axis input "
                                         "split of this rule; use split counts")
                    if self.names.setdefault(a, want) != want:
                        raise call.error(f"Layouts {maps} do not fit {call.kind}'s plan")

    def axes(self, rule_axes):
        out = ()
        for a in _axes(rule_axes) if not isinstance(rule_axes, tuple) else rule_axes:
            if a not in self.names:
                size = self.base.device_matrix[len(self.base.device_matrix) - 1 - a]
                if size > 1:
                    raise LayoutError(f"rule axis {a} has no named axes")
                continue
            out += self.names[a]
        return out

    def coords(self, named_coords, device_matrix):
        """The rule's coordinates from the layout's (each rule axis: mixed radix over its names)."""
        n, m = len(device_matrix), len(self.base.device_matrix)
        coords = [0] * m
        for a, names in self.names.items():
            index = 0
            for b in names:
                index = index * device_matrix[n - 1 - b] + named_coords[n - 1 - b]
            coords[m - 1 - a] = index
        return tuple(coords)


def _build(rule, call, splits, world, out_counts):
    strategy = rule.strategy_from(call, splits)
    used = math.prod(splits) if splits else 1
    return rule.build(call, strategy, max(used, 1), out_counts), strategy


def layout_plan(prim, layouts, in_shapes, inputs, attrs, world, out_layouts=None):
    """The ``ShardPlan`` of calling ``prim`` with Layout ``layouts`` (one per tensor input)
    on ``world`` devices; ``out_layouts``: Layouts of the outputs, or None. Raises
    ShardingError (a ValueError) naming the primitive and what was expected."""
    rule = rule_for(prim)
    call = Call(prim, in_shapes, inputs, attrs)
    rule.check_call(call)
    layouts = layout_entries(tuple(layouts), f"{call.name}.shard: in_strategy")
    if len(layouts) != len(call.shapes):
        raise call.error(f"in_strategy has {len(layouts)} Layout(s) but {call.kind} was called "
                         f"with {len(call.shapes)} tensor input(s) of shapes {tuple(call.shapes)}")
    try:
        full = [lay.to_tensor_layout(shape, world) for lay, shape in zip(layouts, call.shapes)]
    except LayoutError as err:
        raise call.error(f"in_strategy: {err}") from None
    device_matrix = full[0].device_matrix
    maps = tuple(t.tensor_map for t in full)
    n_work = len(rule.op_dims(call))
    owners = _work_dims(rule, call, n_work)
    work = _work_axes(call, maps, owners, n_work)
    n = len(device_matrix)
    sizes = {a: device_matrix[n - 1 - a] for a in range(n)}
    splits = tuple(math.prod(sizes[a] for a in work[k]) for k in range(n_work))
    effective = [None] * len(call.in_shapes)         # one entry per positional input
    for position, tensor_map in zip(call.positions, _effective_maps(maps, owners, work)):
        effective[position] = tensor_map
    effective = tuple(effective)
    base, _ = _build(rule, call, splits, world, None)
    renamer = _Renamer(call, base, None, effective, sizes)
    shard_plan = _renamed(base, renamer, device_matrix, effective)
    if out_layouts is not None:
        shard_plan = _with_outputs(rule, call, splits, world, shard_plan, out_layouts,
                                   device_matrix, effective, sizes)
    return shard_plan


def _renamed(base, renamer, device_matrix, effective):
    outputs = tuple(tuple(_entry(renamer.axes(e)) for e in m) for m in base.output_maps)
    comm = tuple(CommStep(s.kind, renamer.axes(tuple(s.axes)), s.output, s.dim, s.op)
                 for s in base.forward_comm if renamer.axes(tuple(s.axes)))

    def local_inputs(inputs, attrs, coords):
        return base.local_inputs(inputs, attrs, renamer.coords(coords, device_matrix))

    local_output = None
    if base.local_output is not None:
        def local_output(outputs_, inputs, attrs, coords):
            return base.local_output(outputs_, inputs, attrs,
                                     renamer.coords(coords, device_matrix))
    return ShardPlan(device_matrix, effective, outputs, comm, local_inputs, local_output,
                     base.input_row_blocks)


def _with_outputs(rule, call, splits, world, shard_plan, out_layouts, device_matrix, effective,
                  sizes):
    """The plan whose outputs are laid out as ``out_layouts`` ask (MatMul's ReduceScatter),
    or an error naming what the inputs' layouts give."""
    out_layouts = layout_entries(tuple(out_layouts), f"{call.name}.shard: out_strategy")
    shapes = [tuple(0 for _ in m) for m in shard_plan.output_maps]
    wanted = tuple(lay.tensor_map for lay in out_layouts)
    if len(wanted) != len(shapes) or any(len(w) != len(s) for w, s in zip(wanted, shapes)):
        raise call.error(f"out_strategy {out_layouts} does not match {call.kind}'s "
                         f"{len(shapes)} output(s) of {[len(s) for s in shapes]} dimensions")
    if wanted == shard_plan.output_maps:
        return shard_plan
    if rule.supports_out_strategy:
        counts = tuple(lay.split_counts() for lay in out_layouts)
        try:
            base, _ = _build(rule, call, splits, world, counts)
        except ValueError:
            base = None
        if base is not None:
            renamed = _renamed(base, _Renamer(call, base, None, effective, sizes), device_matrix,
                               effective)
            if renamed.output_maps == wanted:
                return renamed
    raise call.error(f"out_strategy {out_layouts} (tensor maps {wanted}) does not fit the input "
                     f"Layouts: they give the output tensor maps {shard_plan.output_maps}")

