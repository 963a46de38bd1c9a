"""A traced primitive's output shapes from one row of its batch, not the whole global batch.

The trace (``graph.trace``) needs each primitive's output shapes and dtypes on the GLOBAL
batch; their values never matter. Running every primitive on the whole global batch costs
a full-batch forward on every rank (ResNet-50, 8 ranks of 32 images at 224x224: 147 s per
rank before the first step). Yet the executor already relies on each primitive's sharding
rule to say how a call splits: under the data-parallel strategy that cuts the batch
dimension ``n`` ways, each slice runs the primitive on its rows and the output's full shape
is the local one times the plan's split counts. Cutting it into single rows (``n`` = the
batch size) gives the same full shapes and dtypes for the price of one row.

``one_row_shapes`` does that where the rule allows it and returns None otherwise (no rule,
no batch dimension, a batch of one, a plan that moves rows between slices or fixes up its
local result): the caller then runs the primitive on the whole inputs as before. An
``all_reduce`` the plan would do keeps the local shape, so it is no obstacle; a
``reduce_scatter`` would change it, so such a plan runs whole.
"""
from ...tensor import Tensor
from .rules import ShardingError, plan, rule_for
from .rules.base import ALL_REDUCE, Call, coordinates

__all__ = ["one_row_shapes", "set_one_row_tracing"]

_state = {"enabled": True}


def set_one_row_tracing(enabled):
    """Turn the one-row shortcut on or off (the tests compare it with whole-batch traces);
    returns the previous setting."""
    previous, _state["enabled"] = _state["enabled"], bool(enabled)
    return previous


def _row_plan(prim, shapes, inputs, attrs):
    """The plan cutting the call's batch work dimension into single rows, or None."""
    try:
        rule = rule_for(prim)
        call = Call(prim, shapes, inputs, attrs)
        rule.check_call(call)
        k = rule.batch_op_dim(call)
        if k is None:
            return None
        sizes = tuple(rule.op_dims(call))
        rows = int(sizes[k])
        if rows < 2:
            return None
        splits = [1] * len(sizes)
        splits[k] = rows
        row_plan = plan(prim, rule.strategy_from(call, tuple(splits)), shapes, inputs, attrs,
                        rows)
    except (ShardingError, ValueError, TypeError, IndexError, KeyError):
        return None          # the whole-batch run is exact and says what is wrong, if anything
    moves_rows = any(step.kind != ALL_REDUCE for step in row_plan.forward_comm)
    if moves_rows or row_plan.local_output is not None or row_plan.input_row_blocks:
        return None
    return row_plan


def _first_slice(x, local_shape):
    """Rows ``[0, n)`` of every dimension of ``x``: rank 0's slice, as a view."""
    view = x.data[tuple(slice(0, n) for n in local_shape)]
    return Tensor._make(view, x.device)


def one_row_shapes(prim, inputs, attrs):
    """``(outputs, full shapes)`` of ``prim`` on ``inputs`` (full-size tensors): the
    outputs of one row of the batch (for their dtypes and devices; a tuple when the
    primitive returns one) and each output's full shape; None where the rule does not allow
    it (see the module docstring)."""
    if not _state["enabled"]:
        return None
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in inputs]
    row_plan = _row_plan(prim, shapes, inputs, attrs)
    if row_plan is None:
        return None
    maps = iter(row_plan.input_maps)
    local = [_first_slice(x, row_plan.local_shape(next(maps), tuple(x.shape)))
             if isinstance(x, Tensor) else x for x in inputs]
    coords = coordinates(row_plan.device_matrix, 0)
    local_inputs, local_attrs = row_plan.local_inputs(local, dict(attrs), coords)
    out = prim.run(*local_inputs, **local_attrs)
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(row_plan.output_maps) or not all(
            type(o) is Tensor and len(o.shape) == len(m)
            for o, m in zip(outs, row_plan.output_maps)):
        return None          # not the outputs the rule describes: run whole
    return out, [tuple(n * s for n, s in zip(o.shape, row_plan.splits(m)))
                 for o, m in zip(outs, row_plan.output_maps)]
