"""What a sharded program sends, predicted from its layouts: the figure the communicators'
byte counters must equal (tests and ``benchmarks/bench_sharding.py`` compare the two).

Per training step one rank sends, for every node: the redistribution of each input from
the layout it has to the one the node's strategy wants (forward, and the adjoint collective
backward when a gradient flows); the node's own forward collective (MatMul's AllReduce over
a split contracting axis, a ReduceScatter for an ``out_strategy``) and its adjoint; for
every output, its move back to the inputs' layout; and for every trained parameter copied
on several ranks, the mirror's all-reduce of its gradient.
"""
import math

import numpy as np

from .layout import TensorLayout
from .propagation import input_layout, output_layout
from .redistribution import plan_cost, plan_redistribution
from .sharded_call import batch_split, output_target

__all__ = ["predicted_step_bytes"]


def _backward_bytes(step, itemsize):
    """What the backward of one redistribution step sends (its adjoint collective)."""
    out = math.prod(step.out_shape) * itemsize
    n = step.group_size
    if step.kind == "all_reduce":
        return math.prod(step.local_shape) * itemsize
    if step.kind in ("all_gather", "all_to_all"):     # ReduceScatter / AllToAll of the gradient
        return out // n * (n - 1)
    if step.kind == "reduce_scatter":                 # AllGather of the gradient block
        return out
    return 0                                          # slice, mask: local


def predicted_step_bytes(program):
    """Bytes one rank sends in one training step (forward and backward) of a sharded
    ``program``, predicted from its layouts alone. Returns ``{category: bytes}`` with the
    categories ``redistribution_fwd``, ``redistribution_bwd``, ``operator_fwd``,
    ``operator_bwd``, ``mirror`` and their ``total``."""
    graph, plans, world = program.graph, program.plans, program.world
    found = dict.fromkeys(("redistribution_fwd", "redistribution_bwd", "operator_fwd",
                           "operator_bwd", "mirror"), 0)
    grad = {}                                      # node index -> its output needs a gradient

    def needs_grad(src):
        if src.kind == "param":
            return graph.params[src.name].requires_grad
        return src.kind == "node" and grad[src.node]

    def move(have, want, itemsize, backward):
        steps = plan_redistribution(have, want)
        found["redistribution_fwd"] += plan_cost(steps, itemsize)
        if backward:
            found["redistribution_bwd"] += sum(_backward_bytes(s, itemsize) for s in steps)

    for node in graph.nodes:
        shard_plan = plans[node.index]
        flows = False
        for i in node.tensor_positions():
            src = node.inputs[i]
            shape = node.in_shapes[i]
            if src.kind == "input":
                have = program.input_layouts[src.index]
            elif src.kind == "param":
                have = graph.params[src.name].sharding_layout
            elif src.kind == "node":
                have = output_layout(plans[src.node], src.index, shape)
            else:                                  # a tensor made inside construct: whole
                have = TensorLayout((world,), (-1,) * len(shape), shape)
            itemsize = np.dtype(src.dtype or "float32").itemsize
            move(have, input_layout(shard_plan, i, shape), itemsize, needs_grad(src))
            flows = flows or needs_grad(src)
        grad[node.index] = flows
        for step in shard_plan.forward_comm:
            layout = output_layout(shard_plan, step.output, node.out_shapes[step.output])
            itemsize = np.dtype(node.out_dtypes[step.output] or "float32").itemsize
            local = math.prod(layout.local_shape()) * itemsize
            n = math.prod(shard_plan.device_matrix[len(shard_plan.device_matrix) - 1 - a]
                          for a in step.axes)
            if step.kind == "all_reduce":
                fwd = local
                bwd = 2 * local if step.op in ("max", "min") else local
            else:                                  # reduce_scatter of an n-times larger block
                fwd, bwd = local * (n - 1), local
            found["operator_fwd"] += fwd
            found["operator_bwd"] += bwd if flows else 0
    batch = batch_split(program)
    for src in graph.outputs:                      # outputs go back to the inputs' layout
        if src.kind == "node":
            have = output_layout(plans[src.node], src.index, src.shape)
            want = output_target(src.shape, world, batch)
            move(have, want, np.dtype(src.dtype or "float32").itemsize, grad[src.node])
    for param in graph.params.values():
        layout = param.sharding_layout
        if param.requires_grad and layout is not None and layout.replicated_axes():
            local = math.prod(layout.local_shape(program.rank))
            found["mirror"] += local * param.data.dtype.itemsize
    found["total"] = sum(found.values())
    return found
