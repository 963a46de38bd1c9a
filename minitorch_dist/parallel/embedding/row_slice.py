"""Row-sliced embedding tables across ranks: ``EmbeddingLookup(slice_mode="table_row_slice")``.

In a job of N ranks each rank keeps one contiguous block of the table's rows: rank r holds
rows ``[r * block, min((r + 1) * block, vocab))`` with ``block = ceil(vocab / N)``. When N
does not divide the vocabulary the last ranks' blocks are shorter (possibly empty). Each rank
still looks up its own batch of ids (data parallel); ids and rows travel by all-to-all:

======================================================  ===================================
forward on rank r (``ids``: r's own batch)              backward (``g``: r's output grad)
======================================================  ===================================
1. count r's ids per owner and check their range;       1. the gradient rows go back to
   all-gather the counts and an error flag, so every       the owners of their ids, in the
   rank learns the message sizes and every rank raises     forward's order (all-to-all)
   the same IndexError together (none is left waiting)  2. each owner's table gradient is
2. all-to-all of the ids, padded to the longest            a ``RowTensor`` of LOCAL row
   message (the communicator moves equal chunks)           indices: the rows of every
3. each owner gathers its rows; all-to-all back            rank's batch that it owns
4. the rows are put back in the order of r's ids
======================================================  ===================================

The backward already sums every rank's contribution on the owner, so
``DistributedGradReducer`` neither gathers nor all-reduces a row-sliced table's gradient: it
only divides it by the group size when ``mean`` (see ``RowSlice``). Like every differentiable
collective, the lookup must run forward and backward on every rank of the group, in the same
order (a rank with an empty batch still takes part).

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist.communication import run_ranks
>>> table = np.arange(10.0, dtype=np.float32).reshape(5, 2)
>>> def rank_step(comm):
...     part = row_slice(table.shape, comm.rank, comm.size)       # rows 0-2 and 3-4
...     local = ms.Parameter(ms.Tensor(table[part.offset:part.offset + part.rows]), name="t")
...     ids = ms.Tensor([[4, 0]] if comm.rank else [[4]])
...     out = RowSliceLookup(part, comm)(local, ids)
...     out.sum().backward()
...     return out.asnumpy()[0, :, 0].tolist(), local.grad.indices.asnumpy().tolist()
>>> run_ranks(2, rank_step)       # rank 1 owns id 4 (local row 1), looked up by both ranks
[([8.0], [0]), ([8.0, 0.0], [1, 1])]
"""
import logging
from collections import namedtuple

import numpy as np

from ...communication import Communicator, GlobalComm, get_communicator
from ...ops.embedding import _scatter_add, _use_kernels
from ...ops.primitive import Primitive
from ...row_tensor import RowTensor
from ...tensor import Tensor
from ..comm.collectives import communicator_for

__all__ = ["RowSlice", "row_block", "row_slice", "slicing_communicator", "slice_table",
           "RowSliceLookup"]


class RowSlice(namedtuple("RowSlice", "offset rows full_shape rank size")):
    """Which rows of a full table one rank holds: ``full[offset:offset + rows]``.

    A row-sliced table Parameter carries one as its ``row_slice`` attribute; the gradient
    reducer and the checkpoint merge read it (plain parameters have no such attribute).
    """

    @property
    def vocab_size(self):
        return self.full_shape[0]


def row_block(vocab_size, size):
    """Rows per rank: ``ceil(vocab_size / size)`` (the last ranks may hold fewer)."""
    return -(-vocab_size // size)


def row_slice(full_shape, rank, size):
    """The ``RowSlice`` of rank ``rank`` of ``size`` for a table of ``full_shape``.

    >>> [row_slice((10, 4), r, 4)[:2] for r in range(4)]      # blocks of ceil(10 / 4) = 3
    [(0, 3), (3, 3), (6, 3), (9, 1)]
    """
    vocab = full_shape[0]
    start = min(rank * row_block(vocab, size), vocab)
    stop = min(start + row_block(vocab, size), vocab)
    return RowSlice(start, stop - start, tuple(full_shape), rank, size)


def slicing_communicator(group=None):
    """The Communicator a row-sliced table is split over, or None for one process.

    ``group``: a ``Communicator``, a group name, or None for the world. Without ``init()``,
    or in a group of one, the table stays whole (row slicing is then batch slicing).
    """
    if isinstance(group, Communicator):
        comm = group
    elif group is None and not GlobalComm.INITED:
        return None
    else:
        comm = get_communicator(group)
    return comm if comm.size > 1 else None


def sliced_embedding(slice_mode, shape, dtype, param_init, home, group, sparse,
                     manual_shapes=None):
    """An ``EmbeddingLookup``'s table and lookup under ``slice_mode`` when it is split across
    ranks: ``(row-block Parameter, RowSliceLookup)``; None when the table stays whole
    ("batch_slice", or one rank)."""
    from ..context import shards_operators
    if shards_operators():
        return sharded_lookup(slice_mode, shape, dtype, param_init, home, group, sparse,
                              manual_shapes)
    if slice_mode == "batch_slice":
        return None
    comm = slicing_communicator(group)
    if comm is None:
        return None
    if slice_mode != "table_row_slice":
        _note_whole_table(slice_mode, comm.size)
        return None
    from ...common.initializer import initializer
    from ...nn.parameter import Parameter
    part = row_slice(shape, comm.rank, comm.size)
    full = initializer(param_init, shape, dtype, device="CPU")
    table = Parameter(slice_table(full, part, home), device=home)
    table.row_slice = part
    return table, RowSliceLookup(part, comm, sparse=sparse)


_noted_modes = set()


def _note_whole_table(slice_mode, ranks):
    """MindSpore applies "table_column_slice" and "field_slice" only under semi/auto
    parallel; elsewhere its layer keeps the table whole. So does this one, and says so once."""
    if slice_mode not in _noted_modes:
        _noted_modes.add(slice_mode)
        logging.getLogger("minitorch_dist").warning(
            "EmbeddingLookup(slice_mode=%r) on %d ranks outside SEMI_AUTO_PARALLEL/"
            "AUTO_PARALLEL: every rank holds the whole table, as in MindSpore, which applies "
            "this slice mode only under semi/auto parallel. Set parallel_mode to one of "
            "them to slice it, or use 'table_row_slice', which slices in data parallel too.",
            slice_mode, ranks)


def field_slice_split(manual_shapes, vocab_size, ranks):
    """Check ``manual_shapes`` (table rows per rank) for a field-sliced table of
    ``vocab_size`` rows over ``ranks``; return it as a tuple of ints."""
    if not isinstance(manual_shapes, (tuple, list)) or len(manual_shapes) != ranks \
            or not all(isinstance(m, int) and not isinstance(m, bool) and m > 0
                       for m in manual_shapes):
        raise ValueError(f"EmbeddingLookup(slice_mode='field_slice'): manual_shapes must give "
                         f"one positive row count per rank ({ranks} here), got {manual_shapes!r}")
    if sum(manual_shapes) != vocab_size:
        raise ValueError(f"EmbeddingLookup(slice_mode='field_slice'): manual_shapes "
                         f"{tuple(manual_shapes)} add up to {sum(manual_shapes)} rows, but the "
                         f"table has vocab_size={vocab_size}")
    return tuple(manual_shapes)


def sharded_lookup(slice_mode, shape, dtype, param_init, home, group, sparse,
                   manual_shapes=None):
    """Under semi/auto parallel a slice mode is an operator strategy, as MindSpore's layer
    sets it: the table whole (its slices are cut when the network is first run sharded)
    and the lookup sharded over the ``n`` ranks: "batch_slice" splits the ids
    ``((1, 1), (n, 1))``, "table_row_slice" the table's rows ``((n, 1), (1, 1))``,
    "table_column_slice" its columns ``((1, n), (1, 1))`` (each rank then looks up every
    id in its columns), "field_slice" the table's rows by ``manual_shapes`` and the ids'
    fields ``((n, 1), (1, n))``, the lookup's ``manual_split`` (rank r looks up its block of
    fields in its block of rows). Ids must be 2-D (batch, fields), as in MindSpore."""
    from ..sharding.scope import current_world
    comm = slicing_communicator(group) if group is not None else current_world()
    if comm is None or comm.size == 1:
        return None
    n = comm.size
    strategies = {"batch_slice": ((1, 1), (n, 1)), "table_row_slice": ((n, 1), (1, 1)),
                  "table_column_slice": ((1, n), (1, 1)), "field_slice": ((n, 1), (1, n))}
    from ...common.initializer import initializer
    from ...nn.parameter import Parameter
    from ...ops.embedding import EmbeddingLookup
    table = Parameter(initializer(param_init, shape, dtype, device=home), device=home)
    lookup = EmbeddingLookup(sparse=sparse).shard(strategies[slice_mode])
    if slice_mode == "field_slice":
        lookup.manual_split = field_slice_split(manual_shapes, shape[0], n)
    return table, lookup


def slice_table(full, part, device=None):
    """Rows ``part`` of the full table ``full`` (a Tensor), as a new Tensor on ``device``.

    Every rank initialises the same full table from the same seed and keeps its rows, so a
    row-sliced job starts from the weights of one process. (The full table exists on the
    host for that moment; only the slice goes on to ``device``.)
    """
    rows = full.data[part.offset:part.offset + part.rows]
    return Tensor(np.ascontiguousarray(full.device.host_array(rows)), device=device)


class _Routing:
    """Where this rank's ids go and what came in (see ``_route``)."""

    __slots__ = ("order", "dest", "pos", "width", "valid", "local")


def _exchange_status(comm, xp, device, counts, bad_id):
    """All-gather ``[counts per owner..., has_bad_id, bad_id]``: every rank gets everyone's
    message sizes and error flag from one collective (a host array of shape (size, size + 2))."""
    wire_id = 0 if bad_id is None else min(bad_id, np.iinfo(np.int64).max)   # huge uint64
    flag = xp.asarray([bad_id is not None, wire_id], dtype=np.int64)
    status = xp.concatenate([counts.astype(np.int64), flag])
    return device.host_array(comm.allgather(status))


def _raise_bad_id(prim, status, vocab):
    """Every rank raises the same IndexError, naming the first offending rank's id."""
    bad = np.flatnonzero(status[:, -2])
    if bad.size:
        rank, bad_id = int(bad[0]), int(status[bad[0], -1])
        raise IndexError(f"{prim.name}: id {bad_id} in the batch of rank {rank} is out of range "
                         f"for a vocabulary of {vocab} rows (ids must lie in [0, {vocab})); "
                         f"every rank of the row-sliced table stops here")


def _route(prim, comm, device, ids, part):
    """Send every id to the rank owning its row; returns the ``_Routing`` both directions use.

    Ids are grouped by owner (keeping their order within each owner, so an owner sees the
    ids of rank 0, then rank 1, ... in batch order: the order one process would see), then
    sent as a (size, width) block padded to the longest message of any pair of ranks.
    """
    xp, size = device.xp, comm.size
    flat = ids.reshape(-1)
    n, vocab = flat.shape[0], part.vocab_size
    bad = (flat < 0) | (flat >= vocab)
    bad_id = int(flat[int(xp.argmax(bad))]) if n and bool(bad.any()) else None
    flat = flat.astype(np.int64)
    owner = xp.zeros(n, np.int64) if bad_id is not None else flat // row_block(vocab, size)
    counts = xp.bincount(owner, minlength=size) if n else xp.zeros(size, np.int64)
    status = _exchange_status(comm, xp, device, counts, bad_id)
    _raise_bad_id(prim, status, vocab)
    sent = status[:, :size]                      # sent[s, j]: ids rank s sends to rank j
    plan = _Routing()
    plan.width = int(sent.max()) if sent.size else 0
    # a unique key per id keeps the grouping stable on any sort (CuPy's included)
    plan.order = xp.argsort(owner * max(n, 1) + xp.arange(n))
    plan.dest = owner[plan.order]
    starts = xp.cumsum(counts) - counts
    plan.pos = xp.arange(n) - starts[plan.dest]
    recv_counts = xp.asarray(sent[:, comm.rank])
    plan.valid = xp.arange(plan.width)[None, :] < recv_counts[:, None]
    if plan.width == 0:                          # no rank has any id: nothing to send
        plan.local = xp.zeros(0, np.int64)
        return plan
    block = xp.zeros((size, plan.width), np.int64)
    block[plan.dest, plan.pos] = flat[plan.order]
    plan.local = comm.alltoall(block)[plan.valid] - part.offset
    return plan


def _to_owners(comm, xp, plan, rows):
    """Rows in this rank's id order -> the (size, width, ...) block that the owners receive."""
    block = xp.zeros((comm.size, plan.width) + rows.shape[1:], rows.dtype)
    block[plan.dest, plan.pos] = rows[plan.order]
    return comm.alltoall(block)


def _from_owners(comm, xp, plan, rows, n):
    """The rows an owner gathered (valid slots of its received block) -> back to the ranks
    that asked, in each asking rank's id order."""
    block = xp.zeros((comm.size, plan.width) + rows.shape[1:], rows.dtype)
    block[plan.valid] = rows
    back = comm.alltoall(block)
    out = xp.empty((n,) + rows.shape[1:], rows.dtype)
    out[plan.order] = back[plan.dest, plan.pos]
    return out


class RowSliceLookup(Primitive):
    """``RowSliceLookup(part, communicator, sparse=True)(local_table, ids)``: the rows of
    the full table at ``ids`` (this rank's batch), shape ``ids.shape + row_shape``, while
    this rank holds only ``local_table`` = rows ``part`` (a ``RowSlice``) of it.

    Collective over ``communicator``; see the module docstring for the protocol. The table's
    gradient holds LOCAL row indices: a ``RowTensor`` (``sparse=True``) or a dense array
    shaped like ``local_table``. Ids outside ``[0, vocab)`` on any rank raise the same
    IndexError on every rank.
    """

    def __init__(self, part, communicator, sparse=True):
        self.part = part
        self.communicator = communicator
        self.sparse = bool(sparse)

    def forward(self, ctx, table, ids):
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: ids must be integers, got {ids.dtype}")
        if table.shape[0] != self.part.rows:
            raise ValueError(f"{self.name}: this rank holds rows [{self.part.offset}, "
                             f"{self.part.offset + self.part.rows}) of the table, but the "
                             f"table given has {table.shape[0]} rows")
        xp = ctx.xp
        comm = ctx.comm = communicator_for(self.communicator, ctx.device)
        plan = ctx.plan = _route(self, comm, ctx.device, ids, self.part)
        ctx.table_shape, ctx.n = table.shape, plan.order.shape[0]
        row_shape = table.shape[1:]
        if plan.width == 0:
            return xp.zeros(ids.shape + row_shape, table.dtype)
        if _use_kernels(xp, table):
            from ... import kernels
            rows = kernels.embedding_gather(table, plan.local)
        else:
            rows = xp.take(table, plan.local, axis=0)
        return _from_owners(comm, xp, plan, rows, ctx.n).reshape(ids.shape + row_shape)

    def backward(self, ctx, grad):
        comm, xp, plan = ctx.comm, ctx.xp, ctx.plan
        row_shape = ctx.table_shape[1:]
        if plan.width == 0:
            values = xp.zeros((0,) + row_shape, grad.dtype)
        else:
            received = _to_owners(comm, xp, plan, grad.reshape((ctx.n,) + row_shape))
            values = received[plan.valid]
        if self.sparse:
            return RowTensor(Tensor._make(plan.local, ctx.device),
                             Tensor._make(values, ctx.device), ctx.table_shape), None
        dense = xp.zeros(ctx.table_shape, grad.dtype)
        _scatter_add(xp, dense, plan.local, values)
        return dense, None

    def __repr__(self):
        return (f"RowSliceLookup(name={self.name}, rows=[{self.part.offset}, "
                f"{self.part.offset + self.part.rows}) of {self.part.vocab_size}, "
                f"ranks={self.part.size})")
