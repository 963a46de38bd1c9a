"""Tensor layouts: how one logical tensor is spread over the devices (MindSpore's TensorLayout).

A layout has three parts.

* The **device matrix** arranges the ``N`` devices of the job in a grid, e.g. ``[2, 4]``:
  ranks are numbered row-major over it, so rank ``r`` sits at ``(r // 4, r % 4)``.
* The **tensor map** says, for each tensor dimension, which device-matrix axis splits it.
  As in MindSpore, axes are **counted from the right**: in ``[2, 4]`` axis 0 is the "4"
  and axis 1 the "2"; -1 means "not split". A dimension may also be split over several
  axes at once, given as a tuple, the first (major) axis first: ``(1, 0)`` cuts it into
  ``2 * 4`` pieces.
* The **shape** is the full (logical) tensor's shape.

Together they say which block each rank holds. ``TensorLayout((2, 4, 1), (2, 1), (16, 32))``
is the input ``X`` of ``MatMul().shard(((2, 4), (4, 1)))`` on 8 devices: rows are cut in two
by axis 2 (the "2"), columns in four by axis 1 (the "4"); rank 5, at ``(1, 1, 0)``, holds
``X[8:16, 8:16]``. Device axes that split nothing are **replicated**: the ranks along them hold
copies of the same block.

A fourth, optional part, ``partial``, names device axes along which the ranks hold
**partial sums**: the true block is the sum of the ranks' blocks along those axes. That is the
state right after a MatMul whose contracting dimension is split, before its AllReduce.

**Repeated calculation.** A strategy that uses fewer devices than the job has, e.g. ``(2, 2)``
on 8 devices, gets one more device axis of size ``8 / 4 = 2`` that splits nothing: pairs of
devices compute the same thing (``with_repeated_axis``; MindSpore's ``repeated_calc_num``).

>>> layout = TensorLayout((2, 4, 1), (2, 1), (16, 32))
>>> print(layout)
layout(dev=[2,4,1], map=[2,1], shape=(16,32))
>>> layout.local_shape(), layout.slice_for(5)
((8, 8), (slice(8, 16, None), slice(8, 16, None)))
>>> layout.group_along(1, rank=5)      # the ranks that differ from 5 only along the "4"
(4, 5, 6, 7)
"""
import dataclasses
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TensorLayout", "LayoutError", "rank_coordinates", "group_ranks",
           "with_repeated_axis", "scatter_array", "assemble_array"]


class LayoutError(ValueError):
    """A layout that cannot describe a tensor (bad map, split not dividing a dimension, ...)."""


# ---- device-matrix arithmetic ---------------------------------------------------------------
def rank_coordinates(device_matrix, rank):
    """``rank``'s index along every axis of ``device_matrix``, left to right (row-major:
    the last axis varies fastest, as MindSpore numbers ranks).

    >>> rank_coordinates((2, 4), 6)
    (1, 2)
    """
    size = math.prod(device_matrix)
    if not 0 <= rank < size:
        raise LayoutError(f"rank {rank} is outside the device matrix {list(device_matrix)} "
                          f"({size} devices: ranks 0..{size - 1})")
    coords = []
    for n in reversed(device_matrix):
        coords.append(rank % n)
        rank //= n
    return tuple(reversed(coords))


def _rank_at(device_matrix, coords):
    rank = 0
    for n, c in zip(device_matrix, coords):
        rank = rank * n + c
    return rank


def group_ranks(device_matrix, axes, rank):
    """The ranks that differ from ``rank`` only along device-matrix ``axes`` (counted from the
    right), ascending: the group a collective over those axes runs in. Ascending world rank
    is row-major order over ``axes`` (the leftmost axis major), so a rank's index in the group
    is its mixed-radix coordinate over ``axes`` taken left to right.

    >>> group_ranks((2, 4), [1], 6), group_ranks((2, 4), [0], 6), group_ranks((2, 4), [0, 1], 6)
    ((2, 6), (4, 5, 6, 7), (0, 1, 2, 3, 4, 5, 6, 7))
    """
    n = len(device_matrix)
    positions = sorted(n - 1 - _check_axis(a, n, "group axis") for a in axes)
    mine = list(rank_coordinates(device_matrix, rank))
    members = []
    for combo in np.ndindex(*[device_matrix[p] for p in positions]):
        coords = list(mine)
        for p, c in zip(positions, combo):
            coords[p] = c
        members.append(_rank_at(device_matrix, coords))
    return tuple(members)


def with_repeated_axis(device_matrix, world, right=True):
    """``device_matrix`` completed to ``world`` devices: when it uses fewer, one more axis of
    size ``world / used`` holds the copies: appended on the right by default, as MindSpore
    and the operator rules place it (which shifts every from-the-right axis number of the
    strategy by one); ``right=False`` puts it leftmost.

    >>> with_repeated_axis((2, 2), 8), with_repeated_axis((2, 4), 8)
    ((2, 2, 2), (2, 4))
    >>> with_repeated_axis((4,), 8), with_repeated_axis((4,), 8, right=False)
    ((4, 2), (2, 4))
    """
    device_matrix = tuple(int(n) for n in device_matrix)
    used = math.prod(device_matrix)
    if used < 1 or world % used:
        raise LayoutError(f"a strategy over {used} devices ({list(device_matrix)}) cannot run on "
                          f"{world} devices: {used} must divide {world}")
    repeat = world // used
    if repeat == 1:
        return device_matrix
    return device_matrix + (repeat,) if right else (repeat,) + device_matrix


def _check_axis(axis, n, what):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not 0 <= axis < n:
        raise LayoutError(f"{what} {axis!r} is out of range: a device matrix with {n} axes has "
                          f"axes 0..{n - 1}, counted from the right")
    return int(axis)


def _check_row_blocks(blocks, parts, size):
    if len(blocks) != parts or sum(blocks) != size or not all(
            isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b > 0 for b in blocks):
        raise LayoutError(f"TensorLayout: row_blocks {tuple(blocks)} must be {parts} positive "
                          f"sizes adding up to dimension 0's {size}")


# ---- the layout --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorLayout:
    """Which block of a ``shape`` tensor every rank of ``device_matrix`` holds (module docstring).

    ``tensor_map[i]``: the device-matrix axis (counted from the right) that splits dimension
    ``i``, -1 when it is not split, or a tuple of axes (major first) splitting it over several.
    ``partial``: device axes over which the ranks' blocks are partial sums (sum to reduce).
    ``row_blocks``: the sizes of dimension 0's blocks, in slice order, when they differ
    (MindSpore's ``manual_split`` of a field-sliced table); empty for equal blocks.
    Immutable, hashable, compared field by field.
    """

    device_matrix: tuple
    tensor_map: tuple
    shape: tuple
    partial: tuple = ()
    row_blocks: tuple = ()

    def __post_init__(self):
        dm = tuple(self.device_matrix) if isinstance(self.device_matrix, (tuple, list)) else None
        if not dm or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                             and n >= 1 for n in dm):
            raise LayoutError(f"TensorLayout: device_matrix must be a non-empty tuple of positive "
                              f"ints, got {self.device_matrix!r}")
        dm = tuple(int(n) for n in dm)
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else None
        if shape is None or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                                    and n >= 0 for n in shape):
            raise LayoutError(f"TensorLayout: shape must be a tuple of non-negative ints, got "
                              f"{self.shape!r}")
        shape = tuple(int(n) for n in shape)
        if not isinstance(self.tensor_map, (tuple, list)) or len(self.tensor_map) != len(shape):
            raise LayoutError(f"TensorLayout: tensor_map {self.tensor_map!r} needs one entry per "
                              f"dimension of the shape {shape} ({len(shape)} entries)")
        n = len(dm)
        tensor_map, owner = [], {}
        for dim, entry in enumerate(self.tensor_map):
            axes = (entry,) if not isinstance(entry, (tuple, list)) else tuple(entry)
            if axes == (-1,) or axes == ():
                tensor_map.append(-1)
                continue
            for a in axes:
                _check_axis(a, n, f"TensorLayout: tensor_map entry for dimension {dim}: axis")
                if int(a) in owner:
                    raise LayoutError(
                        f"TensorLayout: device-matrix axis {a} is used twice in tensor_map "
                        f"{tuple(self.tensor_map)} (dimension {owner[int(a)]} and dimension "
                        f"{dim}); an axis can split only one dimension, once")
                owner[int(a)] = dim
            tensor_map.append(int(axes[0]) if len(axes) == 1 else tuple(int(a) for a in axes))
            parts = math.prod(dm[n - 1 - a] for a in axes)
            if dim == 0 and self.row_blocks:
                _check_row_blocks(self.row_blocks, parts, shape[0])
            elif shape[dim] % parts:
                sizes = " x ".join(str(dm[n - 1 - a]) for a in axes)
                raise LayoutError(
                    f"TensorLayout: dimension {dim} of shape {shape} has size {shape[dim]}, which "
                    f"is not divisible into {parts} equal slices (device-matrix axis "
                    f"{entry} of size {sizes} in {list(dm)})")
        partial = self.partial
        partial = (partial,) if isinstance(partial, (int, np.integer)) else tuple(partial)
        for a in partial:
            _check_axis(a, n, "TensorLayout: partial axis")
            if int(a) in owner:
                raise LayoutError(f"TensorLayout: axis {a} is both partial and splits dimension "
                                  f"{owner[int(a)]}; an axis either splits or holds partial sums")
        if len(set(partial)) != len(partial):
            raise LayoutError(f"TensorLayout: partial axes {partial} repeat an axis")
        object.__setattr__(self, "device_matrix", dm)
        object.__setattr__(self, "tensor_map", tuple(tensor_map))
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "partial", tuple(sorted((int(a) for a in partial), reverse=True)))
        if self.row_blocks and (not tensor_map or tensor_map[0] == -1):
            raise LayoutError(f"TensorLayout: row_blocks {tuple(self.row_blocks)} need dimension "
                              f"0 to be split, but tensor_map is {tuple(tensor_map)}")
        object.__setattr__(self, "row_blocks", tuple(int(b) for b in self.row_blocks))

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_strategy(cls, strategy, shape, world=None, repeated_right=True):
        """The layout of a tensor that one primitive input strategy splits ``strategy[i]``
        ways along dimension ``i``: device matrix = the strategy (MindSpore's device
        arrangement of an elementwise op), dimension ``i`` on its own axis, plus the
        repeated-calculation axis when ``world`` has more devices than the strategy uses.

        >>> print(TensorLayout.from_strategy((4, 1), (16, 16), world=8))
        layout(dev=[4,1,2], map=[2,1], shape=(16,16))
        """
        strategy = tuple(strategy)
        if len(strategy) != len(shape) or not all(isinstance(s, (int, np.integer)) and s >= 1
                                                  for s in strategy):
            raise LayoutError(f"strategy {strategy} must give one positive split count per "
                              f"dimension of the shape {tuple(shape)}")
        rank = len(strategy)
        tensor_map = tuple(rank - 1 - i for i in range(rank))
        dm = strategy if strategy else (1,)
        if world is not None:
            dm = with_repeated_axis(dm, world, right=repeated_right)
            if repeated_right and len(dm) > len(strategy) and strategy:
                tensor_map = tuple(a + 1 for a in tensor_map)
        return cls(dm, tensor_map, tuple(shape))

    @classmethod
    def replicated(cls, shape, world):
        """Every one of ``world`` ranks holds the whole tensor."""
        return cls((world,), (-1,) * len(shape), tuple(shape))

    def replace(self, **changes):
        """A copy with some of ``device_matrix``, ``tensor_map``, ``shape``, ``partial`` changed."""
        return dataclasses.replace(self, **changes)

    # ---- what the map says --------------------------------------------------------------------
    @property
    def num_devices(self):
        return math.prod(self.device_matrix)

    def axis_size(self, axis):
        """Size of device-matrix ``axis`` (counted from the right)."""
        n = len(self.device_matrix)
        return self.device_matrix[n - 1 - _check_axis(axis, n, "axis")]

    def dim_axes(self, dim):
        """The axes splitting dimension ``dim`` (major first); () when it is not split."""
        entry = self.tensor_map[dim]
        return entry if isinstance(entry, tuple) else (() if entry == -1 else (entry,))

    def splits(self):
        """Number of slices of every dimension."""
        return tuple(math.prod(self.axis_size(a) for a in self.dim_axes(d))
                     for d in range(len(self.shape)))

    def local_shape(self, rank=None):
        """The shape of the block one rank holds (``rank`` is needed with ``row_blocks``)."""
        shape = tuple(n // s for n, s in zip(self.shape, self.splits()))
        if not self.row_blocks:
            return shape
        if rank is None:
            raise LayoutError(f"{self}: the blocks differ in size, so the local shape depends "
                              "on the rank; pass it")
        return (self.row_blocks[self.shard_index(rank, 0)],) + shape[1:]

    def split_axes(self):
        """Axes (of size > 1) that split some dimension, descending."""
        return tuple(sorted((a for d in range(len(self.shape)) for a in self.dim_axes(d)
                             if self.axis_size(a) > 1), reverse=True))

    def partial_axes(self):
        """Axes (of size > 1) over which the blocks are partial sums, descending."""
        return tuple(a for a in self.partial if self.axis_size(a) > 1)

    def replicated_axes(self):
        """Axes (of size > 1) along which ranks hold identical copies: neither splitting nor
        partial. A parameter's gradient is summed over these (MindSpore's mirror operator)."""
        taken = set(self.split_axes()) | set(self.partial)
        return tuple(a for a in reversed(range(len(self.device_matrix)))
                     if a not in taken and self.axis_size(a) > 1)

    def is_replicated(self):
        """True when every rank holds the whole, final tensor."""
        return not self.split_axes() and not self.partial_axes()

    # ---- ranks --------------------------------------------------------------------------------
    def rank_coordinates(self, rank):
        """``rank``'s index along every device-matrix axis, left to right (row-major)."""
        return rank_coordinates(self.device_matrix, rank)

    def coordinate(self, rank, axis):
        """``rank``'s index along device-matrix ``axis`` (counted from the right)."""
        n = len(self.device_matrix)
        return self.rank_coordinates(rank)[n - 1 - _check_axis(axis, n, "axis")]

    def shard_index(self, rank, dim):
        """Which of the ``splits()[dim]`` slices of dimension ``dim`` ``rank`` holds."""
        coords, n = self.rank_coordinates(rank), len(self.device_matrix)
        index = 0
        for a in self.dim_axes(dim):
            index = index * self.device_matrix[n - 1 - a] + coords[n - 1 - a]
        return index

    def slice_for(self, rank):
        """The block of the full tensor ``rank`` holds, as a tuple of Python slices."""
        index = []
        for d, k in enumerate(tuple(n // s for n, s in zip(self.shape, self.splits()))):
            i = self.shard_index(rank, d)
            if d == 0 and self.row_blocks:
                start = sum(self.row_blocks[:i])
                index.append(slice(start, start + self.row_blocks[i]))
            else:
                index.append(slice(i * k, (i + 1) * k))
        return tuple(index)

    def group_along(self, axis, rank):
        """The ranks differing from ``rank`` only along ``axis``: a collective's group."""
        return group_ranks(self.device_matrix, (axis,), rank)

    def group_over(self, axes, rank):
        """The ranks differing from ``rank`` only along ``axes`` (ascending)."""
        return group_ranks(self.device_matrix, tuple(axes), rank)

    # ---- arrays -------------------------------------------------------------------------------
    def shard(self, full, rank):
        """``rank``'s local array of the full array ``full`` (a copy). For a partial layout
        this is one valid split into partial sums: the block on the ranks at coordinate 0 of
        every partial axis, zeros on the others."""
        full = np.asarray(full)
        if tuple(full.shape) != self.shape:
            raise LayoutError(f"shard: array of shape {full.shape} does not match {self}")
        block = np.array(full[self.slice_for(rank)], copy=True)
        if any(self.coordinate(rank, a) for a in self.partial):
            block[...] = 0
        return block

    def __str__(self):
        def entry(e):
            return "(" + ",".join(map(str, e)) + ")" if isinstance(e, tuple) else str(e)
        text = (f"layout(dev=[{','.join(map(str, self.device_matrix))}], "
                f"map=[{','.join(entry(e) for e in self.tensor_map)}], "
                f"shape=({','.join(map(str, self.shape))}{',' if len(self.shape) == 1 else ''})")
        if self.partial:
            text += f", partial=[{','.join(map(str, self.partial))}]"
        if self.row_blocks:
            text += f", row_blocks=[{','.join(map(str, self.row_blocks))}]"
        return text + ")"


# ---- whole arrays ---------------------------------------------------------------------------
def scatter_array(full, layout):
    """Every rank's local array of ``full`` under ``layout``, indexed by rank.

    >>> parts = scatter_array(np.arange(8.0).reshape(2, 4), TensorLayout((2,), (-1, 0), (2, 4)))
    >>> parts[1].tolist()
    [[2.0, 3.0], [6.0, 7.0]]
    """
    return [layout.shard(full, r) for r in range(layout.num_devices)]


def assemble_array(local_arrays, layout, check=True):
    """The full array from every rank's local array (indexed by rank): blocks are put in
    place and partial sums added up. ``check`` verifies that the copies along replicated
    axes agree (``LayoutError`` otherwise), which catches a wrong redistribution.

    >>> layout = TensorLayout((2,), (-1, 0), (2, 4))
    >>> assemble_array(scatter_array(np.arange(8.0).reshape(2, 4), layout), layout).tolist()
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    """
    if len(local_arrays) != layout.num_devices:
        raise LayoutError(f"assemble_array: got {len(local_arrays)} local arrays for "
                          f"{layout.num_devices} devices of {layout}")
    for r, a in enumerate(local_arrays):
        if tuple(np.shape(a)) != layout.local_shape(r):
            raise LayoutError(f"assemble_array: rank {r} holds shape {np.shape(a)}, but {layout} "
                              f"gives it {layout.local_shape(r)}")
    dtype = np.result_type(*[np.asarray(a).dtype for a in local_arrays])
    full = np.zeros(layout.shape, dtype)
    copies = layout.replicated_axes()
    for r, a in enumerate(local_arrays):
        if any(layout.coordinate(r, ax) for ax in copies):
            continue
        full[layout.slice_for(r)] += np.asarray(a)
        if check:
            for other in layout.group_over(copies, r):
                if not np.allclose(local_arrays[other], a, rtol=1e-5, atol=1e-6):
                    raise LayoutError(f"assemble_array: ranks {r} and {other} should hold copies "
                                      f"of the same block under {layout}, but they differ")
    return full
