"""``GeneratorDataset``: rows from Python code (a generator function, an iterable, or a
random-access object with ``__getitem__`` and ``__len__``)."""
import itertools
import warnings

import numpy as np

from .checked_cast import checked_cast
from .engine import Dataset
from .sampling import (check_num_samples, check_shards, check_shuffle, check_workers, epoch_size,
                       sample_order, shard_stream)
from .schema import as_schema, numpy_dtype

_warned_shuffle = []     # one warning per process is enough


def _warn_stream_shuffle(source):
    if not _warned_shuffle:
        _warned_shuffle.append(True)
        warnings.warn(f"GeneratorDataset: shuffle=True needs a random-access source (__getitem__ "
                      f"and __len__); {type(source).__name__} is a stream and is read in order, as "
                      "in MindSpore. Add .shuffle(buffer_size) to shuffle it.", stacklevel=3)


def _is_random_access(source):
    return hasattr(source, "__getitem__") and hasattr(source, "__len__")


class GeneratorDataset(Dataset):
    """Rows produced by ``source``, one tuple of arrays (one per column) per row.

    ``source`` may be:

    * random-access (``source[i]`` and ``len(source)``; lists and dicts too): shuffled
      (``shuffle``, default True) and sharded by index like the array sources (MindSpore's
      distributed sampler);
    * a callable returning an iterable (e.g. a generator function), called once per epoch;
    * an iterable (``iter()`` is called on each epoch; a one-shot iterator is read once and its
      rows kept in memory for later epochs).

    As in MindSpore, streams are read in order: ``shuffle=True`` on one warns once that it
    needs random access. MindSpore refuses ``num_shards`` on a stream; here a stream is sharded
    round-robin with the same padding rule as the array sources. ``column_names`` (a name or
    a list) may be left out when ``schema`` (a ``ds.Schema`` or a schema JSON path) names the
    columns; ``column_types`` or the schema's types cast each column. A row that is not a
    tuple is one value for a one-column dataset. ``num_parallel_workers`` (a positive int),
    ``python_multiprocessing`` and ``max_rowsize`` are checked; rows are produced in the
    calling thread, in the order MindSpore's workers deliver them.

    >>> import numpy as np, minitorch_dist.dataset as ds
    >>> def pairs():
    ...     for i in range(3):
    ...         yield np.array(i), np.array(i * i)
    >>> data = ds.GeneratorDataset(pairs, ["x", "y"])
    >>> [int(y) for x, y in data.create_tuple_iterator(output_numpy=True)]
    [0, 1, 4]
    """

    def __init__(self, source, column_names=None, column_types=None, schema=None, num_samples=None,
                 num_parallel_workers=1, shuffle=None, sampler=None, num_shards=None, shard_id=None,
                 python_multiprocessing=True, max_rowsize=None):
        super().__init__()
        if sampler is not None:
            raise ValueError("GeneratorDataset: sampler is not supported; use shuffle, "
                             "num_shards/shard_id and num_samples")
        check_workers(num_parallel_workers, "GeneratorDataset")
        if not isinstance(python_multiprocessing, (bool, np.bool_)):
            raise TypeError("GeneratorDataset: python_multiprocessing must be True or False, got "
                            f"{python_multiprocessing!r}")
        if max_rowsize is not None and (isinstance(max_rowsize, bool) or not isinstance(
                max_rowsize, (int, np.integer, list, tuple))):
            raise TypeError(f"GeneratorDataset: max_rowsize must be an int (MB) or None, got {max_rowsize!r}")
        schema = as_schema(schema, "GeneratorDataset")
        if schema is not None:       # MindSpore: the schema wins over column_names/column_types
            column_names = schema.names()
            column_types = [numpy_dtype(c["type"]) for c in schema.columns]
        names = [column_names] if isinstance(column_names, str) else list(column_names or [])
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ValueError(f"GeneratorDataset: column_names must be a non-empty list of distinct "
                             f"names (or pass a schema), got {column_names!r}")
        self.column_names = names
        self.column_types = None if column_types is None else [np.dtype(t) for t in column_types]
        if self.column_types is not None and len(self.column_types) != len(names):
            raise ValueError(f"GeneratorDataset: {len(self.column_types)} column_types for "
                             f"{len(names)} columns {names}")
        self.source = source
        self.random_access = _is_random_access(source)
        if not self.random_access and not callable(source) and not hasattr(source, "__iter__"):
            raise TypeError("GeneratorDataset: source must be callable (returning an iterable), "
                            "iterable, or random-access (__getitem__ and __len__), got "
                            f"{type(source).__name__}")
        self.shuffle_samples = check_shuffle(shuffle) and self.random_access
        if shuffle and not self.random_access:
            _warn_stream_shuffle(source)
        self.shards = check_shards(num_shards, shard_id)
        self.num_samples = check_num_samples(num_samples)
        self._one_shot = (not self.random_access and not callable(source)
                          and iter(source) is source)
        self._cached_rows = []         # rows of a one-shot iterator read so far
        self._live = source if self._one_shot else None
        # rows per pass of a stream: its len() when it has one (as MindSpore), else counted once
        self._stream_length = len(source) if hasattr(source, "__len__") and not self.random_access \
            else None

    def get_col_names(self):
        return list(self.column_names)

    def _size(self):
        if self.random_access:
            return epoch_size(len(self.source), self.shards, self.num_samples)
        if self._stream_length is None:
            self._stream_length = sum(1 for _ in self._source_rows())
        return epoch_size(self._stream_length, self.shards, self.num_samples)

    def _row(self, item):
        values = item if isinstance(item, tuple) else (item,)
        if len(values) != len(self.column_names):
            raise ValueError(f"GeneratorDataset: the source produced a row of {len(values)} value(s) "
                             f"but column_names has {len(self.column_names)}: {self.column_names}")
        row = tuple(np.asarray(v) for v in values)
        if self.column_types is not None:
            row = tuple(checked_cast(v, t, name, "GeneratorDataset")
                        for v, t, name in zip(row, self.column_types, self.column_names))
        return row

    def _source_rows(self):
        """One pass over a streaming source, as rows."""
        if not self._one_shot:
            stream = self.source() if callable(self.source) else self.source
            for item in stream:
                yield self._row(item)
            return
        # a one-shot iterator: replay what was read, then keep reading (a pass cut short by
        # take or num_samples leaves the rest for later passes, nothing is lost)
        yield from self._cached_rows
        while self._live is not None:
            try:
                item = next(self._live)
            except StopIteration:
                self._live = None
                return
            row = self._row(item)
            self._cached_rows.append(row)
            yield row

    def _iter_rows(self, key):
        if self.random_access:
            order = sample_order(len(self.source), self.shuffle_samples, self.shards,
                                 self.num_samples, key)
            for index in order:
                yield self._row(self.source[int(index)])
            return
        rows = self._source_rows()
        if self.shards is not None:
            rows = shard_stream(rows, self.shards)
        yield from itertools.islice(rows, self.num_samples)
