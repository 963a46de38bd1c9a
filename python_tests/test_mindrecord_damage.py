"""Damaged MindRecord sets: each fault named by the issue gives a ValueError naming the file.

MindSpore's format has no checksum; what is checked is the header (JSON, types, page table),
the file size, every length in the pages, each row's fields against the schema, and the
SQLite index against the pages and the index-field values.
"""
import json
import os
import shutil
import sqlite3
import struct

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.mindrecord import FileReader, FileWriter

SCHEMA = {"id": {"type": "int64"}, "name": {"type": "string"}, "score": {"type": "float64"},
          "image": {"type": "bytes"}}


@pytest.fixture
def clean(tmp_path):
    path = str(tmp_path / "d.mindrecord")
    writer = FileWriter(path)
    writer.set_header_size(1 << 14)
    writer.set_page_size(1 << 15)
    writer.add_schema(SCHEMA, "damage")
    writer.write_raw_data([{"id": i, "name": f"n{i}", "score": i / 2, "image": bytes([i] * 3)}
                           for i in range(4)])
    writer.commit()
    return path


def read_all(path):
    return [[np.asarray(v).tolist() for v in row]
            for row in ds.MindDataset(path, shuffle=False).create_tuple_iterator(output_numpy=True)]


def header_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), n


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def raw_page_offset(path):
    header, _ = header_of(path)
    raw = next(p for p in header["page"] if p["page_type"] == "RAW_DATA")
    return header["header_size"] + raw["page_id"] * header["page_size"]


def test_a_flipped_first_byte_is_named_and_not_called_mindspores(clean):
    patch(clean, 0, bytes([open(clean, "rb").read(1)[0] ^ 0xFF]))
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged") as err:
        read_all(clean)
    assert "written by MindSpore" not in str(err.value)


def test_a_changed_index_value_in_a_row_is_caught(clean):
    start = raw_page_offset(clean)
    with open(clean, "rb") as f:
        f.seek(start)
        page = f.read(200)
    at = page.index(b"\xa2id") + 3          # the MessagePack value of "id" in row 0
    patch(clean, start + at, b"\x05")         # 0 -> 5: still a valid int64
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged: row 0's 'id' is 5, its index says 0"):
        read_all(clean)


def test_a_text_field_that_is_no_longer_utf8_is_caught(clean):
    start = raw_page_offset(clean)
    with open(clean, "rb") as f:
        f.seek(start)
        page = f.read(200)
    patch(clean, start + page.index(b"n0"), b"\xff")
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged: row 0's fields do not decode"):
        read_all(clean)


@pytest.mark.parametrize("change", ["truncate", "append"])
def test_truncated_or_extended_files_are_caught(clean, change):
    size = os.path.getsize(clean)
    with open(clean, "r+b") as f:
        if change == "truncate":
            f.truncate(size - 3)
        else:
            f.seek(0, 2)
            f.write(b"garbage")
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged.*bytes; its header says"):
        read_all(clean)


def test_the_index_is_needed_and_must_be_this_files(clean, tmp_path):
    other = str(tmp_path / "other.mindrecord")
    shutil.copyfile(clean, other)
    shutil.copyfile(clean + ".db", other + ".db")
    with pytest.raises(ValueError, match=r"other\.mindrecord\.db' names the shard file .*'d\.mindrecord'"):
        read_all(other)
    os.remove(other + ".db")      # a renamed file with a matching index: its header still says
    db = sqlite3.connect(other + ".db")      # it is d.mindrecord, so it no longer fits its set
    db.execute("CREATE TABLE SHARD_NAME(NAME TEXT NOT NULL)")
    db.execute("INSERT INTO SHARD_NAME VALUES ('other.mindrecord')")
    db.execute("CREATE TABLE INDEXES AS SELECT * FROM (SELECT 1) WHERE 0")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match=r"other\.mindrecord"):
        FileReader([other])
    os.remove(clean + ".db")
    with pytest.raises(ValueError, match=r"index '.*d\.mindrecord\.db' is missing"):
        read_all(clean)
    with open(clean + ".db", "wb") as f:
        f.write(b"not a database at all, just text")
    with pytest.raises(ValueError, match=r"d\.mindrecord\.db' is damaged"):
        read_all(clean)


def test_an_index_that_disagrees_with_the_pages_is_caught(clean):
    db = sqlite3.connect(clean + ".db")
    db.execute("UPDATE INDEXES SET PAGE_OFFSET_RAW_END = PAGE_OFFSET_RAW_END + 1 WHERE ROW_ID = 2")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match=r"d\.mindrecord\.db' does not match the pages"):
        read_all(clean)


def test_an_index_value_that_disagrees_with_the_row_is_caught(clean):
    db = sqlite3.connect(clean + ".db")
    db.execute("UPDATE INDEXES SET name_0 = 'n9' WHERE ROW_ID = 1")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match=r"row 1's 'name' is 'n1', its index says 'n9'"):
        read_all(clean)


@pytest.mark.parametrize("edit, message", [
    (lambda h: h.update(page_size=5), "page_size 5"),
    (lambda h: h["page"][0].update(page_size=10**9), "more than the page size"),
    (lambda h: h["schema"][0]["schema"]["id"].update(type="int128"), "field 'id' has the spec"),
    (lambda h: h["schema"][0].update(blob_fields=[]), "blob_fields"),
    (lambda h: h.update(version="9.9"), "header version '9.9'"),
    (lambda h: h.pop("page"), "lacks"),
    (lambda h: h.update(shard_id=3), "shard_id 3"),
    (lambda h: h["page"].reverse(), "page entry 0 has page_id"),
    (lambda h: h["page"][1]["row_group_ids"].append({"id": "x", "offset": 0}), "malformed row groups"),
])
def test_header_fields_of_the_wrong_type_or_range_are_caught(clean, edit, message):
    """Rewrite the header JSON in place (same header region) with one field wrong."""
    header, _ = header_of(clean)
    edit(header)
    data = json.dumps(header).encode()
    patch(clean, 0, struct.pack("<Q", len(data)) + data)
    with pytest.raises(ValueError, match=rf"d\.mindrecord' is damaged.*{message}"):
        read_all(clean)


def test_header_that_is_not_json_is_caught(clean):
    _, n = header_of(clean)
    patch(clean, 8 + n // 2, b"\x00\xff")
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged.*not valid JSON"):
        FileReader(clean)


def test_a_blob_length_that_overruns_its_page_is_caught(clean):
    header, _ = header_of(clean)
    blob = next(p for p in header["page"] if p["page_type"] == "BLOB_DATA")
    patch(clean, header["header_size"] + blob["page_id"] * header["page_size"], struct.pack("<Q", 2**40))
    with pytest.raises(ValueError, match=r"d\.mindrecord' is damaged: an entry of page 0 claims"):
        read_all(clean)


def test_nan_in_an_index_field_is_not_damage(tmp_path):
    """SQLite stores a NaN index value as NULL; that must still match the row."""
    path = str(tmp_path / "nan.mindrecord")
    writer = FileWriter(path)
    writer.add_schema({"x": {"type": "float64"}, "i": {"type": "int32"}})
    writer.write_raw_data([{"x": float("nan"), "i": 1}, {"x": 2.5, "i": 2}])
    writer.commit()
    rows = read_all(path)
    assert np.isnan(rows[0][1]) and rows[1] == [2, 2.5]


def test_a_file_of_the_earlier_own_format_says_so(tmp_path):
    old = tmp_path / "old.mindrecord"
    old.write_bytes(b"MTDMREC1" + bytes(40) + b"MTDMEND1")
    with pytest.raises(ValueError, match=r"old\.mindrecord' is in the format of earlier minitorch_dist"):
        read_all(str(old))
