"""One rank's local program: ``construct`` on local slices, with the communication inserted.

The rank calls the network's ``construct`` again, eagerly, on its own slices. A primitive
hook sees every call, matches it to the traced node of the same call index, and:

0. lets each parameter in through a mirror (``Mirror``) over the ranks holding the
   same slice, once per run, so that the copies' gradients are summed in the backward;
1. moves each tensor input from the layout it has (a producer's output, a parameter's
   slice, the dataset's split) to the layout the node's strategy wants: ``redistribute``
   (local slice, AllGather, AllReduce, ReduceScatter, AllToAll — each an autograd primitive,
   so the backward communication comes from the tape);
2. runs the ordinary primitive on the local slices (with local attributes, e.g. a
   Reshape's local shape);
3. performs the node's own forward communication (MatMul's AllReduce over a split
   contracting axis, a ReduceScatter for an ``out_strategy``, a reduction over a split axis).

The communication and local slicing it inserts run directly (``Primitive.run`` through
``collectives.run_inserted`` and ``redistribution.apply_step``), never through this hook
again: the hook sees the network's own primitive calls only.

Each step is written to the per-rank program listing (``…_execute_….ir``).

A cell with ``Cell.recompute()`` runs its calls once without the tape; in backward it runs
them again (``replay_from``: the same nodes from the same call index, the same layouts and
communication), so its activations are not kept between forward and backward.

While the run is under way the layers' shape checks (``nn.layers.logical_shape``) see each
tensor's whole shape, as in MindSpore, where ``construct`` is compiled on the logical shapes.
"""
from ...nn.layers.logical_shape import set_logical_shape_provider
from ...nn.parameter import Parameter
from ...runtime import _once
from ...thread_state import ThreadState
from ...ops.primitive import set_primitive_hook
from ..comm.collectives import run_inserted
from ..comm.final_reduction import final_reductions
from .layout import TensorLayout, group_ranks
from .propagation import input_layout, output_layout
from .redistribution import plan_redistribution, redistribute
from .rules import run_local

__all__ = ["ShardingMismatchError", "LocalRun", "active_run"]


_active = ThreadState(run=None)      # this thread's LocalRun, while one runs


def active_run():
    """This thread's ``LocalRun`` while a sharded forward runs, else None."""
    return _active.run


def _whole_shape(tensor):
    """The logical shape of a tensor this thread's sharded run laid out, else None."""
    run = _active.run
    if run is None:
        return None
    layout = run.layouts.get(id(tensor))
    return None if layout is None else layout.shape


set_logical_shape_provider(_whole_shape)


class ShardingMismatchError(RuntimeError):
    """construct called different primitives than when it was traced."""


class LocalRun:
    """The primitive hook of one forward pass on one rank (see the module docstring)."""

    def __init__(self, program, layouts, listing=None):
        self.program = program
        self.graph = program.graph
        self.rank = program.rank
        self.layouts = layouts          # id(tensor) -> TensorLayout, the inputs and parameters
        self.keep = []
        self.mirrored = {}              # id(parameter) -> the tensor that enters through a mirror
        self.calls = 0
        self.listing = listing
        self.replaying = False          # a recomputed cell's second run: some nodes only

    def __enter__(self):
        self._old = set_primitive_hook(self.primitive_hook)
        self._outer, _active.run = _active.run, self
        return self

    def __exit__(self, *exc):
        set_primitive_hook(self._old)
        _active.run = self._outer
        if exc[0] is None and not self.replaying and self.calls != len(self.graph.nodes):
            raise ShardingMismatchError(
                f"construct made {self.calls} primitive calls on this rank but "
                f"{len(self.graph.nodes)} when traced: operator sharding needs the same calls "
                "every step (no data-dependent control flow)")
        return False

    def replay_from(self, start, inputs, layouts):
        """A run of this program's nodes from call ``start``, on ``inputs`` laid out as
        ``layouts`` (None: unknown): a recomputed cell's second run, in backward, which
        must make the same calls with the same communication as its first."""
        replay = LocalRun(self.program, dict(self.layouts))
        replay.calls, replay.replaying = start, True
        replay.layouts.update((id(x), layout) for x, layout in zip(inputs, layouts)
                              if layout is not None)
        return replay

    def layout_of(self, tensor, node, position):
        known = self.layouts.get(id(tensor))
        if known is not None:
            return known
        # a tensor made inside construct, not by a primitive: every rank holds all of it
        return TensorLayout.replicated(node.in_shapes[position], self.program.world)

    def primitive_hook(self, prim, inputs, attrs):
        if self.calls >= len(self.graph.nodes) or self.graph.nodes[self.calls].prim is not prim:
            expected = (self.graph.nodes[self.calls].name if self.calls < len(self.graph.nodes)
                        else "no further call")
            raise ShardingMismatchError(
                f"primitive call {self.calls} is {prim.name} but the traced graph has "
                f"{expected} there: construct must call the same primitives every step")
        node = self.graph.nodes[self.calls]
        self.calls += 1
        if prim._recompute:
            _once("sharding.primitive_recompute",
                  f"Primitive.recompute: {prim.name} in an operator-sharded run keeps its "
                  "inputs for backward (recompute a Cell instead: Cell.recompute())")
        shard_plan = self.program.plans[node.index]
        inputs = [self.through_mirror(x) if isinstance(x, Parameter) else x for x in inputs]
        local = list(inputs)
        for i in node.tensor_positions():
            have = self.layout_of(inputs[i], node, i)
            want = input_layout(shard_plan, i, node.in_shapes[i])
            local[i] = self.move(inputs[i], have, want, node, i)
        out = run_local(shard_plan, prim, local, attrs, self.rank)
        self.note(node, local, out)
        outs = list(out) if isinstance(out, tuple) else [out]
        for step in shard_plan.forward_comm:
            outs[step.output] = self.communicate(node, shard_plan, step, outs[step.output])
        for k, o in enumerate(outs):
            self.layouts[id(o)] = output_layout(shard_plan, k, node.out_shapes[k])
            self.keep.append(o)
        return tuple(outs) if isinstance(out, tuple) else outs[0]

    def through_mirror(self, param):
        """``param`` as the computation sees it: through a mirror over the ranks holding the
        same slice when there are several and it is trained, else itself."""
        seen = self.mirrored.get(id(param))
        if seen is not None:
            return seen
        layout = self.layouts.get(id(param))
        tensor = param
        if layout is not None and param.requires_grad and layout.replicated_axes():
            ranks = group_ranks(layout.device_matrix, layout.replicated_axes(), self.rank)
            tensor = run_inserted("mirror", param, self.program.group(ranks))
            self.layouts[id(tensor)] = layout
            self.keep.append(tensor)
            if self.listing is not None and id(param) in self.listing.names:
                self.listing.name(tensor, self.listing.names[id(param)])
        self.mirrored[id(param)] = tensor
        return tensor

    def move(self, tensor, have, want, node, position):
        steps = plan_redistribution(have, want)
        if not steps:
            return tensor
        moved = redistribute(tensor, have, want, self.rank, self.program.group)
        if self.listing is not None:
            self.listing.redistribution(node, position, steps, tensor, moved)
        return moved

    def communicate(self, node, shard_plan, step, tensor):
        ranks = group_ranks(shard_plan.device_matrix, step.axes, self.rank)
        group = self.program.group(ranks)
        if step.kind == "all_reduce" and self.closes_forward(node, step, group):
            out = final_reductions().defer(tensor, group, step.op)
        elif step.kind == "all_reduce":
            out = run_inserted("all_reduce", tensor, group, op=step.op)
        elif step.kind == "reduce_scatter":
            out = run_inserted("reduce_scatter", tensor, group, axis=step.dim, op=step.op)
        else:
            raise ValueError(f"{node.name}: unknown forward communication {step.kind!r}")
        if self.listing is not None:
            self.listing.collective(node, step, ranks, tensor, out)
        return out

    def closes_forward(self, node, step, group):
        """Whether this all-reduce may wait until after backward: a sum or mean in the
        network's last call, inside a differentiation that defers it
        (``final_reduction.py``)."""
        finals = final_reductions()
        return (finals is not None and step.op in ("sum", "mean") and not self.replaying
                and node.index == len(self.graph.nodes) - 1 and finals.accepts(group))

    def note(self, node, local_inputs, out):
        if self.listing is not None:
            self.listing.primitive(node, local_inputs, out)

