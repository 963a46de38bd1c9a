"""The traced graph: a network's primitive calls on full shapes, recorded once.

Operator sharding decides, before anything runs sharded, how every primitive call of the
network is split. It needs the calls, their full (one-process) shapes and who feeds whom.
``trace(network, full_inputs)`` runs ``construct`` (or a function) once on full-size
stand-ins (zero-stride views of one zero with the inputs' full shapes; a parameter already
sliced stands in at full size the same way), without the tape, and records each primitive
call as a ``Node``: its primitive, its inputs (graph inputs, parameters, earlier nodes' outputs, or
constants), the shapes in and out, and the strategy the user gave with ``shard``.

Every rank traces the same graph, so strategies are planned alike everywhere; each rank then
runs ``construct`` again on its local slices, and the executor matches its primitive calls
to the nodes by call order.

A trace costs about one primitive's memory, not a forward's: each primitive's output is
replaced at once by a zero-stride stand-in of the same shape and dtype (``shape_only``), so
nothing the trace keeps (to keep ids unique) holds data. Nor does it cost a global-batch
forward: a primitive whose sharding rule can cut its batch into rows runs on one row and
its output shapes are scaled up (``row_trace``); the others run on the full shapes.

A traced callable may turn out to be a training step rather than a network: it computes
gradients (``value_and_grad``, noted by the parallel extension) or calls an optimizer (noted
here). The trace stops at that point, before the update and whatever else the step does
after it (``scope.TraceStopped``, caught in ``trace`` alone), and says so in
``Graph.training_step``; the caller then runs the step as written, so that the networks it
calls are the ones sharded.
"""
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...autograd import no_grad
from ...nn.cell import Cell, set_cell_hook
from ...nn.optim.optimizer import Optimizer
from ...nn.parameter import Parameter
from ...ops.primitive import set_primitive_hook
from ...tensor import Tensor
from .row_trace import one_row_shapes
from .scope import TraceStopped, note_training_step, trace_scope

__all__ = ["Source", "Node", "Graph", "trace", "shape_only", "zeros_view"]


@dataclass(frozen=True)
class Source:
    """Where a primitive's input comes from: ``kind`` is "input" (the network's argument
    ``index``), "param" (a Parameter, ``name``), "node" (output ``index`` of node
    ``node``), "tensor" (a tensor made inside construct, used whole) or "const"."""

    kind: str
    index: int = 0
    node: int = -1
    name: str = ""
    shape: tuple = ()
    dtype: str = ""

    def describe(self):
        if self.kind == "node":
            return f"%{self.node}" + (f"[{self.index}]" if self.index else "")
        if self.kind == "input":
            return f"%input{self.index}"
        if self.kind == "param":
            return f"%para_{self.name}"
        return f"<{self.kind}>"


@dataclass
class Node:
    """One primitive call. ``strategy`` is the user's ``in_strategy`` (or None) until
    propagation fills it; ``given`` says whether the user set it."""

    index: int
    prim: object
    scope: str
    inputs: tuple            # Source per tensor input, the value itself otherwise
    attrs: dict
    in_shapes: tuple         # full shape per input (None for non-tensor inputs)
    out_shapes: tuple
    out_dtypes: tuple
    strategy: tuple = None
    out_strategy: tuple = None
    given: bool = False
    consumers: list = field(default_factory=list)   # (node index, input position)

    @property
    def name(self):
        return self.prim.name

    @property
    def type_name(self):
        return type(self.prim).__name__

    def tensor_positions(self):
        return [i for i, s in enumerate(self.in_shapes) if s is not None]


@dataclass
class Graph:
    nodes: list
    input_shapes: tuple
    params: dict             # name -> Parameter
    outputs: tuple           # Source per output tensor
    training_step: str = None   # what made the traced call a training step (None: a network)

    def producers(self, node):
        """(position, producing node index or None) for each tensor input of ``node``."""
        return [(i, node.inputs[i].node if node.inputs[i].kind == "node" else None)
                for i in node.tensor_positions()]

    def param_uses(self):
        """name -> [(node index, input position)] in call order."""
        uses = {}
        for node in self.nodes:
            for i in node.tensor_positions():
                src = node.inputs[i]
                if src.kind == "param":
                    uses.setdefault(src.name, []).append((node.index, i))
        return uses


def _dtype(t):
    return str(np.dtype(t.data.dtype)) if isinstance(t, Tensor) else ""


class _Tracer:
    def __init__(self, network):
        # MindSpore's scope spelling: Default/network-WithLossCell/_backbone-Net
        self.names = {}
        if isinstance(network, Cell):
            self.names = {id(child): attr for _, cell in network.cells_and_names()
                          for attr, child in cell._cells.items()}
            self.names[id(network)] = "network"
        self.scopes = ["Default"]
        self.sources = {}    # id(tensor) -> Source
        # the traced tensors stay alive so that ids stay unique; what a primitive made is
        # kept as a shape-only stand-in (``shape_only``), so keeping it costs no memory
        self.keep = []
        self.nodes = []
        self.params = {}

    def cell_hook(self, cell, inputs, kwargs):
        if isinstance(cell, Optimizer):      # an update would change the weights: stop here
            note_training_step(type(cell).__name__)
        self.scopes.append(f"{self.names.get(id(cell), 'cell')}-{type(cell).__name__}")
        try:
            return cell.construct(*inputs, **kwargs)
        finally:
            self.scopes.pop()

    def source_of(self, value):
        if not isinstance(value, Tensor):
            return value
        known = self.sources.get(id(value))
        if known is not None:
            return known
        if isinstance(value, Parameter):
            name = value.name
            while name in self.params and self.params[name] is not value:
                name += "'"           # two parameters of one name (not yet given their paths)
            self.params[name] = value
            src = Source("param", name=name, shape=tuple(_full_size(value).shape),
                         dtype=_dtype(value))
        else:
            src = Source("tensor", shape=tuple(value.shape), dtype=_dtype(value))
        self.sources[id(value)] = src
        self.keep.append(value)
        return src

    def primitive_hook(self, prim, inputs, attrs):
        whole = tuple(_full_size(x) for x in inputs)
        with no_grad(), _scratch_pools(whole):
            out = _traced_outputs(prim, whole, attrs)
        index = len(self.nodes)
        outs = out if isinstance(out, tuple) else (out,)
        for k, o in enumerate(outs):
            self.sources[id(o)] = Source("node", index=k, node=index, shape=tuple(o.shape),
                                         dtype=_dtype(o))
            self.keep.append(o)
        srcs = tuple(self.source_of(x) for x in inputs)
        node = Node(index, prim, "/".join(self.scopes), srcs, dict(attrs),
                    tuple(tuple(x.shape) if isinstance(x, Tensor) else None for x in whole),
                    tuple(tuple(o.shape) for o in outs), tuple(_dtype(o) for o in outs),
                    strategy=prim.in_strategy, out_strategy=prim.out_strategy,
                    given=prim.in_strategy is not None)
        for i, s in enumerate(srcs):
            if isinstance(s, Source) and s.kind == "node":
                self.nodes[s.node].consumers.append((index, i))
        self.nodes.append(node)
        return out


def _traced_outputs(prim, whole, attrs):
    """``prim``'s outputs on ``whole`` as shape-only stand-ins: from one row of the batch
    where its sharding rule allows (``row_trace``), else from a run on the whole inputs.
    The values never matter, only the shapes: computed arrays go at once."""
    found = one_row_shapes(prim, whole, attrs)
    if found is None:
        out = prim.run(*whole, **attrs)
        return tuple(shape_only(o) for o in out) if isinstance(out, tuple) else shape_only(out)
    out, shapes = found
    outs = out if isinstance(out, tuple) else (out,)
    made = tuple(Tensor._make(zeros_view(shape, o.data.dtype, o.device), o.device)
                 for o, shape in zip(outs, shapes))
    return made if isinstance(out, tuple) else made[0]


@contextmanager
def _scratch_pools(inputs):
    """The devices' buffer pools replaced, while one traced primitive runs, by empty ones
    dropped after: its workspaces have the global batch's shapes, which the local runs never
    ask for again, and a pool keeping one per shape would grow with the network's depth."""
    devices = {id(x.device): x.device for x in inputs if isinstance(x, Tensor)}
    with ExitStack() as stack:      # per thread: thread ranks share the devices
        for device in devices.values():
            stack.enter_context(device.scratch_pool())
        yield


def _flatten(values):
    if isinstance(values, Tensor):
        return [values]
    if type(values) in (tuple, list):
        return [t for v in values for t in _flatten(v)]
    return []


def zeros_view(shape, dtype, device):
    """A ``shape`` array of zeros that holds one element: every index reads (and, on the
    host, writes) the same one. A trace needs shapes, not values, so its stand-ins cost
    nothing to keep and a primitive writing into one still works."""
    xp = device.xp
    if xp is np:
        cell = np.zeros(1, dtype)
        return np.ndarray(tuple(shape), cell.dtype, buffer=cell, strides=(0,) * len(shape))
    return xp.broadcast_to(xp.zeros((), dtype), tuple(shape))


def shape_only(value):
    """``value`` (a primitive's output in a trace) as a zero-cost stand-in of its shape; a
    Parameter an update returns stays itself (its later uses are the parameter's)."""
    if not isinstance(value, Tensor) or isinstance(value, Parameter):
        return value
    return Tensor._make(zeros_view(value.shape, value.data.dtype, value.device), value.device)


def _full_size(x):
    """A parameter at its full shape, as a zero-stride view of one zero: tracing needs
    shapes, not values; it must not draw deferred values, and a primitive that updates a
    parameter in place (a training BatchNorm's moving statistics) must not update the real
    one with the trace's zeros. Other tensors are themselves, unless not yet drawn."""
    if not isinstance(x, Tensor) or (x.deferred_init is None and not isinstance(x, Parameter)):
        return x
    layout = getattr(x, "sharding_layout", None)
    if x.deferred_init is not None:
        shape = x.deferred_init.shape
    elif layout is not None and tuple(x.shape) != layout.shape:
        shape = layout.shape
    else:
        shape = tuple(x.shape)
    return Tensor._make(zeros_view(shape, x.data.dtype, x.device), x.device)


def trace(network, full_inputs, positions=None):
    """The ``Graph`` of ``network`` (a Cell or a function) called on ``full_inputs``.

    ``positions``: which arguments are the graph's tensor inputs (default: all of them);
    the others are passed as they are. Tensors need only the full shapes; their values do
    not matter. Nothing is recorded on the tape. When the call computes gradients or runs an
    optimizer, the trace stops there and ``Graph.training_step`` names what it reached."""
    positions = range(len(full_inputs)) if positions is None else positions
    if isinstance(network, Cell):
        list(network.parameters_and_names())     # parameters take their attribute paths
    tracer = _Tracer(network)
    inputs = [full_inputs[i] for i in positions]
    for k, x in enumerate(inputs):
        tracer.sources[id(x)] = Source("input", index=k, shape=tuple(x.shape), dtype=_dtype(x))
        tracer.keep.append(x)
    old_cell = set_cell_hook(tracer.cell_hook)
    old_prim = set_primitive_hook(tracer.primitive_hook)
    try:
        # zeros through real weights may divide by zero or overflow: harmless, unseen
        with trace_scope() as scope, np.errstate(all="ignore"):
            try:
                if isinstance(network, Cell):
                    out = tracer.cell_hook(network, tuple(full_inputs), {})
                else:
                    out = network(*full_inputs)
            except TraceStopped:        # a training step: what comes after it is not traced
                out = ()
    finally:
        set_cell_hook(old_cell)
        set_primitive_hook(old_prim)
    outputs = tuple(tracer.source_of(t) for t in _flatten(out))
    return Graph(tracer.nodes, tuple(tuple(x.shape) for x in inputs), tracer.params, outputs,
                 scope.training_step)
