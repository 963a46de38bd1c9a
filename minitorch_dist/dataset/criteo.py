"""``CriteoDataset``: Criteo's tab-separated click logs as Wide&Deep's ``feat_ids``/``feat_vals``/``label``.

Each line of a Criteo file (the Kaggle Display Advertising Challenge ``train.txt``) holds 40
tab-separated fields: the label (0 or 1), 13 integer fields ``I1..I13`` and 26 categorical
fields ``C1..C26`` (hashed, normally 8 hex digits). Any integer or categorical field may be
empty.

Every row becomes 39 (id, value) pairs in one shared id space, the layout of MindSpore's
Wide&Deep preprocessing, so a single embedding table serves all fields:

* integer field ``i`` (0..12) always has id ``i``; its value is ``log(x + 1)`` for the integer
  ``x`` (negative values are clipped to 0 first; an empty field gives 0);
* categorical field ``j`` (0..25) has value 1.0 and an id from the vocabulary: every string
  seen at least ``threshold`` times in field ``j`` of the vocabulary's files has its own id;
  any other string (rare, or never seen) maps to the field's out-of-vocabulary id ``13 + j``.
  An empty categorical field is a string like any other (it is frequent in real data).
  Frequent strings get ids from 39 on, field by field, in sorted order within a field.

``vocab_size`` is ``39 + number of frequent strings``: the row count of the embedding table.
"""
import gzip
import os

import numpy as np

from .array_source import ArraySourceDataset
from .sampling import check_workers

NUM_INT_FIELDS = 13
NUM_CAT_FIELDS = 26
FIELD_SIZE = NUM_INT_FIELDS + NUM_CAT_FIELDS          # 39 (id, value) pairs per row
FIRST_VOCAB_ID = FIELD_SIZE                           # ids 0..12 numeric, 13..38 OOV


class CriteoVocab:
    """Frequent categorical strings per field and their ids in the shared id space.

    Build it with :meth:`CriteoVocab.build` (or take ``CriteoDataset(...).vocab``) and pass it
    to another ``CriteoDataset`` through ``vocab=`` so a test split uses the training ids.

    >>> import numpy as np
    >>> cats = np.full((3, 26), b"", dtype="S8")       # fields 2..25 empty in every row
    >>> cats[:, 0], cats[:, 1] = [b"a", b"a", b"b"], [b"x", b"y", b"x"]
    >>> vocab = CriteoVocab.build(cats, threshold=2)
    >>> vocab.vocab_size                # 39 fixed ids + "a" + "x" + the empty string of fields 2..25
    65
    >>> vocab.lookup(cats)[:, :2].tolist()             # "b" and "y" are rare: OOV ids 13 and 14
    [[39, 40], [39, 14], [13, 40]]
    """

    def __init__(self, keys, ids, threshold):
        if len(keys) != NUM_CAT_FIELDS or len(ids) != NUM_CAT_FIELDS:
            raise ValueError(f"CriteoVocab: needs {NUM_CAT_FIELDS} fields of keys and ids")
        self.keys = [np.asarray(k) for k in keys]      # sorted byte strings per field
        self.ids = [np.asarray(i, dtype=np.int64) for i in ids]
        self.threshold = int(threshold)
        self.vocab_size = FIRST_VOCAB_ID + sum(len(k) for k in self.keys)

    @classmethod
    def build(cls, categories, threshold=100):
        """The vocabulary of ``categories`` ((N, 26) byte strings): strings seen >= threshold times."""
        if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)) or threshold < 1:
            raise ValueError(f"CriteoDataset: threshold must be a positive integer, got {threshold!r}")
        keys, ids = [], []
        next_id = FIRST_VOCAB_ID
        for j in range(NUM_CAT_FIELDS):
            values, counts = np.unique(categories[:, j], return_counts=True)
            kept = values[counts >= threshold]
            keys.append(kept)
            ids.append(np.arange(next_id, next_id + len(kept)))
            next_id += len(kept)
        return cls(keys, ids, threshold)

    def lookup(self, categories):
        """(N, 26) int32 ids for (N, 26) byte strings; unknown strings get their field's OOV id."""
        out = np.empty(categories.shape, dtype=np.int32)
        for j in range(NUM_CAT_FIELDS):
            column = categories[:, j]
            keys = self.keys[j]
            if len(keys) == 0:
                out[:, j] = NUM_INT_FIELDS + j
                continue
            pos = np.minimum(np.searchsorted(keys, column), len(keys) - 1)
            found = keys[pos] == column
            out[:, j] = np.where(found, self.ids[j][pos], NUM_INT_FIELDS + j)
        return out

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return f"CriteoVocab(vocab_size={self.vocab_size}, threshold={self.threshold})"


def criteo_files(dataset_files_or_dir):
    """The file list: one path, a list of paths, or a folder (its ``*.txt``/``*.txt.gz`` files, sorted)."""
    if isinstance(dataset_files_or_dir, (str, os.PathLike)):
        path = os.fspath(dataset_files_or_dir)
        if os.path.isdir(path):
            files = sorted(os.path.join(path, n) for n in os.listdir(path)
                           if n.endswith(".txt") or n.endswith(".txt.gz"))
            if not files:
                raise ValueError(f"CriteoDataset: no .txt (or .txt.gz) files in directory {path}")
            return files
        files = [path]
    else:
        files = [os.fspath(p) for p in dataset_files_or_dir]
        if not files:
            raise ValueError("CriteoDataset: dataset_files_or_dir is an empty list")
    for path in files:
        if not os.path.isfile(path):
            raise ValueError(f"CriteoDataset: {path!r} is not a file or a directory")
    return files


def read_criteo_text(path):
    """Parse one Criteo text file (plain or ``.gz``).

    Returns ``(labels (N,) float32, ints (N, 13) float64 with NaN for empty, cats (N, 26) bytes)``.
    """
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rows = [line.rstrip(b"\r").split(b"\t") for line in lines]
    for number, row in enumerate(rows):
        if len(row) != 1 + FIELD_SIZE:
            raise ValueError(f"{path}: line {number + 1} has {len(row)} tab-separated fields; a Criteo "
                             f"line has {1 + FIELD_SIZE} (label, 13 integers, 26 categories)")
    if not rows:
        raise ValueError(f"{path}: the file holds no lines")
    columns = list(zip(*rows))
    try:
        labels = np.array(columns[0], dtype=np.float32)
    except ValueError as err:
        raise ValueError(f"{path}: a label is not a number ({err})") from None
    if not np.all((labels == 0) | (labels == 1)):
        bad = int(np.argmax((labels != 0) & (labels != 1)))
        raise ValueError(f"{path}: line {bad + 1} has label {labels[bad]}; labels are 0 or 1")
    ints = np.array(columns[1:1 + NUM_INT_FIELDS]).T           # (N, 13) bytes
    empty = ints == b""
    ints = np.where(empty, b"0", ints)
    try:
        values = ints.astype(np.float64)
    except ValueError as err:
        raise ValueError(f"{path}: an integer field is not a number ({err})") from None
    values[empty] = np.nan
    cats = np.array(columns[1 + NUM_INT_FIELDS:]).T            # (N, 26) bytes
    return labels, values, cats


def dense_values(ints):
    """``log(x + 1)`` of the integer fields (negatives clipped to 0, empty (NaN) -> 0), float32."""
    clipped = np.where(np.isnan(ints), 0.0, np.maximum(ints, 0.0))
    return np.log1p(clipped).astype(np.float32)


class CriteoDataset(ArraySourceDataset):
    """Criteo text files as columns ``feat_ids`` (int32, (39,)), ``feat_vals`` (float32, (39,))
    and ``label`` (float32, (1,)), the layout of MindSpore's Wide&Deep data.

    ``dataset_files_or_dir``: one file, a list of files (read in order) or a folder (its
    ``*.txt``/``*.txt.gz`` files in sorted order). ``threshold``: a categorical string needs
    this many occurrences to get its own id (MindSpore's preprocessing uses 100); rarer ones
    share their field's OOV id. ``vocab``: a :class:`CriteoVocab` (or a ``CriteoDataset``,
    whose vocabulary is taken) built on the training split, so the ids of this dataset match
    it; without it the vocabulary is built from these files. The vocabulary always comes from
    all rows, before sharding, so every rank gets the same ids. ``shuffle`` (default True),
    ``num_shards``/``shard_id`` and ``num_samples`` work as in :class:`MnistDataset`.

    ``dataset.vocab_size`` is the number of rows the embedding table needs.

    >>> import os, tempfile
    >>> line = "1\\t" + "\\t".join(["3"] * 13) + "\\t" + "\\t".join(["68fd1e64"] * 26) + "\\n"
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "train.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write(line * 2)
    >>> data = CriteoDataset(path, threshold=2, shuffle=False)
    >>> data.get_col_names(), data.vocab_size, len(data)
    (['feat_ids', 'feat_vals', 'label'], 65, 2)
    >>> ids, vals, label = next(iter(data.create_tuple_iterator(output_numpy=True)))
    >>> ids[:14].tolist(), round(float(vals[0]), 4), label.tolist()
    ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 39], 1.3863, [1.0])
    >>> scratch.cleanup()
    """

    def __init__(self, dataset_files_or_dir, threshold=100, vocab=None, num_samples=None,
                 shuffle=None, num_shards=None, shard_id=None, num_parallel_workers=None):
        check_workers(num_parallel_workers, "CriteoDataset")
        files = criteo_files(dataset_files_or_dir)
        parts = [read_criteo_text(path) for path in files]
        labels = np.concatenate([p[0] for p in parts])
        ints = np.concatenate([p[1] for p in parts])
        cats = np.concatenate([p[2] for p in parts])
        if isinstance(vocab, CriteoDataset):
            vocab = vocab.vocab
        if vocab is None:
            vocab = CriteoVocab.build(cats, threshold)
        elif not isinstance(vocab, CriteoVocab):
            raise TypeError(f"CriteoDataset: vocab must be a CriteoVocab or a CriteoDataset, "
                            f"got {type(vocab).__name__}")
        feat_ids = np.empty((len(labels), FIELD_SIZE), dtype=np.int32)
        feat_ids[:, :NUM_INT_FIELDS] = np.arange(NUM_INT_FIELDS, dtype=np.int32)
        feat_ids[:, NUM_INT_FIELDS:] = vocab.lookup(cats)
        feat_vals = np.ones((len(labels), FIELD_SIZE), dtype=np.float32)
        feat_vals[:, :NUM_INT_FIELDS] = dense_values(ints)
        self.files = files
        self.vocab = vocab
        self.threshold = vocab.threshold
        self.vocab_size = vocab.vocab_size
        self.field_size = FIELD_SIZE
        self.num_rows = len(labels)
        super().__init__({"feat_ids": feat_ids, "feat_vals": feat_vals, "label": labels[:, None]},
                         shuffle=shuffle, num_shards=num_shards, shard_id=shard_id,
                         num_samples=num_samples)

    def __len__(self):
        return self.get_dataset_size()
