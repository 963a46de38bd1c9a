"""Criteo text (label, 13 integer fields, 26 categorical fields, tab-separated) to the MindRecord
files upstream's ``src/preprocess_data.py`` writes, for small test data sets.

The id scheme is upstream's: integer field ``i`` has id ``i`` and the value ``v / max`` (an
empty value: weight 0); categorical field ``j`` maps a value seen more than ``threshold``
times to an id of its own (numbered in order of first appearance after the 13 + 26 reserved
ids) and any other value to the field's out-of-vocabulary id ``13 + j``, weight 1. Every
``line_per_sample`` lines make one record. Unlike upstream (which sends a record to the test
part when its last line is among a random 10% of the lines), a seeded shuffle of the records
sends ``ceil(test_size * records)`` of them to the test part, so a small file always has both.

>>> import tempfile, minitorch_dist.dataset as ds
>>> scratch = tempfile.TemporaryDirectory(); out = scratch.name
>>> _ = ds.write_synthetic_criteo(out + "/train.txt", 400, seed=1)
>>> write_criteo_mindrecord(out + "/train.txt", out + "/mindrecord", line_per_sample=100, threshold=5,
...                         train_shards=2, test_shards=1)
{'train_records': 3, 'test_records': 1, 'vocab_size': ...}
>>> scratch.cleanup()
"""
import math
import os

import numpy as np

from minitorch_dist.mindrecord import FileWriter

DENSE_DIM, SLOT_DIM = 13, 26
SCHEMA = {"label": {"type": "float32", "shape": [-1]}, "feat_vals": {"type": "float32", "shape": [-1]},
          "feat_ids": {"type": "int32", "shape": [-1]}}


def _read_lines(path):
    rows = []
    with open(path, encoding="utf-8") as file_in:
        for line in file_in:
            items = line.rstrip("\n").split("\t")
            if len(items) == 1 + DENSE_DIM + SLOT_DIM:    # upstream skips malformed lines too
                rows.append(items)
    return rows


def _vocabulary(rows, threshold):
    """Upstream's ``cat2id``: ids for the categorical values seen more than ``threshold`` times."""
    counts = [dict() for _ in range(SLOT_DIM)]
    for items in rows:
        for j, value in enumerate(items[1 + DENSE_DIM:]):
            counts[j][value] = counts[j].get(value, 0) + 1
    cat2id = {}
    for j in range(SLOT_DIM):
        for value, count in counts[j].items():
            if count > threshold:
                cat2id[(j, value)] = DENSE_DIM + SLOT_DIM + len(cat2id)
    return cat2id


def _convert(rows, cat2id):
    """(ids (N, 39) int32, weights (N, 39) float32, labels (N,) float32)."""
    dense = np.array([[float(v) if v != "" else np.nan for v in items[1:1 + DENSE_DIM]] for items in rows])
    max_v = np.nanmax(np.where(np.isnan(dense), 0.0, dense), axis=0)     # upstream starts its max at 0
    max_v[max_v == 0] = 1.0
    empty = np.isnan(dense)
    dense_w = np.where(empty, 0.0, dense / max_v)
    dense_ids = np.broadcast_to(np.arange(DENSE_DIM), dense.shape)
    cat_ids = np.array([[cat2id.get((j, v), DENSE_DIM + j) for j, v in enumerate(items[1 + DENSE_DIM:])]
                        for items in rows])
    ids = np.concatenate([dense_ids, cat_ids], axis=1).astype(np.int32)
    weights = np.concatenate([dense_w, np.ones(cat_ids.shape)], axis=1).astype(np.float32)
    labels = np.array([float(items[0]) for items in rows], dtype=np.float32)
    return ids, weights, labels


def write_criteo_mindrecord(input_path, output_dir, line_per_sample=1000, threshold=100, test_size=0.1,
                            seed=2020, train_shards=21, test_shards=3):
    """Write ``output_dir/train_input_part.mindrecord*`` and ``test_input_part.mindrecord*``.

    Returns the record counts and ``vocab_size`` (the number of ids in use: a model needs at
    least that many table rows). Lines past the last whole record are dropped, as upstream.
    """
    rows = _read_lines(input_path)
    num_records = len(rows) // line_per_sample
    if num_records < 2:
        raise ValueError(f"write_criteo_mindrecord: {len(rows)} lines make {num_records} records of "
                         f"{line_per_sample}; need at least 2 (one to train on, one to test)")
    cat2id = _vocabulary(rows, threshold)
    ids, weights, labels = _convert(rows[:num_records * line_per_sample], cat2id)
    order = np.random.RandomState(seed).permutation(num_records)
    test = set(order[:max(1, math.ceil(test_size * num_records))].tolist())
    parts = {True: [], False: []}
    for r in range(num_records):
        lines = slice(r * line_per_sample, (r + 1) * line_per_sample)
        parts[r in test].append({"feat_ids": ids[lines].reshape(-1), "feat_vals": weights[lines].reshape(-1),
                                 "label": labels[lines]})
    os.makedirs(output_dir, exist_ok=True)
    for is_test, name, shards, header in ((False, "train_input_part.mindrecord", train_shards, "CRITEO_TRAIN"),
                                          (True, "test_input_part.mindrecord", test_shards, "CRITEO_TEST")):
        writer = FileWriter(os.path.join(output_dir, name), shards, overwrite=True)
        writer.add_schema(SCHEMA, header)
        writer.write_raw_data(parts[is_test])
        writer.commit()
    return {"train_records": len(parts[False]), "test_records": len(parts[True]),
            "vocab_size": DENSE_DIM + SLOT_DIM + len(cat2id)}
