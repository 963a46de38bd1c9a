"""Redistribution: turning a tensor from one layout into another with collectives.

When a producer leaves a tensor in layout ``src`` and a consumer wants layout ``dst``, every
rank must end up holding its ``dst`` block. These moves do it, each on one or more
device-matrix axes ``A`` (the group: the ranks that differ only along ``A``); the last one is
needed only when ``dst`` itself holds partial sums:

=================  ======================================  ==================================
step               what changes                            bytes one rank sends (counted)
=================  ======================================  ==================================
``slice``          replicated along A -> split over A      0 (a local StridedSlice)
``all_gather``     split over A -> replicated along A      the local block
``all_to_all``     the split over A moves to another dim   local block * (n - 1) / n
``all_reduce``     partial over A -> replicated along A    the local block
``reduce_scatter`` partial over A -> split over A          local block * (n - 1) / n
``mask``           replicated along A -> partial over A    0 (all but coordinate 0 zero)
=================  ======================================  ==================================

``n`` is the group size. The byte counts are exactly what the communicators' counters record
on one rank (``Communicator._count``), so ``plan_cost`` predicts ``comm_stats()``. They count
the payload a rank puts in (an AllGather counts its own block, not the ``n - 1`` blocks a ring
forwards), and plans are compared in that currency.

**The planner.** Both layouts are first written over one common device matrix: the coarsest
grid that refines both. Rank ``r`` is a mixed-radix number over each matrix; ``[2, 4]`` and
``[8]`` are both coarsenings of ``[2, 4]``, ``[2, 4]`` and ``[4, 2]`` of ``[2, 2, 2]``
(the cut points ``{8, 4, 1}`` and ``{8, 2, 1}`` merge into ``{8, 4, 2, 1}``). An axis of a
layout becomes one or more consecutive axes of the common matrix, so a dimension split over
``[8]``'s axis is split over ``(1, 0)`` of ``[2, 4]``. Over the common matrix a layout is a
*state*: for every tensor dimension the ordered list of device axes splitting it (major
first) and the set of partial axes. The planner then searches the cheapest sequence of moves
from the ``src`` state to the ``dst`` state (Dijkstra; cost = bytes sent, then the number of
collectives, then the number of steps). Only sensible moves are tried: a split is removed
from the minor (last) end of a dimension's list, and a split is added only where ``dst`` has
it next. The search therefore finds, e.g., that slicing before gathering sends less, that one
AllToAll beats AllGather + slice, and that ReduceScatter beats AllReduce + slice.

Matrices with no common refinement (``[2, 3]`` against ``[3, 2]``) go through the replicated
state: reduce and gather everything on ``src``'s matrix, then slice on ``dst``'s.

**Execution.** ``redistribute`` runs a plan on one rank's local ``Tensor`` with the
differentiable collectives of ``parallel/comm/collectives.py`` and a differentiable ``StridedSlice``,
so the backward pass is the reverse redistribution, produced by autograd.
``simulate_redistribution`` runs a plan on all ranks at once in NumPy, for tests and dumps.

>>> from minitorch_dist.parallel.sharding.layout import TensorLayout
>>> after_matmul = TensorLayout((2, 4, 1), (2, 0), (16, 16))    # rows 2-way, copies over the "4"
>>> relu_wants = TensorLayout((2, 4), (1, 0), (16, 16))         # ReLU.shard(((2, 4),))
>>> [str(s) for s in plan_redistribution(after_matmul, relu_wants)]
['StridedSlice(dim 1, axes=[0], dev=[2,4]): (8, 16) -> (8, 4)']
"""
import heapq
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .layout import LayoutError, TensorLayout, group_ranks, rank_coordinates

__all__ = ["Step", "plan_redistribution", "plan_cost", "redistribute", "apply_step",
           "simulate_redistribution", "STEP_KINDS"]

STEP_KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "slice", "mask")
_COMMUNICATING = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
_SEARCH_LIMIT = 20000        # states the search may expand before falling back


# ---- one step of a plan ---------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One move of a redistribution, as every rank performs it.

    ``kind``: one of ``STEP_KINDS``. ``axes``: the device-matrix axes (counted from the
    right, major first) of the collective's group, or of the slice or mask.
    ``device_matrix``: the matrix the axes refer to. ``local_shape``: this rank's input.
    ``dim``: the tensor dimension gathered, scattered or sliced; for ``all_to_all`` the
    dimension whose split moves away (it is concatenated), ``to_dim`` the one newly split.

    >>> step = Step("all_to_all", (1,), (2, 4), (8, 4), dim=0, to_dim=1)
    >>> print(step)                       # the row split over axis 1 moves to the columns
    AllToAll(dim 0 -> dim 1, axes=[1], dev=[2,4]): (8, 4) -> (16, 2)
    >>> step.group(5), step.bytes_sent(4)
    ((1, 5), 64)
    """

    kind: str
    axes: tuple
    device_matrix: tuple
    local_shape: tuple
    dim: int = None
    to_dim: int = None

    @property
    def group_size(self):
        """Ranks in the group (or slices made, for a slice)."""
        n = len(self.device_matrix)
        return math.prod(self.device_matrix[n - 1 - a] for a in self.axes)

    @property
    def communicates(self):
        return self.kind in _COMMUNICATING

    @property
    def out_shape(self):
        shape, g = list(self.local_shape), self.group_size
        if self.kind == "all_gather":
            shape[self.dim] *= g
        elif self.kind in ("reduce_scatter", "slice"):
            shape[self.dim] //= g
        elif self.kind == "all_to_all":
            shape[self.dim] *= g
            shape[self.to_dim] //= g
        return tuple(shape)

    def bytes_sent(self, dtype_size=4):
        """What this step adds to one rank's communicator counters."""
        nbytes = math.prod(self.local_shape) * int(dtype_size)
        if self.kind in ("all_reduce", "all_gather"):
            return nbytes
        if self.kind in ("reduce_scatter", "all_to_all"):
            return nbytes // self.group_size * (self.group_size - 1)
        return 0

    def group(self, rank):
        """The world ranks this step's collective runs over, for ``rank``."""
        return group_ranks(self.device_matrix, self.axes, rank)

    def __str__(self):
        name = {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter",
                "all_gather": "AllGather", "all_to_all": "AllToAll", "slice": "StridedSlice",
                "mask": "Mask"}[self.kind]
        if self.kind == "all_to_all":
            what = f"dim {self.dim} -> dim {self.to_dim}, "
        elif self.kind in ("all_reduce", "mask"):
            what = "sum, " if self.kind == "all_reduce" else "keep coordinate 0, "
        else:
            what = f"dim {self.dim}, "
        return (f"{name}({what}axes=[{','.join(map(str, self.axes))}], "
                f"dev=[{','.join(map(str, self.device_matrix))}]): "
                f"{self.local_shape} -> {self.out_shape}")


def plan_cost(plan, dtype_size=4):
    """Bytes one rank sends to carry out ``plan`` (what its communicator counters record)."""
    return sum(step.bytes_sent(dtype_size) for step in plan)


# ---- a common device matrix --------------------------------------------------------------------
def _cuts(device_matrix):
    """Suffix products: the strides of the axes of a row-major rank numbering, plus the total."""
    return {math.prod(device_matrix[i:]) for i in range(len(device_matrix) + 1)}


def _refine(*matrices):
    """The coarsest matrix refining all ``matrices`` (size-1 axes dropped) and, for each,
    ``{axis counted from the right: [refined axes, left to right]}``; None if none exists."""
    cuts = sorted(set().union(*(_cuts(m) for m in matrices)), reverse=True)
    if any(a % b for a, b in zip(cuts, cuts[1:])):
        return None
    refined = tuple(a // b for a, b in zip(cuts, cuts[1:]))
    maps = []
    for m in matrices:
        n, mapping = len(m), {}
        for i in range(n):
            hi, lo = math.prod(m[i:]), math.prod(m[i + 1:])
            mapping[n - 1 - i] = [j for j in range(len(refined))
                                  if cuts[j] <= hi and cuts[j + 1] >= lo]
        maps.append(mapping)
    return refined, maps


def _state(layout, mapping):
    """A layout over the refined matrix: (per-dim tuple of refined axes, sorted partial axes)."""
    dims = tuple(tuple(j for a in layout.dim_axes(d) for j in mapping[a])
                 for d in range(len(layout.shape)))
    partial = tuple(sorted(j for a in layout.partial for j in mapping[a]))
    return dims, partial


# ---- the search ------------------------------------------------------------------------------
def _ascending(seq):
    return all(a < b for a, b in zip(seq, seq[1:]))


def _moves(state, goal, sizes, shape, alltoall=True):
    """Every sensible move from ``state``: (kind, dim, to_dim, axes, elements sent, next state);
    without ``alltoall`` no AllToAll (``enable_alltoall=False``: AllGather then slice)."""
    dims, partial = state
    goal_dims, goal_partial = goal
    local = [n // math.prod(sizes[a] for a in ax) for n, ax in zip(shape, dims)]
    numel = math.prod(local)
    used = {a for ax in dims for a in ax}
    free = [a for a in range(len(sizes)) if a not in used and a not in partial]
    to_reduce = [a for a in partial if a not in goal_partial]

    def with_dims(changes, new_partial=partial):
        new = list(dims)
        for d, ax in changes.items():
            new[d] = ax
        return tuple(new), tuple(sorted(new_partial))

    def room(d, k):
        """The next ``k`` axes ``dst`` wants on dimension ``d`` (None when d must shed first)."""
        cur, want = dims[d], goal_dims[d]
        if want[:len(cur)] != cur or len(want) < len(cur) + k:
            return None
        return want[len(cur):len(cur) + k]

    for d in range(len(shape)):                                   # local slices
        nxt = room(d, 1)
        if nxt and nxt[0] in free and local[d] % sizes[nxt[0]] == 0:
            yield "slice", d, None, nxt, 0, with_dims({d: dims[d] + nxt})
    for a in free:                                                # replicated -> partial
        if a in goal_partial:
            yield "mask", None, None, (a,), 0, with_dims({}, partial + (a,))
    for d in range(len(shape)):                                   # partial -> split
        for k in range(1, len(goal_dims[d]) + 1):
            nxt = room(d, k)
            if not nxt or not all(a in to_reduce for a in nxt) or not _ascending(nxt):
                break
            n = math.prod(sizes[a] for a in nxt)
            if local[d] % n:
                break
            rest = tuple(a for a in partial if a not in nxt)
            yield ("reduce_scatter", d, None, nxt, numel // n * (n - 1),
                   with_dims({d: dims[d] + nxt}, rest))
    for k in range(1, len(to_reduce) + 1):                        # partial -> replicated
        for axes in itertools.combinations(to_reduce, k):
            rest = tuple(a for a in partial if a not in axes)
            yield "all_reduce", None, None, axes, numel, with_dims({}, rest)
    for d in range(len(shape)):                                   # split -> replicated / moved
        for k in range(1, len(dims[d]) + 1):
            moved = dims[d][-k:]
            if not _ascending(moved):
                break
            n = math.prod(sizes[a] for a in moved)
            yield "all_gather", d, None, moved, numel, with_dims({d: dims[d][:-k]})
            for to in range(len(shape)) if alltoall else ():
                if to != d and room(to, k) == moved and local[to] % n == 0:
                    yield ("all_to_all", d, to, moved, numel // n * (n - 1),
                           with_dims({d: dims[d][:-k], to: dims[to] + moved}))


def _search(start, goal, sizes, shape, alltoall=True):
    """Cheapest move sequence from ``start`` to ``goal`` (Dijkstra), or None past the limit."""
    best = {start: (0, 0, 0)}
    came = {start: None}
    heap = [((0, 0, 0), 0, start)]
    tie = itertools.count(1)
    expanded = 0
    while heap:
        key, _, state = heapq.heappop(heap)
        if key > best[state]:
            continue
        if state == goal:
            path = []
            while came[state] is not None:
                state, move = came[state]
                path.append(move)
            return path[::-1]
        expanded += 1
        if expanded > _SEARCH_LIMIT:
            return None
        for kind, dim, to_dim, axes, cost, nxt in _moves(state, goal, sizes, shape, alltoall):
            nkey = (key[0] + cost, key[1] + (kind in _COMMUNICATING), key[2] + 1)
            if nxt not in best or nkey < best[nxt]:
                best[nxt] = nkey
                came[nxt] = (state, (kind, dim, to_dim, axes, state))
                heapq.heappush(heap, (nkey, next(tie), nxt))
    return None


def _direct_moves(start, goal, sizes):
    """Through the replicated state, without search: reduce, gather (minor end first), slice,
    mask. Always valid; used when the search gives up."""
    moves, (dims, partial) = [], start
    state = start
    reduce = tuple(a for a in partial if a not in goal[1])
    if reduce:
        moves.append(("all_reduce", None, None, reduce, state))
        state = (dims, tuple(a for a in partial if a in goal[1]))
    for d in range(len(dims)):
        while state[0][d]:
            cur = state[0][d]
            k = 1
            while k < len(cur) and _ascending(cur[-k - 1:]):
                k += 1
            moves.append(("all_gather", d, None, cur[-k:], state))
            new = list(state[0])
            new[d] = cur[:-k]
            state = (tuple(new), state[1])
    for d in range(len(dims)):
        if goal[0][d]:
            moves.append(("slice", d, None, goal[0][d], state))
            new = list(state[0])
            new[d] = goal[0][d]
            state = (tuple(new), state[1])
    masks = tuple(a for a in goal[1] if a not in state[1])
    if masks:
        moves.append(("mask", None, None, masks, state))
    return moves


def _to_steps(moves, sizes, shape, present):
    """Moves over the refined matrix -> Steps over the presented matrix (merging consecutive
    slices of one dimension into one StridedSlice)."""
    matrix, axis_of = present
    steps = []
    for kind, dim, to_dim, axes, state in moves:
        local = tuple(n // math.prod(sizes[a] for a in ax) for n, ax in zip(shape, state[0]))
        out_axes = tuple(axis_of[a] for a in axes)
        last = steps[-1] if steps else None
        if kind in ("slice", "mask") and last is not None and last.kind == kind \
                and last.dim == dim and last.device_matrix == matrix:
            steps[-1] = Step(kind, last.axes + out_axes, matrix, last.local_shape, dim)
            continue
        steps.append(Step(kind, out_axes, matrix, local, dim, to_dim))
    return steps


def _presented(refined, layout, mapping):
    """Steps are shown over ``layout``'s own matrix when each refined axis is one of its axes
    of size > 1, else over the refined matrix; returns (matrix, refined axis -> axis)."""
    owner = {j: a for a, js in mapping.items() for j in js}
    if all(len(js) <= 1 for js in mapping.values()):
        return layout.device_matrix, owner
    return refined, {j: len(refined) - 1 - j for j in range(len(refined))}


@lru_cache(maxsize=4096)
def _plan(src, dst, alltoall=True):
    if src.shape != dst.shape:
        raise LayoutError(f"redistribution needs the same full shape: {src} vs {dst}")
    if src.num_devices != dst.num_devices:
        raise LayoutError(f"redistribution needs the same devices: {src} spans "
                          f"{src.num_devices}, {dst} spans {dst.num_devices}")
    common = _refine(src.device_matrix, dst.device_matrix)
    if common is not None:
        refined, (smap, dmap) = common
        start, goal = _state(src, smap), _state(dst, dmap)
        moves = _search(start, goal, refined, src.shape, alltoall)
        if moves is None:
            moves = _direct_moves(start, goal, refined)
        present = (_presented(refined, src, smap) if src.device_matrix == dst.device_matrix
                   else (refined, {j: len(refined) - 1 - j for j in range(len(refined))}))
        return tuple(_to_steps(moves, refined, src.shape, present))
    # no common refinement: replicate on src's matrix, then slice on dst's
    steps = []
    for layout, own_goal in ((src, True), (dst, False)):
        refined, (mapping,) = _refine(layout.device_matrix)
        state = _state(layout, mapping)
        empty = (tuple(() for _ in layout.shape), ())
        moves = _direct_moves(state, empty, refined) if own_goal else \
            _direct_moves(empty, state, refined)
        steps += _to_steps(moves, refined, layout.shape, _presented(refined, layout, mapping))
    return tuple(steps)


def plan_redistribution(src: TensorLayout, dst: TensorLayout):
    """The cheapest list of ``Step`` s that turns ``src``-distributed blocks into
    ``dst``-distributed ones (module docstring). Same full shape, same number of devices;
    the device matrices may differ. Results are cached per (src, dst). With
    ``set_auto_parallel_context(enable_alltoall=False)`` no AllToAll is used.

    >>> src = TensorLayout((2, 4), (1, -1), (8, 8))               # rows over the "2"
    >>> dst = TensorLayout((2, 4), (-1, 1), (8, 8))               # columns over the "2"
    >>> [s.kind for s in plan_redistribution(src, dst)]
    ['all_to_all']
    """
    if not isinstance(src, TensorLayout) or not isinstance(dst, TensorLayout):
        raise TypeError(f"plan_redistribution takes two TensorLayouts, got "
                        f"{type(src).__name__} and {type(dst).__name__}")
    if src != dst and (src.row_blocks or dst.row_blocks):
        raise LayoutError(f"cannot redistribute between {src} and {dst}: blocks of different "
                          "sizes (a field-sliced table) feed only the lookup they were cut for")
    from ..context import get_auto_parallel_context
    return list(_plan(src, dst, get_auto_parallel_context("enable_alltoall")))


# ---- running a plan -------------------------------------------------------------------------
def _slice_bounds(step, rank):
    """(begin, end) of this rank's piece of ``step.dim`` for a slice step."""
    n = len(step.device_matrix)
    coords = rank_coordinates(step.device_matrix, rank)
    index = 0
    for a in step.axes:
        index = index * step.device_matrix[n - 1 - a] + coords[n - 1 - a]
    size = step.local_shape[step.dim] // step.group_size
    return index * size, (index + 1) * size


def _keeps(step, rank):
    """A mask step keeps the block only at coordinate 0 of its axes."""
    n = len(step.device_matrix)
    coords = rank_coordinates(step.device_matrix, rank)
    return all(coords[n - 1 - a] == 0 for a in step.axes)


_local_ops = {}   # "slice" / "mask": the primitive of that local step, made on first use


def _local_op(kind):
    """The StridedSlice of a slice step, the Mul of a mask step (one instance each, so each
    appears once in the placement report)."""
    prim = _local_ops.get(kind)
    if prim is None:
        if kind == "slice":
            from ...ops.indexing import StridedSlice
            prim = StridedSlice()
        else:
            from ...ops.arithmetic import Mul
            prim = Mul()
            prim.instance_name = "redistribution_mask"
        prim = _local_ops.setdefault(kind, prim)
    return prim


# a communicating step's kind -> its collective's settings (``comm.collectives.run_inserted``)
_SETTINGS = {"all_reduce": lambda step: {"op": "sum"},
             "all_gather": lambda step: {"axis": step.dim},
             "reduce_scatter": lambda step: {"axis": step.dim, "op": "sum"},
             "all_to_all": lambda step: {"split_axis": step.to_dim, "concat_axis": step.dim}}


def apply_step(step, tensor, rank, group_factory):
    """One step on this rank's local ``Tensor`` (differentiable). Its primitives run
    directly (``Primitive.run``): an executor calls this from inside its primitive hook."""
    from ..comm.collectives import run_inserted
    if tuple(tensor.shape) != step.local_shape:
        raise ValueError(f"{step}: this rank holds shape {tuple(tensor.shape)}, the plan expects "
                         f"{step.local_shape}")
    if step.kind == "slice":
        begin, end = [0] * len(step.local_shape), list(step.local_shape)
        begin[step.dim], end[step.dim] = _slice_bounds(step, rank)
        return _local_op("slice").run(tensor, begin=tuple(begin), end=tuple(end),
                                      strides=(1,) * len(begin))
    if step.kind == "mask":
        return tensor if _keeps(step, rank) else _local_op("mask").run(tensor, 0.0)
    if step.kind not in _SETTINGS:
        raise ValueError(f"unknown redistribution step kind {step.kind!r}; expected one of "
                         f"{STEP_KINDS}")
    ranks = step.group(rank)
    comm = group_factory(ranks)
    if comm.size != len(ranks) or comm.rank != ranks.index(rank):
        raise ValueError(f"{step}: group_factory({ranks}) gave a communicator of size {comm.size} "
                         f"where rank {rank} is {comm.rank}; expected size {len(ranks)} and rank "
                         f"{ranks.index(rank)}")
    return run_inserted(step.kind, tensor, comm, **_SETTINGS[step.kind](step))


def redistribute(tensor, src, dst, rank, group_factory):
    """This rank's block of ``tensor`` (laid out as ``src``) turned into its ``dst`` block.

    ``group_factory(ranks)`` returns the ``Communicator`` of a tuple of world ranks (see
    ``groups.GroupCache``). Every rank of the layouts must call this with the same layouts,
    and, for the backward pass, back-propagate through the result. Differentiable: the
    gradient travels the reverse redistribution.
    """
    expected = src.local_shape()
    if tuple(tensor.shape) != expected:
        raise ValueError(f"redistribute: rank {rank} holds shape {tuple(tensor.shape)}, but {src} "
                         f"gives every rank {expected}")
    for step in plan_redistribution(src, dst):
        tensor = apply_step(step, tensor, rank, group_factory)
    return tensor


def simulate_redistribution(plan, local_arrays_by_rank, src=None, dst=None):
    """Every rank's result of ``plan`` computed in NumPy, without communication.

    ``local_arrays_by_rank[r]`` is rank ``r``'s input block; ``src``/``dst`` (optional) check
    the shapes going in and out. The collectives follow the communicators' conventions:
    group members in ascending rank order, chunks of a dimension dealt out in that order.

    >>> src = TensorLayout((2,), (0,), (4,))
    >>> dst = TensorLayout((2,), (-1,), (4,))
    >>> [a.tolist() for a in simulate_redistribution(plan_redistribution(src, dst),
    ...                                              [np.array([1., 2.]), np.array([3., 4.])])]
    [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]
    """
    arrays = [np.asarray(a) for a in local_arrays_by_rank]
    if src is not None:
        if len(arrays) != src.num_devices:
            raise ValueError(f"simulate_redistribution: {len(arrays)} arrays for the "
                             f"{src.num_devices} devices of {src}")
        for r, a in enumerate(arrays):
            if a.shape != src.local_shape():
                raise ValueError(f"simulate_redistribution: rank {r} holds {a.shape}, {src} "
                                 f"gives {src.local_shape()}")
    for step in plan:
        out = [None] * len(arrays)
        for r in range(len(arrays)):
            if out[r] is not None:
                continue
            if step.kind == "slice":
                begin, end = _slice_bounds(step, r)
                index = [slice(None)] * arrays[r].ndim
                index[step.dim] = slice(begin, end)
                out[r] = arrays[r][tuple(index)].copy()
                continue
            if step.kind == "mask":
                out[r] = arrays[r].copy() if _keeps(step, r) else np.zeros_like(arrays[r])
                continue
            group = step.group(r)
            parts = [arrays[g] for g in group]
            n = len(group)
            if step.kind == "all_reduce":
                total = sum(parts[1:], parts[0].copy())
                results = [total.copy() for _ in group]
            elif step.kind == "all_gather":
                results = [np.concatenate(parts, axis=step.dim) for _ in group]
            elif step.kind == "reduce_scatter":
                total = sum(parts[1:], parts[0].copy())
                results = np.split(total, n, axis=step.dim)
            elif step.kind == "all_to_all":
                chunks = [np.split(p, n, axis=step.to_dim) for p in parts]
                results = [np.concatenate([chunks[s][i] for s in range(n)], axis=step.dim)
                           for i in range(n)]
            else:
                raise ValueError(f"unknown step kind {step.kind!r}")
            for g, res in zip(group, results):
                out[g] = np.array(res, order="C")
        arrays = out
    if dst is not None:
        for r, a in enumerate(arrays):
            if a.shape != dst.local_shape():
                raise AssertionError(f"simulate_redistribution: rank {r} ends with {a.shape}, "
                                     f"{dst} gives {dst.local_shape()}")
    return arrays
