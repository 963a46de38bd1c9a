"""The pipeline nodes behind ``map``, ``batch``, ``shuffle``, ``repeat`` and ``take``."""
import itertools
import math

import numpy as np

from .config import rng_for
from .engine import BLOCK_ROWS, Dataset, block_length, concat_blocks
from .transforms import apply_operations, supports_batch


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _column_list(columns, what):
    if isinstance(columns, str):
        return [columns]
    columns = list(columns)
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"map: {what} must be a column name or a non-empty list of names, "
                         f"got {columns!r}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"map: {what} has duplicate names: {columns}")
    return columns


class MapDataset(Dataset, operation="map"):
    """Applies operations to some columns; other columns pass through unchanged."""

    def __init__(self, child, operations, input_columns=None, output_columns=None, column_order=None):
        super().__init__([child])
        operations = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        if not operations:
            raise ValueError("map: operations is empty; pass a callable or a list of callables")
        for op in operations:
            if not callable(op):
                raise TypeError(f"map: every operation must be callable, got {op!r}")
        self.operations = operations
        names = child.get_col_names()
        self.input_columns = ([names[0]] if input_columns is None
                              else _column_list(input_columns, "input_columns"))
        unknown = [c for c in self.input_columns if c not in names]
        if unknown:
            raise ValueError(f"map: unknown input column(s) {unknown}; the dataset has columns {names}")
        self.output_columns = (list(self.input_columns) if output_columns is None
                               else _column_list(output_columns, "output_columns"))
        # outputs take the place of the first input column; the other inputs are consumed
        kept = [c for c in names if c not in self.input_columns]
        clash = [c for c in self.output_columns if c in kept]
        if clash:
            raise ValueError(f"map: output column(s) {clash} already exist and are not inputs")
        first = names.index(self.input_columns[0])
        at = sum(1 for c in names[:first] if c not in self.input_columns)
        self._names = kept[:at] + self.output_columns + kept[at:]
        if column_order is not None:
            order = _column_list(column_order, "column_order")
            if sorted(order) != sorted(self._names):
                raise ValueError(f"map: column_order {order} must list exactly the columns "
                                 f"{self._names}")
            self._names = order
        self._in_pos = [names.index(c) for c in self.input_columns]
        # where each output column comes from: ("in", child position) or ("out", result index)
        self._sources = [("out", self.output_columns.index(c)) if c in self.output_columns
                         else ("in", names.index(c)) for c in self._names]
        self._vectorized = child._block_native() and all(supports_batch(op) for op in operations)

    def get_col_names(self):
        return list(self._names)

    def _size(self):
        return self.children[0]._size()

    def _block_native(self):
        return self._vectorized

    def _apply(self, values, batched):
        try:
            results = apply_operations(self.operations, values, batched)
        except Exception as err:
            if hasattr(err, "add_note"):   # Python >= 3.11: say which map failed
                err.add_note(f"(in map over column(s) {self.input_columns} with {self.operations})")
            raise
        if len(results) != len(self.output_columns):
            raise ValueError(f"map: the operations returned {len(results)} value(s) but the output "
                             f"columns are {self.output_columns}; pass output_columns to name them")
        return results

    def _assemble(self, row, results):
        return tuple(results[i] if kind == "out" else row[i] for kind, i in self._sources)

    def _iter_blocks(self, key):
        for block in self.children[0]._iter_blocks(key):
            results = self._apply([block[p] for p in self._in_pos], batched=True)
            n = block_length(block)
            for name, value in zip(self.output_columns, results):
                if np.ndim(value) == 0 or np.shape(value)[0] != n:
                    raise ValueError(f"map: a batched operation returned shape {np.shape(value)} for "
                                     f"column {name!r}, expected a leading axis of {n} samples")
            yield self._assemble(block, results)

    def _iter_rows(self, key):
        if self._vectorized:
            yield from super()._iter_rows(key)
            return
        for row in self.children[0]._iter_rows(key):
            results = self._apply([row[p] for p in self._in_pos], batched=False)
            yield self._assemble(row, tuple(np.asarray(r) for r in results))


class BatchDataset(Dataset, operation="batch"):
    """Groups ``batch_size`` consecutive rows into one row of stacked arrays."""

    def __init__(self, child, batch_size, drop_remainder=False):
        super().__init__([child])
        if not _is_int(batch_size) or batch_size < 1:
            raise ValueError(f"batch: batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = int(batch_size)
        self.drop_remainder = bool(drop_remainder)

    def get_col_names(self):
        return self.children[0].get_col_names()

    def get_batch_size(self):
        return self.batch_size

    def _size(self):
        rows = self.children[0]._size()
        return rows // self.batch_size if self.drop_remainder else math.ceil(rows / self.batch_size)

    def _iter_rows(self, key):
        child = self.children[0]
        if child._block_native():
            yield from self._rebatch_blocks(child._iter_blocks(key))
            return
        rows = []
        for row in child._iter_rows(key):
            rows.append(row)
            if len(rows) == self.batch_size:
                yield self._stack(rows)
                rows = []
        if rows and not self.drop_remainder:
            yield self._stack(rows)

    def _rebatch_blocks(self, blocks):
        """Cut a stream of blocks into batches; slices are views, only straddling batches copy."""
        size = self.batch_size
        pending, pending_rows = [], 0
        for block in blocks:
            n, start = block_length(block), 0
            if pending_rows:
                take = min(size - pending_rows, n)
                pending.append(tuple(c[:take] for c in block))
                pending_rows += take
                start = take
                if pending_rows < size:
                    continue
                yield concat_blocks(pending)
                pending, pending_rows = [], 0
            while n - start >= size:
                yield tuple(c[start:start + size] for c in block)
                start += size
            if start < n:
                pending, pending_rows = [tuple(c[start:] for c in block)], n - start
        if pending_rows and not self.drop_remainder:
            yield concat_blocks(pending)

    def _stack(self, rows):
        names = self.get_col_names()
        batch = []
        for i, name in enumerate(names):
            values = [np.asarray(row[i]) for row in rows]
            _check_one_dtype(values, name)
            try:
                batch.append(np.stack(values))
            except ValueError:
                shapes = sorted({np.shape(row[i]) for row in rows})
                raise ValueError(f"batch: rows of column {name!r} have different shapes {shapes}; "
                                 "resize or pad them before batching") from None
        return tuple(batch)


def _check_one_dtype(values, column):
    """Refuse a batch whose rows disagree on the column's dtype: ``np.stack`` would promote
    float32 and int64 rows to float64 (or int8 and uint8 to int16) without a word, and the
    batch's dtype would depend on which rows happened to meet."""
    dtypes = {v.dtype.kind if v.dtype.kind in "SU" else v.dtype for v in values}  # text of any width
    if len(dtypes) > 1:
        names = sorted(getattr(d, "name", "str") for d in dtypes)
        raise TypeError(f"batch: rows of column {column!r} have different dtypes {names}; one batch "
                        "holds one dtype. Cast the column first (ds.transforms.TypeCast, or "
                        "GeneratorDataset(column_types=...))")


def buffer_shuffle(items, buffer_size, rng):
    """MindSpore-style buffered shuffle: emit a random buffered item, refill its slot.

    Draws come in fixed chunks, so the same items give the same order whether they are
    rows or row indices (the block path shuffles indices, the row path rows).
    """
    buffer = []
    draws, used = None, 0
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        if draws is None or used == len(draws):
            draws, used = rng.integers(0, buffer_size, size=1024), 0
        slot = draws[used]
        used += 1
        yield buffer[slot]
        buffer[slot] = item
    for slot in rng.permutation(len(buffer)):
        yield buffer[slot]


def _count_shuffles(dataset):
    own = 1 if isinstance(dataset, ShuffleDataset) else 0
    return own + sum(_count_shuffles(c) for c in dataset.children)


class ShuffleDataset(Dataset, operation="shuffle"):
    """Shuffles rows through a buffer; a buffer as big as the data gives a full shuffle."""

    def __init__(self, child, buffer_size):
        super().__init__([child])
        if not _is_int(buffer_size) or buffer_size < 2:
            raise ValueError(f"shuffle: buffer_size must be an integer >= 2, got {buffer_size!r}")
        self.buffer_size = int(buffer_size)
        # the n-th shuffle of a pipeline seeds with salt n: two shuffles differ, and maps
        # between them do not change the order
        self.salt = 1 + _count_shuffles(child)

    def get_col_names(self):
        return self.children[0].get_col_names()

    def _size(self):
        return self.children[0]._size()

    def _block_native(self):
        return self.children[0]._block_native()

    def _rng(self, key):
        return rng_for(self.salt, key)

    def _iter_blocks(self, key):
        # gathers the child's epoch (array sources hold their data in memory anyway)
        blocks = list(self.children[0]._iter_blocks(key))
        if not blocks:
            return
        data = concat_blocks(blocks)
        order = np.fromiter(buffer_shuffle(range(block_length(data)), self.buffer_size, self._rng(key)),
                            dtype=np.int64, count=block_length(data))
        for start in range(0, len(order), BLOCK_ROWS):
            chosen = order[start:start + BLOCK_ROWS]
            yield tuple(np.take(c, chosen, axis=0) for c in data)

    def _iter_rows(self, key):
        if self._block_native():
            yield from super()._iter_rows(key)
            return
        yield from buffer_shuffle(self.children[0]._iter_rows(key), self.buffer_size, self._rng(key))


class RepeatDataset(Dataset, operation="repeat"):
    """Runs the child ``count`` times per epoch (each pass reshuffles)."""

    def __init__(self, child, count=None):
        super().__init__([child])
        if count is None or (_is_int(count) and count == -1):
            count = None
        elif not _is_int(count) or count < 1:
            raise ValueError("repeat: count must be a positive integer, -1 or None (forever), "
                             f"got {count!r}")
        self.count = None if count is None else int(count)

    def get_col_names(self):
        return self.children[0].get_col_names()

    def _size(self):
        one_pass = self.children[0]._size()
        return one_pass if self.count is None else one_pass * self.count

    def _block_native(self):
        return self.children[0]._block_native()

    def _repeat(self, one_pass):
        p = 0
        while self.count is None or p < self.count:
            empty = True
            for item in one_pass(p):
                empty = False
                yield item
            if empty and self.count is None:
                return   # an empty child repeated forever would spin without yielding
            p += 1

    def _iter_blocks(self, key):
        yield from self._repeat(lambda p: self.children[0]._iter_blocks(key + (p,)))

    def _iter_rows(self, key):
        if self._block_native():
            yield from super()._iter_rows(key)
            return
        yield from self._repeat(lambda p: self.children[0]._iter_rows(key + (p,)))


class TakeDataset(Dataset, operation="take"):
    """The first ``count`` rows of each epoch."""

    def __init__(self, child, count=-1):
        super().__init__([child])
        if not _is_int(count) or (count < 1 and count != -1):
            raise ValueError(f"take: count must be a positive integer or -1 (all), got {count!r}")
        self.count = None if count == -1 else int(count)

    def get_col_names(self):
        return self.children[0].get_col_names()

    def _size(self):
        size = self.children[0]._size()
        return size if self.count is None else min(size, self.count)

    def _block_native(self):
        return self.children[0]._block_native()

    def _iter_blocks(self, key):
        left = self.count
        for block in self.children[0]._iter_blocks(key):
            if left is not None and block_length(block) >= left:
                yield tuple(c[:left] for c in block)
                return
            if left is not None:
                left -= block_length(block)
            yield block

    def _iter_rows(self, key):
        if self._block_native():
            yield from super()._iter_rows(key)
            return
        yield from itertools.islice(self.children[0]._iter_rows(key), self.count)
