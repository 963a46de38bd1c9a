"""``ShardedCell``: a network run operator-sharded across the ranks of the world.

``TrainOneStepCell`` (and so ``Model``) wraps its network in one under
``parallel_mode=SEMI_AUTO_PARALLEL`` or ``AUTO_PARALLEL``. On the first call it

1. works out the full shapes of the inputs from ``dataset_strategy`` (each rank's batch is
   its slice of the global batch under "data_parallel"; the whole batch under "full_batch";
   a tuple gives each input's split counts);
2. traces ``construct`` once on full-size stand-ins (``graph.trace``);
3. decides every node's strategy (``propagation.assign_strategies``);
4. slices every parameter to the layout of its first use, and the optimizer's state with it,
   so that every configuration starts from one process's full-size initial weights;
5. writes ``step_parallel_begin_NNNN.ir`` when ``save_graphs`` is on.

Every call then runs the rank's local program (``executor.LocalRun``). The outputs are
gathered to full size on every rank; their gradient is divided by the world size, because
each rank back-propagates the same full loss and the collectives' backward sums over ranks.
"""
import logging

import numpy as np

from ... import communication
from ...nn.cell import Cell
from ...ops.primitive import Primitive
from ...tensor import Tensor
from ..comm_ops import communicator_for
from ..context import ParallelMode, get_auto_parallel_context
from .executor import LocalRun
from .graph import trace
from .groups import GroupCache
from .ir_dump import ExecuteListing, dump_begin, dump_execute
from .layout import TensorLayout
from .propagation import assign_strategies, input_layout
from .redistribution import redistribute

logger = logging.getLogger("minitorch_dist")

__all__ = ["ShardedCell", "ShardedProgram", "shards_operators", "dataset_layouts"]


def shards_operators(network):
    """True when ``network`` runs operator-sharded: SEMI_AUTO_PARALLEL or AUTO_PARALLEL
    without pipeline stages (a pipelined job, which MindSpore also runs under
    SEMI_AUTO_PARALLEL, is run by ``PipelineCell`` instead; the two do not combine here)."""
    if get_auto_parallel_context("parallel_mode") not in (ParallelMode.SEMI_AUTO_PARALLEL,
                                                          ParallelMode.AUTO_PARALLEL):
        return False
    if get_auto_parallel_context("pipeline_stages") > 1:
        return False
    from ..pipeline import PipelineCell, PipelineEvalCell
    return not any(isinstance(cell, (PipelineCell, PipelineEvalCell, ShardedCell))
                   for _, cell in network.cells_and_names())


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


def dataset_layouts(local_shapes, world, strategy=None):
    """(full shapes, layouts) of the network's inputs under ``dataset_strategy``."""
    strategy = get_auto_parallel_context("dataset_strategy") if strategy is None else strategy
    if get_auto_parallel_context("full_batch"):
        strategy = "full_batch"
    if strategy == "full_batch":
        splits = [(1,) * len(s) for s in local_shapes]
    elif strategy == "data_parallel":
        splits = [((world,) + (1,) * (len(s) - 1)) if s else () for s in local_shapes]
    else:
        if len(strategy) != len(local_shapes):
            raise ValueError(f"dataset_strategy gives {len(strategy)} input strategies but the "
                             f"network takes {len(local_shapes)} inputs")
        splits = [tuple(s) for s in strategy]
    full, layouts = [], []
    for shape, split in zip(local_shapes, splits):
        if len(split) != len(shape):
            raise ValueError(f"dataset_strategy {split} does not match an input of shape {shape}")
        whole = tuple(n * s for n, s in zip(shape, split))
        full.append(whole)
        layouts.append(split_layout(split, whole, world))
    return full, layouts


class ShardedProgram:
    """What every rank agrees on (the graph, each node's plan, the parameters' layouts) and
    what this rank needs to run its part (its rank, its communication groups)."""

    def __init__(self, graph, plans, world, rank, groups):
        self.graph = graph
        self.plans = plans
        self.world = world
        self.rank = rank
        self.groups = groups

    def group(self, ranks):
        return self.groups.get(ranks)


class ShardedCell(Cell):
    """``network`` run operator-sharded; ``optimizer`` (optional) has its state sliced with
    the parameters. See the module docstring."""

    _name_scope = False

    def __init__(self, network, optimizer=None, group=None):
        super().__init__()
        self.network = network
        object.__setattr__(self, "_optimizer", optimizer)
        object.__setattr__(self, "_group", group)
        object.__setattr__(self, "program", None)
        object.__setattr__(self, "_steps", 0)
        object.__setattr__(self, "_input_layouts", None)

    # ---- set-up -----------------------------------------------------------------------
    def prepare(self, inputs):
        comm = self.world_communicator()
        world, rank = (comm.size, comm.rank) if comm is not None else (1, 0)
        local_shapes = [tuple(x.shape) for x in inputs]
        full_shapes, layouts = dataset_layouts(local_shapes, world)
        stand_ins = [Tensor(np.zeros(s, _np_dtype(x))) for s, x in zip(full_shapes, inputs)]
        with _full_size_parameters(self.network):
            graph = trace(self.network, stand_ins)
        # AUTO_PARALLEL searches by sharding propagation whatever search_mode names (there is
        # no dynamic-programming or recursive search here): annotated operators spread their
        # strategies, the rest is chosen greedily against the dataset's layouts
        propagate = get_auto_parallel_context("parallel_mode") == ParallelMode.AUTO_PARALLEL
        if propagate and get_auto_parallel_context("search_mode") != "sharding_propagation":
            logger.warning("search_mode=%r is served by sharding propagation",
                           get_auto_parallel_context("search_mode"))
        plans = assign_strategies(graph, world, layouts, propagate)
        program = ShardedProgram(graph, plans, world, rank, GroupCache(world, rank, parent=comm))
        object.__setattr__(self, "program", program)
        object.__setattr__(self, "_input_layouts", layouts)
        self._slice_parameters(graph, plans, rank, comm)
        dump_begin(graph, plans, rank)
        return program

    def world_communicator(self):
        """The communicator of the ranks sharing the work: ``group`` (a Communicator, as the
        tests pass from ``run_ranks``), else the initialized world, else None (one process)."""
        if self._group is not None:
            return self._group
        return communication.get_communicator() if communication.GlobalComm.INITED else None

    def _slice_parameters(self, graph, plans, rank, comm):
        """Every rank takes its slice of rank 0's full-size initial values (broadcast first:
        processes that did not call ``set_seed`` alike drew different weights)."""
        slots = _optimizer_slots(self._optimizer)
        for name, uses in graph.param_uses().items():
            param = graph.params[name]
            if getattr(param, "sharding_layout", None) is not None:
                continue                 # sliced already (another network shares it)
            if comm is not None and comm.size > 1:
                param.data = param.device.xp.ascontiguousarray(param.data)
                communicator_for(comm, param.device).broadcast(param.data, root=0)
            node_index, position = uses[0]
            layout = input_layout(plans[node_index], position, tuple(param.shape))
            index = layout.slice_for(rank)
            param.data = param.data[index].copy()   # a new shape: set_data keeps shapes
            param.sharding_layout, param.sharding_rank = layout, rank
            for state in slots.get(id(param), ()):
                if tuple(state.shape) == layout.shape:
                    state.data = state.data[index].copy()
                    state.sharding_layout, state.sharding_rank = layout, rank

    # ---- a step -----------------------------------------------------------------------
    def construct(self, *inputs):
        program = self.program or self.prepare(inputs)
        layouts = {id(x): layout for x, layout in zip(inputs, self._input_layouts)}
        for param in program.graph.params.values():
            layouts[id(param)] = param.sharding_layout
        listing = None
        if _dumping() and not self._steps:
            listing = ExecuteListing(program.rank)
            for i, x in enumerate(inputs):
                listing.name(x, f"%input{i}")
            for name, param in program.graph.params.items():
                listing.name(param, f"%para_{name}")
        with LocalRun(program, layouts, listing) as run:
            out = self.network(*inputs)
        out = _map_tensors(out, lambda t: self._finish(t, run, program))
        if listing is not None:
            dump_execute(listing, program.rank, self._steps)
        object.__setattr__(self, "_steps", self._steps + 1)
        return out

    def _finish(self, tensor, run, program):
        """An output, gathered to full size on every rank, its gradient shared by them."""
        have = run.layouts.get(id(tensor))
        if have is not None and not have.is_replicated():
            whole = TensorLayout.replicated(have.shape, program.world)
            tensor = redistribute(tensor, have, whole, program.rank, program.group)
        return _ReplicaShare(program.world)(tensor) if tensor.requires_grad else tensor


class _ReplicaShare(Primitive):
    """Identity forward; backward divides by the number of ranks holding the value."""

    def __init__(self, copies):
        self.copies = copies

    def forward(self, ctx, x):
        return x

    def backward(self, ctx, grad):
        return (grad / self.copies,)


def _np_dtype(tensor):
    return np.dtype(tensor.data.dtype)


def _optimizer_slots(optimizer):
    """id(parameter) -> the optimizer's state arrays shaped like it."""
    found = {}
    if optimizer is None:
        return found
    for states in getattr(optimizer, "_slots", {}).values():
        for param, state in zip(optimizer.parameters, states):
            found.setdefault(id(param), []).append(state)
    return found


def _map_tensors(values, fn):
    if isinstance(values, Tensor):
        return fn(values)
    if type(values) in (tuple, list):
        return type(values)(_map_tensors(v, fn) for v in values)
    return values


def _dumping():
    from ...context import get_context
    return bool(get_context("save_graphs"))


class _full_size_parameters:
    """During tracing, sliced parameters stand in at full size (zeros)."""

    def __init__(self, network):
        self.params = [p for p in network.get_parameters()
                       if getattr(p, "sharding_layout", None) is not None]

    def __enter__(self):
        self.saved = [p.data for p in self.params]
        for p in self.params:
            p.data = p.device.xp.zeros(p.sharding_layout.shape, p.data.dtype)

    def __exit__(self, *exc):
        for p, data in zip(self.params, self.saved):
            p.data = data
        return False
