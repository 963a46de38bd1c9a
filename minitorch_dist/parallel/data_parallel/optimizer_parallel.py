"""Optimizer parallel (MindSpore's ``enable_parallel_optimizer``; ZeRO in other frameworks).

Replicas of a parameter (the ranks of its data-parallel group) all take the same optimizer
step. With optimizer parallel on, each takes it for a different flat slice only and keeps the
optimizer state (momentum, Adam's moments) for that slice: per rank, state memory falls to
``1 / shard size``. The updated slices are then all-gathered into the whole parameter on
every replica, so the forward sees whole weights as before and the results equal one process.
Where the gradient comes through ``DistributedGradReducer`` (data parallel), it is
reduce-scattered rather than all-reduced: each rank receives only its slice's sum.

The plan is per parameter and depends only on its size, the group and the context, so every
rank computes the same plan without exchanging anything.

At ``optimizer_level="level3"`` (data parallel only) the updated slices are not gathered
after the step: each sliced weight keeps its slice alone (``weight_slicing.py``), so between
steps a rank holds 1/k of the weights as well; during a step each primitive that reads it
gathers it whole for its forward and again for its backward (``gathered_use.py``).

The plan:

* a parameter is sliced when it is trained, ``Parameter.parallel_optimizer`` is True, it is
  no row-sliced table, and it holds at least ``parallel_optimizer_threshold`` KB (MindSpore's
  default 64; smaller ones stay whole, their state too);
* the slicing group is its data-parallel group (the world under data parallel; under
  semi/auto parallel the ranks holding the same block), cut into consecutive groups of
  ``optimizer_weight_shard_size`` ranks when that is set (-1: the whole group);
* rank ``r`` of a group of ``k`` owns flat elements ``[r*c, (r+1)*c)`` with ``c = ceil(n/k)``
  (the last slices may be short or empty; the all-gather pads them).
"""
import math
import weakref

from ...nn.optim import state_slicing
from . import gathered_use, weight_slicing
from ...runtime import _once
from ..comm.collectives import communicator_for
from ..comm_fusion import groups_for
from ..context import ParallelMode, get_auto_parallel_context

__all__ = ["parallel_optimizer_on", "parameter_slice", "shard_group", "scattered_gradients",
           "gather_whole", "install"]

_PARALLEL_MODES = (ParallelMode.DATA_PARALLEL, ParallelMode.HYBRID_PARALLEL,
                   ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL)
_plans = weakref.WeakKeyDictionary()     # optimizer -> (key, plan)
_groups = weakref.WeakKeyDictionary()    # world communicator -> {ranks: sub-communicator}


def _world():
    from ..sharding.scope import current_world
    return current_world()


def parallel_optimizer_on():
    """True when optimizer parallel acts: asked for, in a parallel mode, on several ranks.
    Asked for in a stand-alone job, it is noted once (one process has no replicas)."""
    if not get_auto_parallel_context("enable_parallel_optimizer"):
        return False
    if get_auto_parallel_context("parallel_mode") not in _PARALLEL_MODES:
        _once("enable_parallel_optimizer.stand_alone",
              "enable_parallel_optimizer=True: the job runs stand-alone (parallel_mode "
              "'stand_alone'), so there are no replicas to slice optimizer states over")
        return False
    world = _world()
    return world is not None and world.size > 1


def shard_group(world, replica_ranks=None):
    """(ranks of this rank's slicing group, this rank's index in it) inside ``replica_ranks``
    (default: every rank of ``world``), cut by ``optimizer_weight_shard_size``."""
    ranks = tuple(range(world.size)) if replica_ranks is None else tuple(replica_ranks)
    size = get_auto_parallel_context("parallel_optimizer_config")["optimizer_weight_shard_size"]
    if size not in (-1, None) and size < len(ranks):
        if len(ranks) % size:
            raise ValueError(
                f"parallel_optimizer_config: optimizer_weight_shard_size={size} does not divide "
                f"the data-parallel group size {len(ranks)}; use a divisor of it or -1")
        at = ranks.index(world.rank)
        first = at - at % size
        ranks = ranks[first:first + size]
    return ranks, ranks.index(world.rank)


def _group_comm(world, ranks):
    if len(ranks) == world.size:
        return world
    cache = _groups.setdefault(world, {})
    comm = cache.get(ranks)
    if comm is None:
        comm = cache[ranks] = world.split(list(ranks), name=f"opt_shard_{'_'.join(map(str, ranks))}")
    return comm


def _replica_ranks(param, world):
    """The ranks holding the same values of ``param``: all of them; under pipeline stages
    the ranks of this rank's stage; under operator sharding those that hold the same block."""
    layout = getattr(param, "sharding_layout", None)
    stages = get_auto_parallel_context("pipeline_stages")
    if stages > 1:
        if layout is not None:       # a sharded stage: its layouts number the stage's ranks
            _once("optimizer_parallel.sharded_stage", "enable_parallel_optimizer: parameters "
                  "operator-sharded inside a pipeline stage keep their optimizer state whole")
            return (world.rank,)
        replicas = world.size // stages
        first = world.rank // replicas * replicas
        return tuple(range(first, first + replicas))
    if layout is None or not layout.replicated_axes():
        return None if layout is None else (world.rank,)
    from ..sharding.layout import group_ranks
    return tuple(group_ranks(layout.device_matrix, layout.replicated_axes(), world.rank))


def _sliceable(param):
    if not param.requires_grad or not getattr(param, "parallel_optimizer", True):
        return False
    if getattr(param, "row_slice", None) is not None or getattr(param, "released", False):
        return False
    threshold = get_auto_parallel_context("parallel_optimizer_config")[
        "parallel_optimizer_threshold"]
    return param.data.size * param.data.itemsize >= threshold * 1024


def parameter_slice(param, world=None):
    """``(comm, start, stop)``: this rank's flat slice of ``param`` and the communicator of
    its slicing group, or None when ``param`` stays whole."""
    world = _world() if world is None else world
    if world is None or world.size == 1 or not _sliceable(param):
        return None
    replicas = _replica_ranks(param, world)
    if replicas is not None and len(replicas) == 1:
        return None
    ranks, index = shard_group(world, replicas)
    if len(ranks) == 1:
        return None
    n = param.data.size
    chunk = math.ceil(n / len(ranks))
    start, stop = min(n, index * chunk), min(n, (index + 1) * chunk)
    return _group_comm(world, ranks), start, stop


class _Gathers(state_slicing.SlicePlan):
    """An optimizer's plan whose updated slices are all-gathered at ``flush``, one call per
    fusion group (``comm_fusion``'s allgather settings or the cells' fusion ids)."""

    def __init__(self, slices, group_of, level3=False):
        super().__init__(slices)
        self.group_of = group_of        # id(param) -> (comm, fusion key)
        self.pending = []
        self.level3 = level3            # weights kept sliced: no gather, the next use gathers
        self.members = []               # level3: (param, comm, start, stop) of each slice
        self.member_of = {}             # level3: id(param) -> its entry of members

    def read(self, param):
        """Level 3: the current values of ``param``'s slice (``state_slicing.StateSlice``)."""
        _, _, start, stop = self.member_of[id(param)]
        return weight_slicing.current_slice(param, start, stop)

    def _release(self, pending):
        """Level 3: every sliced weight keeps its (updated) slice only; one not updated this
        step but gathered by a use is cut back too."""
        updated = {id(param): piece for param, piece in pending}
        for param, comm, start, stop in self.members:
            piece = updated.get(id(param))
            if piece is None:
                if weight_slicing.is_sliced(param):
                    continue
                piece = param.data.reshape(-1)[start:stop]
            weight_slicing.release(param, comm, start, stop, piece)
        gathered_use.install_on_this_thread()     # from now on: whole only around each use

    def add(self, param, piece):
        self.pending.append((param, piece))

    def flush(self):
        pending, self.pending = self.pending, []
        if self.level3:
            self._release(pending)
            return
        groups = {}
        for param, piece in pending:
            comm, key = self.group_of[id(param)]
            # one buffer holds one dtype on one device
            group = (id(comm), key, str(param.data.dtype), id(param.device))
            groups.setdefault(group, (comm, []))[1].append((param, piece))
        for comm, members in groups.values():
            gather_whole(comm, members)


def _chunk(n, size):
    return math.ceil(n / size)


def gather_whole(comm, members):
    """Write every rank's updated flat piece of each ``(param, piece)`` into the whole
    parameter: one all-gather of the pieces laid end to end (each padded to its chunk)."""
    device = members[0][0].device
    xp = device.xp
    chunks = [_chunk(p.data.size, comm.size) for p, _ in members]
    row = xp.zeros(sum(chunks), members[0][0].data.dtype)
    at = 0
    for (param, piece), chunk in zip(members, chunks):
        row[at:at + piece.shape[0]] = piece
        at += chunk
    gathered = communicator_for(comm, device).allgather(row)      # (ranks, sum of chunks)
    at = 0
    for (param, _), chunk in zip(members, chunks):
        whole = gathered[:, at:at + chunk].reshape(-1)[:param.data.size]
        param.data[...] = whole.reshape(param.data.shape)
        at += chunk


def _fusion_keys(op, params):
    """One fusion key per parameter for the collective ``op`` (``comm_fusion.groups_for``)."""
    kind, groups = groups_for(op, params)
    if kind == "alone":
        return list(range(len(params)))
    return list(groups)


def scattered_gradients(comm, params, arrays, divisor):
    """Optimizer parallel under data parallel: the gradients (``arrays``, aligned with
    ``params``) of the parameters sliced over the whole of ``comm`` are summed by
    reduce-scatters, one per fusion group, each rank receiving its slices only. Returns
    ``{position: GradientPiece}`` (divided by ``divisor``); the other positions are the
    caller's to all-reduce (the optimizer then slices them itself)."""
    if not parallel_optimizer_on() or _world() is not comm:
        return {}
    found = [(pos, parameter_slice(params[pos], comm)) for pos in range(len(params))
             if arrays[pos] is not None]
    found = [(pos, s) for pos, s in found if s is not None and s[0] is comm]
    if not found:
        return {}
    keys = _fusion_keys("reducescatter", [params[pos] for pos, _ in found])
    groups = {}
    for key, (pos, slice_) in zip(keys, found):
        group = (key, str(arrays[pos].dtype), id(params[pos].device))
        groups.setdefault(group, []).append((pos, slice_))
    out = {}
    for members in groups.values():
        out.update(_reduce_scatter(comm, params, arrays, members, divisor))
    return out


def _reduce_scatter(comm, params, arrays, members, divisor):
    device = params[members[0][0]].device
    xp = device.xp
    chunks = [_chunk(arrays[pos].size, comm.size) for pos, _ in members]
    block = xp.zeros((comm.size, sum(chunks)), arrays[members[0][0]].dtype)
    at = 0
    for (pos, _), chunk in zip(members, chunks):
        flat = arrays[pos].reshape(-1)
        padded = xp.zeros(chunk * comm.size, flat.dtype)
        padded[:flat.size] = flat
        block[:, at:at + chunk] = padded.reshape(comm.size, chunk)
        at += chunk
    mine = communicator_for(comm, device).reduce_scatter(block.reshape(-1))
    if divisor != 1:
        mine = mine / divisor
    out, at = {}, 0
    for (pos, (_, start, stop)), chunk in zip(members, chunks):
        out[pos] = state_slicing.GradientPiece(mine[at:at + stop - start], start, stop,
                                               params[pos].shape, device)
        at += chunk
    return out


def _level3_checked():
    """True for ``optimizer_level="level3"`` (weights sliced between steps), which acts in
    data parallel only: the other styles are refused by name, alike on every rank."""
    if get_auto_parallel_context("parallel_optimizer_config")["optimizer_level"] != "level3":
        return False
    mode = get_auto_parallel_context("parallel_mode")
    if mode != ParallelMode.DATA_PARALLEL:
        raise NotImplementedError(
            f"parallel_optimizer_config: optimizer_level='level3' (weights sliced between "
            f"steps) acts under parallel_mode='data_parallel' only, not {mode!r}: operator-"
            f"sharded (semi/auto/hybrid parallel) parameters keep whole weights; use 'level1'")
    if get_auto_parallel_context("pipeline_stages") > 1:
        raise NotImplementedError(
            "parallel_optimizer_config: optimizer_level='level3' (weights sliced between "
            "steps) is not supported with pipeline_stages > 1; use 'level1'")
    return True


def _plan(optimizer):
    """The planner ``state_slicing`` asks at every optimizer step (cached per optimizer)."""
    if not parallel_optimizer_on():
        return None
    world = _world()
    key = (id(world), tuple(get_auto_parallel_context("parallel_optimizer_config").items()),
           repr(get_auto_parallel_context("comm_fusion")),
           tuple(p.shape for p in optimizer.parameters))
    cached = _plans.get(optimizer)
    if cached is not None and cached[0] == key:
        return cached[1]
    level3 = _level3_checked()
    found = [parameter_slice(param, world) for param in optimizer.parameters]
    sliced = [p for p, f in zip(optimizer.parameters, found) if f is not None]
    keys = iter(_fusion_keys("allgather", sliced))
    group_of, slices = {}, []
    plan = _Gathers([], group_of, level3)
    for param, slice_ in zip(optimizer.parameters, found):
        if slice_ is None:
            slices.append(None)
            continue
        comm, start, stop = slice_
        group_of[id(param)] = (comm, next(keys))
        if level3:
            plan.members.append((param, comm, start, stop))
            plan.member_of[id(param)] = plan.members[-1]
        slices.append(state_slicing.StateSlice(start, stop, plan.add,
                                               plan.read if level3 else None))
    plan.extend(slices)
    _plans[optimizer] = (key, plan)
    return plan


def install():
    """Make every optimizer consult the plan (``parallel/__init__.py`` calls this)."""
    state_slicing.set_state_slice_planner(_plan)
