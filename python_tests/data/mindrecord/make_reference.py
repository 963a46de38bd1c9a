"""Writes the reference MindRecord sets in this folder with MindSpore's own FileWriter.

Run with MindSpore installed (not part of the test suite), then gzip each file:
    python make_reference.py OUT && for f in OUT/*; do gzip -9 -n -c $f > $(basename $f).gz; done
The tests build the same rows with ``reference_rows`` below (imported from here).
"""
import os
import sys

import numpy as np

HEADER_SIZE, PAGE_SIZE = 1 << 14, 1 << 15           # MindSpore's smallest sizes: small files
SCALARS = {"id": {"type": "int64"}, "label": {"type": "int32"}, "score": {"type": "float64"},
           "name": {"type": "string"}}
BLOBS = dict(SCALARS, image={"type": "bytes"}, vec={"type": "float32", "shape": [3]},
             ids={"type": "int64", "shape": [-1]}, mat={"type": "int32", "shape": [2, 2]})
ONEBLOB = {"label": {"type": "int32"}, "data": {"type": "bytes"}}
PAGES = {"id": {"type": "int64"}, "f": {"type": "float32"}, "data": {"type": "bytes"},
         "big": {"type": "int64", "shape": [-1]}}
BLOBONLY = {"data": {"type": "bytes"}, "v": {"type": "float64", "shape": [2]}}


def reference_rows(n, blobs=False):
    rows = []
    for i in range(n):
        row = {"id": i, "label": i * 7 - 3, "score": i / 4, "name": f"row-{i}"}
        if blobs:
            row.update(image=bytes([i, i + 1, 255 - i]) * (i + 1), vec=np.arange(i, i + 3, dtype=np.float32),
                       ids=np.arange(i + 1, dtype=np.int64) * 1000 - 7, mat=np.full((2, 2), i, np.int32))
        rows.append(row)
    return rows


def oneblob_rows():
    return [{"label": i, "data": bytes(range(i * 3 + 1))} for i in range(4)]


def pages_rows(start, stop):
    big = np.array([1, -1, 300, -70000, 2**40, -2**40], np.int64)
    return [{"id": i, "f": 0.1 * i, "data": bytes(5000 + i), "big": big} for i in range(start, stop)]


def blobonly_rows():
    return [{"data": b"ab" * (i + 1), "v": np.array([i, -i], np.float64)} for i in range(3)]


def write_all(writer_class, out):
    """The five sets: (file name, shard count, schema, desc, index fields, row batches)."""
    sets = [("scalars.mindrecord", 1, SCALARS, None, [reference_rows(5)]),
            ("blobs.mindrecord", 1, BLOBS, ["id", "name"], [reference_rows(6, True)]),
            ("multi.mindrecord", 3, BLOBS, None, [reference_rows(7, True)]),
            ("oneblob.mindrecord", 1, ONEBLOB, None, [oneblob_rows()]),
            ("pages.mindrecord", 1, PAGES, None, [pages_rows(0, 9), pages_rows(9, 18)]),
            ("blobonly.mindrecord", 1, BLOBONLY, None, [blobonly_rows()])]
    for name, shards, schema, index, batches in sets:
        writer = writer_class(os.path.join(out, name), shards, overwrite=True)
        writer.set_header_size(HEADER_SIZE)
        writer.set_page_size(PAGE_SIZE)
        writer.add_schema(schema, name.split(".")[0])
        if index:
            writer.add_index(index)
        for batch in batches:
            writer.write_raw_data(batch)
        writer.commit()


if __name__ == "__main__":
    from mindspore.mindrecord import FileWriter
    os.makedirs(sys.argv[1], exist_ok=True)
    write_all(FileWriter, sys.argv[1])
