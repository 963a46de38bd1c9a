"""``ds.TFRecordDataset``: rows from TFRecord files of ``tf.train.Example`` records.

Follows MindSpore's reader (``TFReaderOp``):

* ``dataset_files``: a path, a glob pattern, or a list of them; the files are sorted.
* ``schema`` (a ``ds.Schema`` or a schema JSON path) names the columns, their types and shapes.
  Without one, the first record of the first file gives the columns (sorted by name):
  bytes lists as uint8, float lists as float32, int64 lists as int64. An int64 list may be read
  as any integer type, a float list only as float32, a bytes list as uint8/int8 (the bytes) or
  string. A column without a shape is 1-D; with one, the values are reshaped (one -1 allowed).
* ``shuffle``: ``Shuffle.GLOBAL`` (the default; also ``True``) shuffles the file order and then
  all rows of the shard; ``Shuffle.FILES`` the file order only; ``False`` nothing. MindSpore's
  global level shuffles rows through a buffer; here the whole shard is shuffled.
* sharding, ``shard_equal_rows=False``: shard ``k`` reads whole files, those at positions
  ``k, k + N, ...`` of the (shuffled) file order, so shards can differ in size;
  ``shard_equal_rows=True``: each shard reads ``ceil(rows / N)`` rows, shard ``k`` those at
  positions ``k * size ...`` of all files' rows in file order, wrapping round to the start.
* ``num_samples`` caps the rows per shard (else ``schema.num_rows`` when it has one).

Unlike MindSpore, both CRCs of every record are checked: a damaged file is a ``ValueError``
naming the file and the record.
"""
import glob
import math
import os

import numpy as np

from .config import rng_for
from .engine import Dataset
from .sampling import check_num_samples, check_shards, check_workers
from .checked_cast import checked_cast
from .schema import Schema, as_schema, fit_shape, numpy_dtype
from .shuffle_level import Shuffle, shuffle_level
from .tfrecord_io import open_file, parse_example, read_records, record_at, record_offsets

FILE_SALT = 1_000_003    # the file-order shuffle (pipeline shuffle() steps use small salts)
ROW_SALT = 1_000_033     # the row shuffle of Shuffle.GLOBAL
_INT_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def find_files(dataset_files, what):
    """Sorted list of files from a path, a glob pattern or a list of them."""
    patterns = [dataset_files] if isinstance(dataset_files, (str, os.PathLike)) else dataset_files
    if not isinstance(patterns, (list, tuple)) or not patterns:
        raise TypeError(f"{what}: dataset_files must be a path, a glob pattern or a non-empty list "
                        f"of them, got {dataset_files!r}")
    files = []
    for pattern in patterns:
        if not isinstance(pattern, (str, os.PathLike)):
            raise TypeError(f"{what}: every entry of dataset_files must be a path, got {pattern!r}")
        pattern = os.fspath(pattern)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        missing = [m for m in matches if not os.path.isfile(m)]
        if not matches or missing:
            raise ValueError(f"{what}: dataset file {(missing or [pattern])[0]!r} does not exist")
        files.extend(matches)
    return sorted(set(files))


def _bool(value, name, what):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be True or False, got {value!r}")
    return bool(value)


def _column_from(values, column, path):
    """The array of one schema column from its parsed feature values."""
    name, kind, shape = column["name"], column["type"], column["shape"]
    where = f"TFRecord file {path!r}"
    if isinstance(values, list):                       # bytes_list
        if kind == "string":
            try:
                strings = np.array([v.decode("utf-8") for v in values])
            except UnicodeDecodeError:     # never a silently replaced character
                raise ValueError(f"{where}: column {name!r} (string) holds bytes that are not UTF-8 "
                                 "text; read it as uint8") from None
            if shape is None and len(strings) == 1:
                return strings[0]                  # one string: a scalar, as MindSpore
            return fit_shape(strings, shape, name, where)
        if kind not in ("uint8", "int8"):
            raise ValueError(f"{where}: column {name!r} holds bytes, which read as uint8, int8 or "
                             f"string, not {kind}")
        raw = np.frombuffer(b"".join(values), dtype=kind)
        return fit_shape(raw.copy(), shape, name, where)
    if values.dtype == np.float32:
        if kind != "float32":
            raise ValueError(f"{where}: column {name!r} holds a float list, which reads as float32 "
                             f"only, not {kind}")
        return fit_shape(values, shape, name, where)
    if kind not in _INT_TYPES:
        raise ValueError(f"{where}: column {name!r} holds an int64 list, which reads as an integer "
                         f"type ({', '.join(_INT_TYPES)}), not {kind}")
    return fit_shape(checked_cast(values, kind, name, where), shape, name, where)


def schema_from_file(path, columns_list, what):
    """The schema MindSpore infers from the first record of ``path``."""
    first = next(read_records(path), None)
    if first is None:
        raise ValueError(f"{what}: TFRecord file {path!r} is empty; pass a schema")
    features = parse_example(first, f"TFRecord file {path!r}")
    names = sorted(features) if not columns_list else list(columns_list)
    schema = Schema()
    for name in names:
        if name not in features:
            raise ValueError(f"{what}: column {name!r} is not in TFRecord file {path!r}; it has "
                             f"{sorted(features)}")
        value = features[name]
        schema.add_column(name, "uint8" if isinstance(value, list) else value.dtype.name)
    return schema


class TFRecordDataset(Dataset):
    """Rows of ``tf.train.Example`` records from TFRecord files (see the module docstring).

    >>> import numpy as np, os, tempfile, minitorch_dist.dataset as ds
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "train.tfrecord")
    >>> ds.write_tfrecord(path, [{"ids": np.arange(3) + i, "label": [float(i)]} for i in range(4)])
    >>> schema = ds.Schema(); schema.add_column("ids", de_type="int32"); schema.add_column("label", "float32")
    >>> data = ds.TFRecordDataset(path, schema=schema, shuffle=False, num_shards=2, shard_id=1,
    ...                           shard_equal_rows=True)
    >>> [(ids.tolist(), label.tolist()) for ids, label in data.create_tuple_iterator(output_numpy=True)]
    [([2, 3, 4], [2.0]), ([3, 4, 5], [3.0])]
    >>> scratch.cleanup()
    """

    def __init__(self, dataset_files, schema=None, columns_list=None, num_samples=None,
                 num_parallel_workers=None, shuffle=Shuffle.GLOBAL, num_shards=None, shard_id=None,
                 shard_equal_rows=False, cache=None, compression_type=None):
        super().__init__()
        what = "TFRecordDataset"
        if cache is not None:
            raise ValueError(f"{what}: cache (a MindSpore cache server) is not supported; pass cache=None")
        if compression_type not in (None, ""):
            raise ValueError(f"{what}: compression_type={compression_type!r} is not supported; "
                             "only uncompressed TFRecord files are read")
        check_workers(num_parallel_workers, what)
        self.files = find_files(dataset_files, what)
        self.shuffle_level = shuffle_level(shuffle, Shuffle.GLOBAL, (Shuffle.GLOBAL, Shuffle.FILES), what)
        self.shards = check_shards(num_shards, shard_id)
        self.shard_equal_rows = _bool(shard_equal_rows, "shard_equal_rows", what)
        if columns_list is not None:
            if isinstance(columns_list, str) or not all(isinstance(c, str) for c in columns_list) \
                    or not columns_list or len(set(columns_list)) != len(columns_list):
                raise ValueError(f"{what}: columns_list must be a non-empty list of distinct column "
                                 f"names, got {columns_list!r}")
            columns_list = list(columns_list)
        schema = as_schema(schema, what)
        if schema is None:
            schema = schema_from_file(self.files[0], columns_list, what)
        elif columns_list:
            unknown = [c for c in columns_list if c not in schema.names()]
            if unknown:
                raise ValueError(f"{what}: columns_list names {unknown}, which the schema lacks; "
                                 f"it has {schema.names()}")
        self.columns = ([c for name in columns_list for c in schema.columns if c["name"] == name]
                        if columns_list else list(schema.columns))
        self.num_samples = check_num_samples(num_samples)
        if self.num_samples is None:
            self.num_samples = Schema.get_num_rows(schema)
        self.offsets = [record_offsets(f) for f in self.files]   # byte offset of every record
        self.file_rows = [len(o) for o in self.offsets]
        self._check_shards_have_data(what)

    def _check_shards_have_data(self, what):
        if self.shards is None or self.shard_equal_rows:
            if sum(self.file_rows) == 0:
                raise ValueError(f"{what}: the files {self.files} hold no records")
            return
        num_shards, shard_id = self.shards
        if len(self.files) < num_shards:
            raise ValueError(f"{what}: {len(self.files)} file(s) for {num_shards} shards: without "
                             "shard_equal_rows each shard reads whole files, so some shards would "
                             "read nothing; pass shard_equal_rows=True")

    def get_col_names(self):
        return [c["name"] for c in self.columns]

    # ---- which rows one epoch reads -------------------------------------------------------------
    def _file_order(self, key):
        n = len(self.files)
        if self.shuffle_level is None:
            return np.arange(n)
        return rng_for(FILE_SALT, key).permutation(n)

    def _plan(self, key):
        """[(file index, first row, end row)] this shard reads this epoch, in order."""
        order = self._file_order(key)
        if self.shards is None:
            return [(int(f), 0, self.file_rows[f]) for f in order]
        num_shards, shard_id = self.shards
        if not self.shard_equal_rows:
            return [(int(f), 0, self.file_rows[f]) for i, f in enumerate(order) if i % num_shards == shard_id]
        total = sum(self.file_rows)
        per_shard = math.ceil(total / num_shards)
        start, end = shard_id * per_shard, (shard_id + 1) * per_shard
        plan, offset = [], 0
        while offset < end:                              # past the last file: wrap to the first
            for f in order:
                rows = self.file_rows[f]
                lo, hi = max(start, offset), min(end, offset + rows)
                if lo < hi:
                    plan.append((int(f), lo - offset, hi - offset))
                offset += rows
        return plan

    def _size(self):
        rows = sum(hi - lo for _, lo, hi in self._plan((0,)))
        return rows if self.num_samples is None else min(rows, self.num_samples)

    def _records(self, key):
        """(file index, record index) of every row this shard reads this epoch, in order."""
        pairs = [(f, i) for f, lo, hi in self._plan(key) for i in range(lo, hi)]
        if self.shuffle_level is Shuffle.GLOBAL:
            pairs = [pairs[i] for i in rng_for(ROW_SALT, key).permutation(len(pairs))]
        return pairs[:self.num_samples] if self.num_samples is not None else pairs

    def _iter_rows(self, key):
        opened = {}
        for f, i in self._records(key):
            if f not in opened:
                opened[f] = open_file(self.files[f])
            path = self.files[f]
            yield self._row(record_at(opened[f], int(self.offsets[f][i]), path, i), path)

    def _row(self, payload, path):
        features = parse_example(payload, f"TFRecord file {path!r}")
        row = []
        for column in self.columns:
            if column["name"] not in features:
                raise ValueError(f"TFRecord file {path!r}: a record lacks column {column['name']!r}; "
                                 f"it has {sorted(features)}")
            row.append(_column_from(features[column["name"]], column, path))
        return tuple(row)

    def output_types(self):
        return [numpy_dtype(c["type"]) for c in self.columns]
