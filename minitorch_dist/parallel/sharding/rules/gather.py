"""Gather and EmbeddingLookup on slices: split the ids (data parallel) or the table's rows.

``Gather(table, ids, axis)`` has output shape ``table[:axis] + ids.shape + table[axis+1:]``.
The work dimensions are the table's and then the ids'; the output takes the ids' layout in
place of the gathered axis and the table's layout elsewhere.

* ids split, gathered axis whole (data parallel, the usual case): each rank looks up its
  own ids in its copy of the table. No communication.
* gathered axis split ``r`` ways (a row-split table, "model parallel" embedding): rank k
  along that axis holds rows ``[k*n/r, (k+1)*n/r)``. It shifts every id by its first row
  (``local_inputs``, which needs the rank's coordinates), looks up the ids that fall in its
  range (ids outside are pointed at row 0) and zeroes the rows it does not own
  (``local_output``); an AllReduce(sum) over the row axis then gives every rank every row,
  each contributed by exactly one rank. The zeroing multiplies by a 0/1 mask, so the
  table's gradient only reaches the rows this rank owns.
* field slice (MindSpore's ``manual_split``, set by ``EmbeddingLookup(slice_mode=
  "field_slice", manual_shapes=...)``): strategy ``((n, 1), (1, n))`` splits the table's
  rows and the ids' fields over the same n ranks. Rank k holds rows
  ``[sum(m[:k]), sum(m[:k+1]))`` and looks up its block of fields there; the output is
  split by fields and needs no communication. The data must keep each field block's ids
  in its block of rows (that is what the manual shapes describe); an id outside it gives a
  zero row, as a row-split lookup does on the ranks that do not own it. The blocks may
  differ in size (the table's layout then carries ``row_blocks``).

>>> import numpy as np
>>> from minitorch_dist import Tensor, ops
>>> from minitorch_dist.parallel.sharding.rules import plan, run_local
>>> table = np.arange(8.0).reshape(4, 2)
>>> p = plan(ops.Gather(), ((2, 1), (1,)), [(4, 2), (3,)], [None, None], {"axis": 0}, 2)
>>> p.output_maps, [str(s) for s in p.forward_comm]
(((0, 1),), ['AllReduce(sum) over device-matrix axes (2,) on output 0'])
>>> ids = Tensor(np.array([3, 0, 2]))
>>> run_local(p, ops.Gather(), [Tensor(table[2:]), ids], {"axis": 0}, rank=1).asnumpy().tolist()
[[6.0, 7.0], [0.0, 0.0], [4.0, 5.0]]
"""
import numpy as np

from ....backend import get_device
from ....ops import embedding, indexing
from ....ops.arithmetic import Mul
from ....tensor import Tensor
from ....ops.axes import normalize_axis
from .base import ALL_REDUCE, CommStep, Grid, Rule, ShardPlan, register
from .elementwise import _maps_at
from .errors import ShardingError

__all__ = ["GatherRule"]

_MASK = Mul()
_MASK.instance_name = "sharded_gather_mask"


def _ids_array(ids):
    """(array, device) of ids given as a Tensor, or (NumPy array, None) for a constant."""
    if isinstance(ids, Tensor):
        return ids.data, ids.device
    return np.asarray(ids), None


def _local_ids(ids, first, rows, total):
    """(ids relative to ``first``, pointing at row 0 when outside ``[0, rows)``; the
    in-range mask; the ids' device or None)."""
    data, device = _ids_array(ids)
    xp = device.xp if device is not None else np
    full = xp.where(data < 0, data + total, data)      # Gather takes ids down to -total
    local = full - first
    valid = (local >= 0) & (local < rows)
    local = xp.where(valid, local, 0).astype(data.dtype, copy=False)
    return local, valid, device


def _owned_rows(grid, axis, table, blocks):
    """``(local_inputs, local_output)`` of a table whose gathered ``axis`` is cut into
    ``blocks`` (sizes, in order) along its device-matrix axis: a rank shifts the ids by its
    block's first row, points the ids it does not own at row 0, and zeroes their rows."""
    where = len(grid.device_matrix) - 1 - grid.axis(axis)   # the row axis in coords
    starts = [sum(blocks[:c]) for c in range(len(blocks))]
    total = table[axis]

    def local_inputs(inputs, attrs, coords):
        inputs = list(inputs)
        c = coords[where]
        local, _, device = _local_ids(inputs[1], starts[c], blocks[c], total)
        inputs[1] = Tensor._make(local, device) if device is not None else local
        return inputs, dict(attrs)

    def local_output(out, inputs, attrs, coords):
        c = coords[where]
        _, valid, device = _local_ids(inputs[1], starts[c], blocks[c], total)
        mask = valid.reshape((1,) * axis + valid.shape + (1,) * (len(table) - axis - 1))
        mask = mask.astype(out.data.dtype)
        source = device if device is not None else get_device("CPU")
        if source is not out.device:
            mask = out.device.copy_from(mask, source)
        return _MASK.run(out, Tensor._make(mask, out.device))

    return local_inputs, local_output


class GatherRule(Rule):
    types = (indexing.Gather, embedding.EmbeddingLookup)

    # ---- the call ---------------------------------------------------------------------
    @staticmethod
    def _axis(call):
        if isinstance(call.prim, embedding.EmbeddingLookup):
            return 0
        shape = call.in_shapes[0]
        return normalize_axis(call.value("axis", 2, 0), len(shape), call.name, shape,
                              ShardingError)

    @staticmethod
    def _ids_shape(call):
        if len(call.in_shapes) > 1 and call.in_shapes[1] is not None:
            return call.in_shapes[1], True
        return np.shape(call.inputs[1]), False

    def check_call(self, call):
        if len(call.in_shapes) < 2 or call.in_shapes[0] is None or not call.in_shapes[0]:
            raise call.error(f"expects a table tensor with at least one axis and ids, got input "
                             f"shapes {call.in_shapes}")
        if call.in_shapes[1] is None and call.inputs[1] is None:
            raise call.error("got no ids")
        if len(call.positions) != (2 if self._ids_shape(call)[1] else 1):
            raise call.error(f"expects tensors (table, ids), got input shapes {call.in_shapes}")
        self._axis(call)

    def strategy_shapes(self, call):
        """A field-sliced table's rows are cut by ``manual_split``, not into equal slices:
        the strategy's first entry counts its blocks."""
        manual = call.prim.manual_split
        if manual is None:
            return None
        table = call.in_shapes[0]
        ids_shape = self._ids_shape(call)[0]
        return [(len(manual),) + table[1:], ids_shape], "field-sliced lookup input"

    def op_dims(self, call):
        ids, is_tensor = self._ids_shape(call)
        return call.in_shapes[0] + (ids if is_tensor else ())

    def strategy_from(self, call, splits):
        table_ndim = len(call.in_shapes[0])
        ids_tensor = self._ids_shape(call)[1]
        return (tuple(splits[:table_ndim]),) + ((tuple(splits[table_ndim:]),) if ids_tensor else ())

    def batch_op_dim(self, call):
        ids, is_tensor = self._ids_shape(call)
        return len(call.in_shapes[0]) if is_tensor and ids else None

    # ---- the plan ---------------------------------------------------------------------
    def build(self, call, strategy, world, out_strategy):
        if call.prim.manual_split is not None:
            return self._field_slice(call, strategy, world)
        table = call.in_shapes[0]
        ids_shape, ids_tensor = self._ids_shape(call)
        axis = self._axis(call)
        grid = Grid(call, sum(strategy, ()), world, strategy)
        table_map = tuple(grid.axis(d) for d in range(len(table)))
        ids_map = tuple(grid.axis(len(table) + d) for d in range(len(ids_shape))) if ids_tensor \
            else (-1,) * len(ids_shape)
        out_map = table_map[:axis] + ids_map + table_map[axis + 1:]
        maps = {0: table_map}
        if ids_tensor:
            maps[1] = ids_map
        in_maps = _maps_at(call, maps)
        parts = strategy[0][axis]
        if parts == 1:
            return ShardPlan(grid.device_matrix, in_maps, (out_map,))
        rows = table[axis] // parts
        local_inputs, local_output = _owned_rows(grid, axis, table, [rows] * parts)
        return ShardPlan(grid.device_matrix, in_maps, (out_map,),
                         (CommStep(ALL_REDUCE, (grid.axis(axis),)),), local_inputs, local_output)

    def _field_slice(self, call, strategy, world):
        """The plan of a field-sliced lookup (see the module docstring)."""
        table = call.in_shapes[0]
        ids_shape, ids_tensor = self._ids_shape(call)
        n = strategy[0][0]
        if (self._axis(call) != 0 or len(table) != 2 or not ids_tensor or len(ids_shape) != 2
                or strategy != ((n, 1), (1, n))):
            raise call.error(f"manual_split (a field-sliced table) needs a 2-D table, 2-D ids "
                             f"(batch, fields) and the strategy ((n, 1), (1, n)); got table "
                             f"{table}, ids {ids_shape} and {strategy}")
        manual = tuple(int(m) for m in call.prim.manual_split)
        if len(manual) != n or sum(manual) != table[0] or min(manual) < 1:
            raise call.error(f"manual_split {manual} must give one positive row count per rank "
                             f"of the split ({n}) adding up to the table's {table[0]} rows")
        grid = Grid(call, (n,), world, strategy)
        k = grid.axis(0)
        local_inputs, local_output = _owned_rows(grid, 0, table, manual)
        in_maps = _maps_at(call, {0: (k, -1), 1: (-1, k)})
        blocks = () if len(set(manual)) == 1 else ((0, manual),)
        return ShardPlan(grid.device_matrix, in_maps, ((-1, k, -1),), (), local_inputs,
                         local_output, input_row_blocks=blocks)


register(GatherRule())
