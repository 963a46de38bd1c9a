"""``ShardedCall``: one network call (a Cell or a function) run operator-sharded over the ranks.

Under ``SEMI_AUTO_PARALLEL``/``AUTO_PARALLEL`` every way of running a network comes here
(``parallel/extension.py``): a Cell called from a script, ``Model``, ``TrainOneStepCell``,
a user's ``GradOperation`` cell, ``value_and_grad`` of a function, ``jit`` and
``AutoParallel``. The first call with given input shapes

1. works out the full shapes of the inputs from ``dataset_strategy`` (under "data_parallel"
   each rank's batch is its slice of the global batch; "full_batch": the whole batch; a tuple
   gives each input's split counts);
2. traces the call once on full-size stand-ins (``graph.trace``: zero-stride views, so the
   trace holds about one primitive's arrays at a time, not a forward's); a trace that reached a
   gradient computation or an optimizer (``Graph.training_step``) found a training step: it
   runs as written from then on, so that the network it differentiates is sharded;
3. decides every node's strategy (``propagation.assign_strategies``);
4. gives every parameter its slice: rank 0's full-size initial values (or, for parameters
   made under ``no_init_parameters``, the slice drawn directly from the same random stream),
   and the optimizers' state with it;
5. writes ``step_parallel_begin_NNNN.ir`` when ``save_graphs`` is on.

Every call then runs the rank's local program (``executor.LocalRun``, the primitive hook
while it runs; sub-cells run their ``construct`` through a cell hook installed only as long),
parameters entering through a mirror (gradient summed over the ranks holding the same slice). Outputs come back in
the layout the inputs came in: a batch-sized output as this rank's rows under "data_parallel"
(so a loss function called next, or a metric, sees matching rows), anything else whole on
every rank. The gradient of an output is divided by the number of ranks holding it, because
every copy back-propagates the same value and the collectives' backward sums over ranks.
"""
import logging
import math
import weakref
from contextlib import contextmanager

import numpy as np

from ... import communication
from ...nn.cell import Cell, set_cell_hook
from ...ops.primitive import Primitive
from ...recompute import recomputed_call
from ...tensor import Tensor
from ..comm.final_reduction import settle
from ..context import ParallelMode, check_job_size, get_auto_parallel_context
from .executor import LocalRun, active_run
from ..dynamic_shape import declarations_version, has_dynamic_inputs
from .graph import trace, zeros_view
from .groups import GroupCache
from .input_agreement import agree_on_shapes
from .ir_dump import ExecuteListing, dump_begin, dump_execute
from .layout import TensorLayout
from .parameters import slice_parameter
from .propagation import assign_strategies, input_layout
from .redistribution import plan_redistribution, redistribute
from .scope import current_world, run_scope

logger = logging.getLogger("minitorch_dist")

__all__ = ["ShardedCall", "ShardedProgram", "dataset_layouts",
           "split_layout"]


def split_layout(splits, shape, world):
    """The layout that splits dim ``i`` of ``shape`` ``splits[i]`` ways, each split over its
    own device-matrix axis, with the leftover devices as a trailing repeated axis (as the
    operators' strategies place it)."""
    used = int(np.prod(splits)) if splits else 1
    if used > world or world % used:
        raise ValueError(f"a split of {tuple(splits)} needs a number of devices dividing "
                         f"{world}, got {used}")
    axes = [s for s in splits if s > 1]
    repeated = (world // used,) if world // used > 1 or not axes else ()
    tensor_map, next_axis = [], len(axes) - 1 + len(repeated)
    for s in splits:
        if s > 1:
            tensor_map.append(next_axis)
            next_axis -= 1
        else:
            tensor_map.append(-1)
    return TensorLayout(tuple(axes) + repeated, tuple(tensor_map), tuple(shape))


def dataset_splits(local_shapes, world, strategy=None):
    """Each input's split counts under ``dataset_strategy``."""
    strategy = get_auto_parallel_context("dataset_strategy") if strategy is None else strategy
    if get_auto_parallel_context("full_batch"):
        strategy = "full_batch"
    if strategy == "full_batch":
        return [(1,) * len(s) for s in local_shapes]
    if strategy == "data_parallel":
        return [((world,) + (1,) * (len(s) - 1)) if s else () for s in local_shapes]
    if len(strategy) != len(local_shapes):
        raise ValueError(f"dataset_strategy gives {len(strategy)} input strategies but the "
                         f"network takes {len(local_shapes)} inputs")
    return [tuple(s) for s in strategy]


def dataset_layouts(local_shapes, world, strategy=None):
    """(full shapes, layouts) of the network's inputs under ``dataset_strategy``."""
    full, layouts = [], []
    for shape, split in zip(local_shapes, dataset_splits(local_shapes, world, strategy)):
        if len(split) != len(shape):
            raise ValueError(f"dataset_strategy {split} does not match an input of shape {shape}")
        whole = tuple(n * s for n, s in zip(shape, split))
        full.append(whole)
        layouts.append(split_layout(split, whole, world))
    return full, layouts


class ShardedProgram:
    """What every rank agrees on (the graph, each node's plan, the parameters' layouts) and
    what this rank needs to run its part (its rank, its communication groups)."""

    def __init__(self, graph, plans, world, rank, groups, input_layouts):
        self.graph = graph
        self.plans = plans
        self.world = world
        self.rank = rank
        self.groups = groups
        self.input_layouts = input_layouts

    def group(self, ranks):
        return self.groups.get(ranks)


class ShardedCall:
    """``fn`` (a Cell or a function of tensors) run operator-sharded; see the module
    docstring. ``optimizer``: one more optimizer whose state follows the parameters' slices
    (every live optimizer holding a sliced parameter follows anyway). ``group``: the
    communicator of the ranks (default: this thread's ``current_world()``).

    ``fn`` is held weakly: its owner keeps it alive, and a cache of calls keyed by the network
    (``parallel/extension.py``) must not. ``training_step`` names what a trace found that
    makes ``fn`` a training step (None while it is a network); such a call runs ``fn`` as
    written."""

    _live = weakref.WeakSet()

    @classmethod
    def instances(cls):
        """Every live ShardedCall (the tests and the benchmark read their programs)."""
        return list(cls._live)

    def __init__(self, fn, optimizer=None, group=None):
        ShardedCall._live.add(self)
        self.fn = fn
        self.training_step = None
        self.optimizer = optimizer
        self.group = group
        self.programs = {}          # input signature -> ShardedProgram
        self.program = None         # the last one run
        self.steps = 0
        self._groups = None
        self._dynamic = None

    @property
    def fn(self):
        fn = self._fn()
        if fn is None:
            raise ReferenceError("ShardedCall: the network or function it runs no longer exists")
        return fn

    @fn.setter
    def fn(self, fn):
        try:
            self._fn = weakref.ref(fn)
        except TypeError:           # a callable without weak references: held as it is
            self._fn = lambda: fn

    def _dynamic_inputs(self):
        """Whether the network declared dynamic inputs (``set_inputs``): its ranks then
        check that they agree on every call's shapes (``input_agreement``)."""
        version = declarations_version()
        if self._dynamic is None or self._dynamic[0] != version:
            self._dynamic = (version, has_dynamic_inputs(self.fn))
        return self._dynamic[1]

    def world_communicator(self):
        return self.group if self.group is not None else current_world()

    # ---- set-up -----------------------------------------------------------------------
    def prepare(self, args, positions):
        """The ``ShardedProgram`` of a call on ``args``, or None when its trace found a
        training step (then ``training_step`` says what)."""
        comm = self.world_communicator()
        world, rank = (comm.size, comm.rank) if comm is not None else (1, 0)
        if communication.GlobalComm.INITED:      # the job's size, not a stage group's
            check_job_size(communication.get_group_size(), communication.get_rank(),
                           "sharded network")
        local_shapes = [tuple(args[i].shape) for i in positions]
        full_shapes, layouts = dataset_layouts(local_shapes, world)
        stand_ins = list(args)
        for i, shape in zip(positions, full_shapes):
            x = args[i]
            stand_ins[i] = Tensor._make(zeros_view(shape, x.data.dtype, x.device), x.device)
        graph = trace(self.fn, stand_ins, positions)
        del stand_ins
        if graph.training_step is not None:
            self.training_step = graph.training_step
            logger.debug("%s reaches %s: a training step, run as written", self.fn,
                         graph.training_step)
            return None
        # AUTO_PARALLEL searches by sharding propagation whatever search_mode names (there is
        # no dynamic-programming or recursive search here): annotated operators spread their
        # strategies, the rest is chosen greedily against the dataset's layouts
        propagate = get_auto_parallel_context("parallel_mode") == ParallelMode.AUTO_PARALLEL
        if propagate and get_auto_parallel_context("search_mode") != "sharding_propagation":
            logger.warning("search_mode=%r is served by sharding propagation",
                           get_auto_parallel_context("search_mode"))
        plans = assign_strategies(graph, world, layouts, propagate)
        if self._groups is None or self._groups.world != world:
            self._groups = GroupCache(world, rank, parent=comm)
        program = ShardedProgram(graph, plans, world, rank, self._groups, layouts)
        for name, uses in graph.param_uses().items():
            node_index, position = uses[0]
            param = graph.params[name]
            full_shape = graph.nodes[node_index].in_shapes[position]
            slice_parameter(param, input_layout(plans[node_index], position, full_shape),
                            rank, comm, self.optimizer)
        dump_begin(graph, plans, rank)
        _strategy_checkpoint()
        return program

    # ---- a call -----------------------------------------------------------------------
    def __call__(self, *args):
        if self.training_step is None:
            # arrays are data too: as Tensors they take the dataset's layout, not "whole"
            tensors = tuple(Tensor(a) if isinstance(a, np.ndarray) else a for a in args)
            positions = [i for i, a in enumerate(tensors) if isinstance(a, Tensor)]
            key = tuple((i, tuple(tensors[i].shape), str(tensors[i].data.dtype))
                        for i in positions)
            key += tuple(_constant_key(a) for a in tensors if not isinstance(a, Tensor))
            if self._dynamic_inputs():
                agree_on_shapes(self.world_communicator(),
                                [tuple(tensors[i].shape) for i in positions])
            program = self.programs.get(key)
            if program is None:
                program = self.prepare(tensors, positions)
            if program is not None:
                self.programs[key] = program
                return self.run(program, tensors, positions)
        fn = self.fn      # a training step: as written, its network calls are sharded
        return fn.construct(*args) if isinstance(fn, Cell) else fn(*args)

    def run(self, program, args, positions):
        """This rank's local program on ``args`` (see the module docstring)."""
        self.program = program
        layouts = {id(args[i]): layout for i, layout in zip(positions, program.input_layouts)}
        for param in program.graph.params.values():
            layouts[id(param)] = param.sharding_layout
        listing = None
        if _dumping() and not self.steps:
            listing = ExecuteListing(program.rank)
            for k, i in enumerate(positions):
                listing.name(args[i], f"%input{k}")
            for name, param in program.graph.params.items():
                listing.name(param, f"%para_{name}")
        fn = self.fn
        with run_scope(), _cells_construct(), LocalRun(program, layouts, listing) as run:
            out = fn.construct(*args) if isinstance(fn, Cell) else fn(*args)
        batch = batch_split(program)
        out = _map_tensors(out, lambda t: _finish(t, run, program, batch))
        if listing is not None:
            dump_execute(listing, program.rank, self.steps)
        self.steps += 1
        return out


def _construct(cell, inputs, kwargs):
    """The cell hook of a sharded run: a cell called inside it runs its ``construct``, its
    primitives going to the executor (the parallel extension is not asked again); a cell
    with ``Cell.recompute()`` is recomputed in backward."""
    run = active_run()
    if run is not None and cell.__dict__.get("_recompute"):
        return _recomputed(run, cell, inputs, kwargs)
    return cell.construct(*inputs, **kwargs)


def _recomputed(run, cell, inputs, kwargs):
    """``cell`` run once without the tape and again in backward (``recomputed_call``); the
    second run replays the same traced nodes (``LocalRun.replay_from``) from the call index
    and input layouts of the first."""
    start, entry_layouts, first = run.calls, [], []

    def block(*xs, **kw):
        if first:                                   # the second run, in backward
            with run_scope(), _cells_construct(), run.replay_from(start, xs, entry_layouts):
                return cell.construct(*xs, **kw)
        entry_layouts.extend(run.layouts.get(id(x)) for x in xs)
        kept = dict(run.mirrored)     # mirrors made without the tape must serve no later use
        try:
            first.append(cell.construct(*xs, **kw))
        finally:
            run.mirrored.clear()
            run.mirrored.update(kept)
        return first[0]

    out = recomputed_call(block, inputs, kwargs, owner=cell)
    if first:                     # the outputs carry the layouts the first run gave them
        raws = first[0] if isinstance(first[0], tuple) else (first[0],)
        made = out if isinstance(out, tuple) else (out,)
        for raw, tensor in zip(raws, made):
            layout = run.layouts.get(id(raw))
            if layout is not None:
                run.layouts[id(tensor)] = layout
                run.keep.append(tensor)
    return out


@contextmanager
def _cells_construct():
    """``_construct`` as this thread's cell hook for the block, the previous one after (also
    when the block raises)."""
    previous = set_cell_hook(_construct)
    try:
        yield
    finally:
        set_cell_hook(previous)


def _strategy_checkpoint():
    """``strategy_ckpt_config`` (or ``strategy_ckpt_save_file``/``strategy_ckpt_load_file``):
    the layouts written after each plan, and checked against the saved ones."""
    from ..strategy_ckpt import save_and_check_strategy
    save_and_check_strategy()


def _constant_key(value):
    """A non-tensor argument's part of the program key: its value when it is a plain
    number or string (the trace saw it), else the object itself (a Cell passed in)."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return ("value", type(value).__name__, value)
    return ("object", id(value))


def batch_split(program):
    """(full batch size, split count) of the first input split on its first dim, or None."""
    for layout in program.input_layouts:
        if layout.shape and layout.local_shape()[0] != layout.shape[0]:
            return layout.shape[0], layout.shape[0] // layout.local_shape()[0]
    return None


def output_target(shape, world, batch):
    """Where an output goes: this rank's rows of a batch-sized output when the inputs came
    split by rows, otherwise whole on every rank."""
    if batch is not None and shape and shape[0] == batch[0]:
        return split_layout((batch[1],) + (1,) * (len(shape) - 1), shape, world)
    return TensorLayout.replicated(shape, world)


def _finish(tensor, run, program, batch):
    have = run.layouts.get(id(tensor))
    if have is None:              # not made by a primitive (an input passed through)
        return tensor
    want = output_target(have.shape, program.world, batch)
    if plan_redistribution(have, want):
        settle(tensor)      # a deferred total is read here: it cannot wait for backward
        tensor = redistribute(tensor, have, want, program.rank, program.group)
    copies = math.prod(want.axis_size(a) for a in want.replicated_axes())
    return _ReplicaShare(copies)(tensor) if tensor.requires_grad and copies > 1 else tensor


class _ReplicaShare(Primitive):
    """Identity forward; backward divides by the number of ranks holding the value."""

    def __init__(self, copies):
        self.copies = copies

    def forward(self, ctx, x):
        return x

    def backward(self, ctx, grad):
        return (grad / self.copies,)


def _map_tensors(values, fn):
    if isinstance(values, Tensor):
        return fn(values)
    if type(values) in (tuple, list):
        return type(values)(_map_tensors(v, fn) for v in values)
    return values


def _dumping():
    from ...context import get_context
    return bool(get_context("save_graphs"))
