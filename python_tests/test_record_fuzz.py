"""Fuzzing both record formats with a fixed seed: flipped bytes, truncations, appended garbage.

Every outcome must be the identical records or a ``ValueError``/``OSError`` that names the
damaged file. The listed exceptions, each checked to be exactly that case:

* MindRecord has no checksum: a flipped byte inside a row's blob payload (bytes fields and
  arrays, which the index does not hold) can change the records with no error, and so can one
  in a scalar field that ``add_index`` left out of the index (MindSpore's ``blobs`` set
  indexes ``id`` and ``name`` only, so its ``label`` and ``score`` are unchecked);
* a TFRecord file cut exactly at a record boundary is a valid, shorter file (the format has
  no record count); ``write_tfrecord`` writes atomically so that its own files never end so.

``python python_tests/test_record_fuzz.py`` prints, per format, how many corruptions were
caught, how many left the records identical, and how many changed them silently.
"""
import gzip
import os
import shutil
import sys

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.dataset.tfrecord_io import write_tfrecord
from minitorch_dist.mindrecord import FileWriter
from minitorch_dist.mindrecord.shard_file import ShardFile

SEED = 20261129
FLIPS, CUTS, APPENDS = 150, 25, 15
SCHEMA = {"id": {"type": "int64"}, "label": {"type": "int32"}, "score": {"type": "float32"},
          "name": {"type": "string"}, "image": {"type": "bytes"}, "ids": {"type": "int64", "shape": [-1]},
          "vec": {"type": "float32", "shape": [3]}}


def mindrecord_rows():
    return [{"id": i, "label": i * 3 - 4, "score": float(i) / 8, "name": f"sample-{i}",
             "image": bytes([i, 7, 200 - i]) * (i + 2), "ids": np.arange(i + 1, dtype=np.int64) * 300 - 5,
             "vec": np.arange(3, dtype=np.float32) + i} for i in range(6)]


def write_mindrecord(folder):
    path = os.path.join(folder, "fuzz.mindrecord")
    writer = FileWriter(path)
    writer.set_header_size(1 << 14)
    writer.set_page_size(1 << 15)
    writer.add_schema(SCHEMA, "fuzz")
    writer.write_raw_data(mindrecord_rows())
    writer.commit()
    return path


def unpack_mindspore_set(folder):
    """MindSpore's own blobs.mindrecord (data/mindrecord, written by MindSpore 2.10)."""
    reference = os.path.join(os.path.dirname(__file__), "data", "mindrecord")
    for name in ("blobs.mindrecord", "blobs.mindrecord.db"):
        with gzip.open(os.path.join(reference, name + ".gz")) as src, \
                open(os.path.join(folder, name), "wb") as dst:
            shutil.copyfileobj(src, dst)
    return os.path.join(folder, "blobs.mindrecord")


def write_records(folder):
    path = os.path.join(folder, "fuzz.tfrecord")
    write_tfrecord(path, [{"id": np.array([i], np.int64), "vals": np.arange(3, dtype=np.float32) * i,
                           "name": [f"sample-{i}".encode()]} for i in range(6)])
    return path


def read_mindrecord(path):
    data = ds.MindDataset(path, shuffle=False)
    return [[np.asarray(v).tolist() for v in row] for row in data.create_tuple_iterator(output_numpy=True)]


def read_tfrecord(path):
    data = ds.TFRecordDataset(path, shuffle=False)
    return [[np.asarray(v).tolist() for v in row] for row in data.create_tuple_iterator(output_numpy=True)]


def live_positions(path, size):
    """Byte positions worth flipping: the header JSON and the used part of every page (the
    zero padding between pages is never read)."""
    if not path.endswith(".mindrecord"):
        return list(range(size))
    header = ShardFile(path).header
    with open(path, "rb") as f:
        positions = list(range(8 + int.from_bytes(f.read(8), "little")))
    for page in header["page"]:
        start = header["header_size"] + page["page_id"] * header["page_size"]
        positions += range(start, start + page["page_size"])
    return positions


def unchecked_bytes(path):
    """Positions MindRecord cannot check: blob payloads, and the raw rows too when some
    scalar field is not an index field (``add_index`` narrowed the index)."""
    shard = ShardFile(path)
    header, spans = shard.header, set()
    unindexed = set(shard.raw_fields) - set(shard.index_fields)
    for _, raw_page, r0, r1, _, page_id, b0, b1 in shard.locations:
        start = header["header_size"] + page_id * header["page_size"]
        spans.update(range(start + b0 + 8, start + b1))
        if unindexed:
            start = header["header_size"] + raw_page * header["page_size"]
            spans.update(range(start + r0 + 8, start + r1))
    return spans


def record_boundaries(path):
    """Byte offsets where a TFRecord file's records end (a uint64 length, 2 CRCs, the data)."""
    ends, pos = set(), 0
    with open(path, "rb") as f:
        data = f.read()
    while pos < len(data):
        pos += 16 + int.from_bytes(data[pos:pos + 8], "little")
        ends.add(pos)
    return ends


def corruptions(size, positions, rng):
    """(kind, position, action) triples: flips at live positions, cuts, appended garbage."""
    for pos in rng.choice(positions, size=min(FLIPS, len(positions)), replace=False):
        yield "flip", int(pos), int(rng.integers(1, 256))
    for cut in rng.integers(0, size, size=CUTS):
        yield "truncate", int(cut), None
    for n in rng.integers(1, 64, size=APPENDS):
        yield "append", int(n), rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes()


def damage(clean, target, kind, pos, action):
    shutil.copyfile(clean, target)
    with open(target, "r+b") as f:
        if kind == "flip":
            f.seek(pos)
            byte = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([byte ^ action]))
        elif kind == "truncate":
            f.truncate(pos)
        else:
            f.seek(0, 2)
            f.write(action)


def run_fuzz(fmt, folder):
    """{"caught", "identical", "silent", "bad"}: counts, and the silent and bad cases."""
    rng = np.random.default_rng(SEED)
    clean_dir = os.path.join(folder, "clean")
    work_dir = os.path.join(folder, "work")
    os.makedirs(clean_dir, exist_ok=True)
    write, read = {"mindrecord": (write_mindrecord, read_mindrecord),
                   "mindspore-mindrecord": (unpack_mindspore_set, read_mindrecord),
                   "tfrecord": (write_records, read_tfrecord)}[fmt]
    clean = write(clean_dir)
    expected = read(clean)
    targets = [clean] + ([clean + ".db"] if fmt != "tfrecord" else [])
    result = {"caught": 0, "identical": 0, "silent": [], "bad": [], "total": 0, "identical_cases": [],
              "caught_cases": []}
    allowed = unchecked_bytes(clean) if fmt != "tfrecord" else set()
    boundaries = record_boundaries(clean) if fmt == "tfrecord" else set()
    for damaged in targets:
        size = os.path.getsize(damaged)
        positions = live_positions(damaged, size)
        for kind, pos, action in corruptions(size, positions, rng):
            shutil.rmtree(work_dir, ignore_errors=True)
            shutil.copytree(clean_dir, work_dir)
            target = os.path.join(work_dir, os.path.basename(damaged))
            damage(damaged, target, kind, pos, action)
            result["total"] += 1
            case = (os.path.basename(damaged), kind, pos)
            try:
                got = read(os.path.join(work_dir, os.path.basename(clean)))
            except (ValueError, OSError) as err:
                if os.path.basename(target) in str(err) or os.path.basename(clean) in str(err):
                    result["caught"] += 1
                    result["caught_cases"].append(case)
                else:
                    result["bad"].append(case + (f"error without the file name: {err}",))
                continue
            except Exception as err:   # noqa: BLE001 - any other error type is a finding
                result["bad"].append(case + (f"{type(err).__name__}: {err}",))
                continue
            if got == expected:
                result["identical"] += 1
                result["identical_cases"].append(case)
            elif damaged == clean and (kind == "flip" and pos in allowed
                                       or kind == "truncate" and pos in boundaries):
                result["silent"].append(case)
            else:
                result["bad"].append(case + ("different records, no error",))
    return result


@pytest.mark.parametrize("fmt", ["tfrecord", "mindrecord", "mindspore-mindrecord"])
def test_every_corruption_is_caught_or_harmless(fmt, tmp_path):
    result = run_fuzz(fmt, str(tmp_path))
    assert result["bad"] == []
    if fmt == "tfrecord":        # CRCs guard every byte; only whole-record cuts pass
        assert all(kind == "truncate" for _, kind, _ in result["silent"])
    assert result["caught"] > result["total"] // 2


def summary(fmt, result):
    lines = []
    for name in sorted({case[0] for key in ("caught_cases", "identical_cases", "silent", "bad")
                        for case in result[key]}):
        count = {key: sum(case[0] == name for case in result[key])
                 for key in ("caught_cases", "identical_cases", "silent", "bad")}
        total = sum(count.values())
        lines.append(f"{fmt} {name}: caught {count['caught_cases']} of {total} corruptions (an error "
                     f"naming the file); {count['identical_cases']} left the records identical (bytes "
                     f"never read); {count['silent']} changed them silently (the listed exceptions); "
                     f"{count['bad']} bad")
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile
    for fmt in ("tfrecord", "mindrecord", "mindspore-mindrecord"):
        with tempfile.TemporaryDirectory() as folder:
            print(summary(fmt, run_fuzz(fmt, folder)))
    sys.exit(0)
