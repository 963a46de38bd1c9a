"""``ds.MindDataset``: rows of MindRecord files (MindSpore's format: written by MindSpore's
``FileWriter`` or by ``mindrecord.FileWriter``; every file is checked as ``shard_file`` says).

Follows MindSpore's reader (``ShardReader`` with its shuffle and distributed samplers):

* ``dataset_files``: one file stands for its whole set of shard files (found beside it); a list
  is read file by file as given.
* ``columns_list`` picks and orders the columns (default: the schema's order).
* ``shuffle``: ``None``/``True``/``Shuffle.GLOBAL`` shuffle all rows each epoch; ``Shuffle.FILES``
  the file order only; ``Shuffle.INFILE`` the rows within each file; ``False`` nothing.
* sharding: after the (identical on every shard) shuffle, shard ``k`` of ``N`` reads the
  ``ceil(n / N)`` consecutive positions from ``k * ceil(n / N)``, wrapping round to the start
  when ``n`` is not divisible, so every shard has the same size. With ``padded_sample`` and
  ``num_padded``, that many copies of the sample are added first and ``n + num_padded`` must
  divide by ``N`` (no wrap-around then).
* ``num_samples`` caps the rows per shard.
"""
import math

import numpy as np

from ..mindrecord.shard_set import open_shard_set
from .config import rng_for
from .engine import Dataset
from .sampling import SOURCE_SALT, check_num_samples, check_shards, check_workers
from .shuffle_level import Shuffle, shuffle_level

FILE_SALT = 1_000_003


class MindDataset(Dataset):
    """Rows of a MindRecord dataset (see the module docstring).

    >>> import numpy as np, os, tempfile, minitorch_dist.dataset as ds
    >>> from minitorch_dist.mindrecord import FileWriter
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "t.mindrecord")
    >>> w = FileWriter(path, shard_num=2)
    >>> _ = w.add_schema({"x": {"type": "int32"}, "v": {"type": "float32", "shape": [2]}})
    >>> w.write_raw_data([{"x": i, "v": np.full(2, i, np.float32)} for i in range(5)]); w.commit()
    >>> data = ds.MindDataset(path + "0", columns_list=["x"], shuffle=False, num_shards=2, shard_id=1)
    >>> [int(x) for (x,) in data.create_tuple_iterator(output_numpy=True)]
    [3, 4, 0]
    >>> scratch.cleanup()
    """

    def __init__(self, dataset_files, columns_list=None, num_parallel_workers=None, shuffle=None,
                 num_shards=None, shard_id=None, sampler=None, padded_sample=None, num_padded=None,
                 num_samples=None, cache=None):
        super().__init__()
        what = "MindDataset"
        if sampler is not None:
            raise ValueError(f"{what}: sampler is not supported; use shuffle, num_shards/shard_id "
                             "and num_samples")
        if cache is not None:
            raise ValueError(f"{what}: cache (a MindSpore cache server) is not supported; pass cache=None")
        check_workers(num_parallel_workers, what)
        self.shuffle_level = shuffle_level(shuffle, Shuffle.GLOBAL, tuple(Shuffle), what)
        self.shards = check_shards(num_shards, shard_id)
        self.num_samples = check_num_samples(num_samples)
        if self.num_samples is not None and self.shuffle_level in (Shuffle.FILES, Shuffle.INFILE):
            raise ValueError(f"{what}: num_samples cannot be combined with shuffle={self.shuffle_level}")
        self._files = open_shard_set(dataset_files, what)
        fields = list(self._files[0].schema)
        if columns_list is None:
            self.columns = fields
        else:
            if isinstance(columns_list, str) or not isinstance(columns_list, (list, tuple)) \
                    or not columns_list or len(set(columns_list)) != len(columns_list):
                raise ValueError(f"{what}: columns_list must be a non-empty list of distinct names, "
                                 f"got {columns_list!r}")
            unknown = [c for c in columns_list if c not in fields]
            if unknown:
                raise ValueError(f"{what}: columns_list names {unknown}, which the files "
                                 f"({self._files[0].path!r}, ...) lack; they have {fields}")
            self.columns = list(columns_list)
        self._padded = self._check_padding(padded_sample, num_padded, columns_list, what)
        self._rows = [len(f) for f in self._files]
        if sum(self._rows) + self._num_padded == 0:
            raise ValueError(f"{what}: the files {[f.path for f in self._files]} hold no rows")

    def _check_padding(self, padded_sample, num_padded, columns_list, what):
        self._num_padded = 0
        if padded_sample is None and num_padded in (None, 0):
            return None
        if padded_sample is None or num_padded is None:
            raise ValueError(f"{what}: padded_sample and num_padded must be given together")
        if isinstance(num_padded, bool) or not isinstance(num_padded, (int, np.integer)) or num_padded < 0:
            raise ValueError(f"{what}: num_padded must be a non-negative int, got {num_padded!r}")
        if self.shards is None:
            raise ValueError(f"{what}: padded_sample pads the shards; it needs num_shards and shard_id")
        if columns_list is None:
            raise ValueError(f"{what}: padded_sample needs columns_list (its keys must be those columns)")
        if not isinstance(padded_sample, dict) or sorted(padded_sample) != sorted(self.columns):
            raise ValueError(f"{what}: padded_sample must be a dict with exactly the keys "
                             f"{self.columns}, got {padded_sample!r}")
        total = sum(len(f) for f in self._files) + int(num_padded)
        if total % self.shards[0]:
            raise ValueError(f"{what}: {total - int(num_padded)} rows plus num_padded={num_padded} "
                             f"is not divisible by num_shards={self.shards[0]}")
        self._num_padded = int(num_padded)
        return tuple(np.asarray(padded_sample[c]) for c in self.columns)

    def get_col_names(self):
        return list(self.columns)

    # ---- which rows one epoch reads -------------------------------------------------------------
    def _order(self, key):
        """(file, row) pairs of the whole dataset this epoch, before sharding; file -1 = padding."""
        files = np.arange(len(self._files))
        if self.shuffle_level is Shuffle.FILES:
            files = rng_for(FILE_SALT, key).permutation(len(files))
        pairs = []
        for f in files:
            rows = np.arange(self._rows[f])
            if self.shuffle_level is Shuffle.INFILE:
                rows = rng_for(FILE_SALT + 1 + int(f), key).permutation(rows)
            pairs.extend((int(f), int(r)) for r in rows)
        pairs.extend((-1, 0) for _ in range(self._num_padded))
        if self.shuffle_level is Shuffle.GLOBAL:
            pairs = [pairs[i] for i in rng_for(SOURCE_SALT, key).permutation(len(pairs))]
        return pairs

    def _shard(self, pairs):
        if self.shards is not None:
            num_shards, shard_id = self.shards
            taking = math.ceil(len(pairs) / num_shards)
            pairs = [pairs[i % len(pairs)] for i in range(shard_id * taking, (shard_id + 1) * taking)]
        return pairs if self.num_samples is None else pairs[:self.num_samples]

    def _size(self):
        n = sum(self._rows) + self._num_padded
        size = n if self.shards is None else math.ceil(n / self.shards[0])
        return size if self.num_samples is None else min(size, self.num_samples)

    def _iter_rows(self, key):
        for f, r in self._shard(self._order(key)):
            if f < 0:
                yield tuple(v.copy() for v in self._padded)
            else:
                yield self._files[f].row(r, self.columns)
