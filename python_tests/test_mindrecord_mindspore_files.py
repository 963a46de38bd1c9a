"""MindSpore's real MindRecord format, both directions, against files MindSpore 2.10 wrote.

``data/mindrecord/*.gz`` are sets written by MindSpore's own FileWriter (see the README
there); the rows they hold are rebuilt by ``make_reference``. We read theirs; what we write is
byte-identical to theirs where MindSpore's layout is deterministic, and reads the same.
"""
import gzip
import json
import os
import shutil
import sqlite3
import struct
import sys

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.mindrecord import FileReader, FileWriter

DATA = os.path.join(os.path.dirname(__file__), "data", "mindrecord")
sys.path.insert(0, DATA)
import make_reference as ref  # noqa: E402

EXPECTED = {"scalars.mindrecord": ref.reference_rows(5),
            "blobs.mindrecord": ref.reference_rows(6, True),
            "multi.mindrecord0": ref.reference_rows(7, True),
            "oneblob.mindrecord": ref.oneblob_rows(),
            "pages.mindrecord": ref.pages_rows(0, 18),
            "blobonly.mindrecord": ref.blobonly_rows()}


def unpack_reference(folder):
    for name in os.listdir(DATA):
        if name.endswith(".gz"):
            with gzip.open(os.path.join(DATA, name)) as src, open(os.path.join(folder, name[:-3]), "wb") as dst:
                shutil.copyfileobj(src, dst)
    return folder


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    return unpack_reference(str(tmp_path_factory.mktemp("theirs")))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("ours"))
    ref.write_all(FileWriter, folder)
    return folder


def assert_row_equal(got, expected, schema):
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        kind = schema[name]["type"]
        if kind == "bytes":
            assert got[name].dtype == np.uint8 and bytes(got[name]) == value, name
        elif kind == "string":
            assert got[name].dtype.kind == "U" and str(got[name]) == value, name
        elif kind == "float32" and "shape" not in schema[name]:
            assert got[name].dtype == np.float32 and got[name] == np.float32(value), name
        else:
            np.testing.assert_array_equal(got[name], value)
            assert got[name].dtype == np.dtype(kind), name


def schema_of(first):
    return {"scalars": ref.SCALARS, "blobs": ref.BLOBS, "multi": ref.BLOBS, "oneblob": ref.ONEBLOB,
            "pages": ref.PAGES, "blobonly": ref.BLOBONLY}[first.split(".")[0]]


@pytest.mark.parametrize("first", sorted(EXPECTED))
@pytest.mark.parametrize("side", ["theirs", "ours"])
def test_every_reference_set_reads_as_written(first, side, request):
    folder = request.getfixturevalue(side)
    data = ds.MindDataset(os.path.join(folder, first), shuffle=False)
    assert data.get_col_names() == sorted(schema_of(first))     # MindSpore's header sorts fields
    rows = list(data.create_dict_iterator(output_numpy=True))
    if first.startswith("multi"):        # MindSpore gives the spare rows to random shards
        rows.sort(key=lambda r: int(r["id"]))
    assert len(rows) == len(EXPECTED[first])
    for got, expected in zip(rows, EXPECTED[first]):
        assert_row_equal(got, expected, schema_of(first))
    reader = FileReader(os.path.join(folder, first))
    assert reader.len() == len(EXPECTED[first])


@pytest.mark.parametrize("name", ["scalars.mindrecord", "blobs.mindrecord", "oneblob.mindrecord",
                                  "blobonly.mindrecord"])
def test_what_we_write_is_byte_identical_to_mindspore(name, theirs, ours):
    with open(os.path.join(theirs, name), "rb") as a, open(os.path.join(ours, name), "rb") as b:
        assert a.read() == b.read()
    assert index_rows(os.path.join(theirs, name)) == index_rows(os.path.join(ours, name))


def index_rows(path):
    db = sqlite3.connect(path + ".db")
    try:
        return (db.execute("SELECT * FROM INDEXES ORDER BY ROW_ID").fetchall(),
                db.execute("SELECT * FROM SHARD_NAME").fetchall())
    finally:
        db.close()


def test_multi_page_writes_keep_mindspore_page_rules(ours):
    """Several write_raw_data calls over 32 KB pages: a valid layout (page order may differ
    from MindSpore's, whose reader accepts it; see the README), same rows, same index values."""
    data = ds.MindDataset(os.path.join(ours, "pages.mindrecord"), shuffle=False)
    assert [int(r[0]) for r in data.create_tuple_iterator(output_numpy=True, columns=["id"])] == list(range(18))
    with open(os.path.join(ours, "pages.mindrecord"), "rb") as f:
        head = f.read(8)
    assert struct.unpack("<Q", head)[0] < ref.HEADER_SIZE


def test_string_columns_come_back_as_text_even_as_tensors(theirs):
    """MindSpore returns string tensors; here a NumPy str array (it cannot be a Tensor)."""
    data = ds.MindDataset(os.path.join(theirs, "scalars.mindrecord"), columns_list=["name", "id"],
                          shuffle=False)
    first = next(data.create_tuple_iterator())
    assert isinstance(first[0], np.ndarray) and str(first[0]) == "row-0"
    assert first[1].shape == () and int(first[1].asnumpy()) == 0
    batched = next(data.batch(2).create_dict_iterator(output_numpy=True))
    assert batched["name"].tolist() == ["row-0", "row-1"]


def test_sharded_reading_of_a_mindspore_set(theirs):
    path = os.path.join(theirs, "multi.mindrecord1")
    seen = []
    for shard in range(2):
        data = ds.MindDataset(path, columns_list=["id"], shuffle=False, num_shards=2, shard_id=shard)
        seen += [int(r[0]) for r in data.create_tuple_iterator(output_numpy=True)]
    assert sorted(set(seen)) == list(range(7)) and len(seen) == 8     # 7 rows, padded to 2 x 4


def test_empty_shards_and_compression_that_costs_bytes(tmp_path):
    """2 rows over 3 shards leave one shard empty; tiny int arrays compress to more bytes
    (MindSpore then records compression_size 0, not a negative number)."""
    path = str(tmp_path / "e.mindrecord")
    writer = FileWriter(path, 3)
    writer.add_schema({"a": {"type": "int32"}, "v": {"type": "int32", "shape": [-1]}})
    writer.write_raw_data([{"a": i, "v": np.arange(i + 1, dtype=np.int32)} for i in range(2)])
    writer.commit()
    with open(path + "2", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert header["compression_size"] == 0 and header["page"] == []
    rows = list(ds.MindDataset(path + "0", shuffle=False).create_tuple_iterator(output_numpy=True))
    assert [(int(a), v.tolist()) for a, v in rows] == [(0, [0]), (1, [0, 1])]


def test_open_for_append_to_a_mindspore_set(tmp_path):
    folder = unpack_reference(str(tmp_path))
    path = os.path.join(folder, "multi.mindrecord2")
    before = open(os.path.join(folder, "multi.mindrecord0"), "rb").read()
    writer = FileWriter.open_for_append(path)
    writer.write_raw_data(ref.reference_rows(10, True)[7:])        # rows 7, 8, 9
    assert open(os.path.join(folder, "multi.mindrecord0"), "rb").read() == before   # until commit
    writer.commit()
    rows = list(ds.MindDataset(path, shuffle=False).create_dict_iterator(output_numpy=True))
    rows.sort(key=lambda r: int(r["id"]))
    for got, expected in zip(rows, ref.reference_rows(10, True), strict=True):
        assert_row_equal(got, expected, ref.BLOBS)
    abandoned = FileWriter.open_for_append(path)
    abandoned.write_raw_data(ref.reference_rows(12, True)[10:])
    del abandoned                                   # never committed: the set stays as it was
    assert len(list(ds.MindDataset(path).create_tuple_iterator())) == 10
    assert not [n for n in os.listdir(folder) if n.endswith(".part")]
