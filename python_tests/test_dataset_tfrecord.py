"""ds.TFRecordDataset, ds.Schema and the TFRecord format (framing, CRC32C, tf.train.Example)."""
import json
import os
import struct

import numpy as np
import pytest

import minitorch_dist.common.dtype as mstype
import minitorch_dist.dataset as ds
from minitorch_dist.dataset import tfrecord_io as tio


def rows(data, epochs=1):
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=epochs)
    return [[[v.tolist() for v in row] for row in it] for _ in range(epochs)]


def make_files(folder, counts, name="train"):
    """Files of records {"id": [i], "vec": [i, -i], "x": [i/2]}, ids numbered across files."""
    paths, i = [], 0
    for k, count in enumerate(counts):
        path = os.path.join(folder, f"{name}_{k}.tfrecord")
        ds.write_tfrecord(path, [{"id": [i + j], "vec": [i + j, -(i + j)],
                                  "x": np.array([(i + j) / 2], np.float32)} for j in range(count)])
        paths.append(path)
        i += count
    return paths


def schema(*columns):
    s = ds.Schema()
    for c in columns:
        s.add_column(*c)
    return s


ID_SCHEMA = [("id", mstype.int32)]


# ---- the format ---------------------------------------------------------------------------------
def test_crc32c_check_value_and_the_two_implementations_agree():
    assert tio.crc32c_python(b"123456789") == 0xE3069283          # the standard check value
    assert tio.crc32c_python(b"") == 0
    data = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    if tio._crc32c_c is not None:
        assert tio.crc32c(data) == tio.crc32c_python(data)
    crc = tio.crc32c_python(data)
    assert tio.masked_crc(data) == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_example_encoding_is_the_protobuf_wire_format():
    # Example{features{feature{key:"a" value{int64_list{value:[1,-1]}}}}}, bytes worked out by hand
    golden = bytes.fromhex("0a16" "0a14" "0a0161" "120f" "1a0d" "0a0b" "01" + "ff" * 9 + "01")
    assert tio.encode_example({"a": [1, -1]}) == golden
    assert tio.parse_example(golden)["a"].tolist() == [1, -1]
    # unpacked repeated fields (a legal encoding) parse too: int64 varints and fixed32 floats
    ints = bytes.fromhex("0805" "0807")                            # value: 5, value: 7
    floats = b"\x0d" + struct.pack("<f", 1.5) + b"\x0d" + struct.pack("<f", -2.0)
    for feature, expected in ((b"\x1a" + bytes([len(ints)]) + ints, [5, 7]),
                              (b"\x12" + bytes([len(floats)]) + floats, [1.5, -2.0])):
        entry = b"\x0a\x01b\x12" + bytes([len(feature)]) + feature
        message = b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
        assert tio.parse_example(message)["b"].tolist() == expected
    assert tio.parse_example(tio.encode_example({"s": [b"ab", "c"]}))["s"] == [b"ab", b"c"]
    big = np.array([0, 2**40, -(2**62), 127, 128, -128], np.int64)
    assert tio.parse_example(tio.encode_example({"v": big}))["v"].tolist() == big.tolist()


def test_record_framing(tmp_path):
    path = str(tmp_path / "f.tfrecord")
    ds.write_tfrecord(path, [{"a": [1]}, {"a": [2, 3]}])
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    assert struct.unpack_from("<I", data, 8)[0] == tio.masked_crc(data[:8])
    assert struct.unpack_from("<I", data, 12 + length)[0] == tio.masked_crc(data[12:12 + length])
    assert tio.count_records(path) == 2 and tio.record_offsets(path).tolist() == [0, 16 + length]


# ---- damaged and missing files ---------------------------------------------------------------------
@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-2], "truncated"),
    (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "CRC of its data does not match"),
    (lambda b: bytes([b[0] ^ 4]) + b[1:], "corrupt length"),
    (lambda b: b + b"\x01\x02", "truncated"),
])
def test_damaged_files_are_errors_naming_the_file(tmp_path, damage, message):
    path = make_files(str(tmp_path), [3])[0]
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    with pytest.raises(ValueError, match=message) as err:
        rows(ds.TFRecordDataset(path, schema=schema(*ID_SCHEMA), shuffle=False))
    assert path in str(err.value)


def test_missing_files_and_patterns(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ds.TFRecordDataset(str(tmp_path / "nope.tfrecord"))
    with pytest.raises(ValueError, match="does not exist"):
        ds.TFRecordDataset(str(tmp_path / "*.tfrecord"))
    with pytest.raises(TypeError, match="dataset_files"):
        ds.TFRecordDataset([])
    paths = make_files(str(tmp_path), [2, 2])
    by_glob = ds.TFRecordDataset(str(tmp_path / "train_*.tfrecord"), shuffle=False)
    by_list = ds.TFRecordDataset(paths[::-1], shuffle=False)             # sorted, as MindSpore
    assert by_glob.files == paths == by_list.files
    assert rows(by_glob) == rows(by_list)


# ---- schema and columns -----------------------------------------------------------------------------
def test_schema_from_the_first_record_and_given_schemas(tmp_path):
    path = str(tmp_path / "s.tfrecord")
    ds.write_tfrecord(path, [{"b": b"xy", "f": [0.5, 1.5], "i": [7, 8, 9, 10, 11, 12]}])
    inferred = ds.TFRecordDataset(path)
    assert inferred.get_col_names() == ["b", "f", "i"]
    b, f, i = rows(inferred)[0][0]
    assert b == [120, 121] and f == [0.5, 1.5] and i == [7, 8, 9, 10, 11, 12]
    assert [t.name for t in inferred.output_types()] == ["uint8", "float32", "int64"]
    shaped = ds.TFRecordDataset(path, schema=schema(("i", mstype.int32, [2, 3]), ("b", str)),
                                shuffle=False)
    out = next(shaped.create_tuple_iterator(output_numpy=True))
    assert out[0].shape == (2, 3) and out[0].dtype == np.int32 and str(out[1]) == "xy"
    wildcard = ds.TFRecordDataset(path, schema=schema(("i", "int64", [-1, 2])), shuffle=False)
    assert next(wildcard.create_tuple_iterator(output_numpy=True))[0].shape == (3, 2)
    picked = ds.TFRecordDataset(path, columns_list=["i", "f"])
    assert picked.get_col_names() == ["i", "f"]


@pytest.mark.parametrize("column, message", [
    (("f", mstype.int32), "float list, which reads as float32 only"),
    (("i", mstype.float32), "int64 list, which reads as an integer type"),
    (("b", mstype.int32), "holds bytes"),
    (("i", "int64", [4]), "needs 4"),
    (("i", "int64", [-1, 4]), "do not fill shape"),
    (("missing", "int64"), "lacks column 'missing'"),
])
def test_schema_mismatches_are_clear_errors(tmp_path, column, message):
    path = str(tmp_path / "s.tfrecord")
    ds.write_tfrecord(path, [{"b": b"xy", "f": [0.5], "i": [1, 2, 3, 4, 5, 6]}])
    with pytest.raises(ValueError, match=message) as err:
        rows(ds.TFRecordDataset(path, schema=schema(column)))
    assert path in str(err.value)


def test_schema_class_and_bad_values(tmp_path):
    s = schema(("ids", mstype.int32), ("vals", np.float32, [2]))
    path = tmp_path / "schema.json"
    path.write_text(s.to_json())
    again = ds.Schema(str(path))
    assert again.columns == s.columns and json.loads(s.to_json())["columns"]["vals"]["shape"] == [2]
    listed = ds.Schema()
    listed.parse_columns([{"name": "a", "type": "uint8"}])
    assert listed.names() == ["a"]
    with pytest.raises(ValueError, match="already in the schema"):
        s.add_column("ids", mstype.int64)
    with pytest.raises(ValueError, match="unsupported data type"):
        s.add_column("c", "complex64")
    with pytest.raises(TypeError, match="cannot interpret"):
        s.add_column("c", object())
    with pytest.raises(ValueError, match="only one dimension"):
        s.add_column("c", "int32", [-1, -1])
    with pytest.raises(ValueError, match="positive ints"):
        s.add_column("c", "int32", [0])
    with pytest.raises(ValueError, match="does not exist"):
        ds.Schema(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ds.Schema(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="no columns"):
        ds.TFRecordDataset(make_files(str(tmp_path), [1])[0], schema=ds.Schema())
    with pytest.raises(TypeError, match="schema must be"):
        ds.TFRecordDataset(make_files(str(tmp_path), [1])[0], schema=42)


# ---- order, shuffle, samples ------------------------------------------------------------------------------
def test_shuffle_levels(tmp_path):
    paths = make_files(str(tmp_path), [4, 4, 4])
    ids = lambda data, epochs=1: [[r[0][0] for r in epoch] for epoch in rows(data, epochs)]
    assert ids(ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), shuffle=False)) == [list(range(12))]
    first, second = ids(ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA)), 2)   # default: global
    assert sorted(first) == sorted(second) == list(range(12)) and first != second
    files_only = ids(ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), shuffle=ds.Shuffle.FILES))[0]
    blocks = [files_only[i:i + 4] for i in (0, 4, 8)]
    assert sorted(blocks) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert ids(ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), shuffle=False, num_samples=5)) \
        == [[0, 1, 2, 3, 4]]
    capped = schema(*ID_SCHEMA)
    capped.num_rows = 3
    assert ds.TFRecordDataset(paths, schema=capped, shuffle=False).get_dataset_size() == 3


def test_bad_arguments(tmp_path):
    path = make_files(str(tmp_path), [2])[0]
    for kwargs, error, message in [
            (dict(shuffle="yes"), TypeError, "shuffle must be a bool"),
            (dict(shuffle=ds.Shuffle.INFILE), ValueError, "not supported here"),
            (dict(shard_equal_rows="x"), TypeError, "shard_equal_rows"),
            (dict(num_shards=2), ValueError, "together"),
            (dict(num_shards=2, shard_id=2), ValueError, r"shard_id must be an integer in .* = \[0, 1\], got 2"),
            (dict(num_shards=0, shard_id=0), ValueError, "num_shards must be a positive"),
            (dict(num_samples=0), ValueError, "num_samples"),
            (dict(num_parallel_workers=0), ValueError, "num_parallel_workers"),
            (dict(cache=object()), ValueError, "cache"),
            (dict(compression_type="GZIP"), ValueError, "compression_type"),
            (dict(columns_list="id"), ValueError, "columns_list"),
            (dict(columns_list=["nope"]), ValueError, "not in TFRecord file"),
    ]:
        with pytest.raises(error, match=message):
            ds.TFRecordDataset(path, **kwargs)


# ---- sharding --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shuffle", [False, True])
def test_shard_equal_rows_equal_sizes_and_union_is_everything(tmp_path, shuffle):
    paths = make_files(str(tmp_path), [5, 1, 4])          # 10 rows, uneven files
    shards = [ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), shuffle=shuffle, num_shards=3,
                                 shard_id=k, shard_equal_rows=True) for k in range(3)]
    got = [[r[0][0] for r in rows(s)[0]] for s in shards]
    assert [len(g) for g in got] == [4, 4, 4] == [s.get_dataset_size() for s in shards]
    assert set().union(*map(set, got)) == set(range(10))
    if not shuffle:
        assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]   # consecutive rows, wrapping round


def test_file_sharding_without_equal_rows(tmp_path):
    paths = make_files(str(tmp_path), [3, 1, 2])
    shards = [ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), shuffle=False, num_shards=2, shard_id=k)
              for k in range(2)]
    got = [[r[0][0] for r in rows(s)[0]] for s in shards]
    assert got == [[0, 1, 2, 4, 5], [3]]                   # whole files 0, 2 and file 1
    assert [s.get_dataset_size() for s in shards] == [5, 1]
    shuffled = [[r[0][0] for r in rows(ds.TFRecordDataset(paths, schema=schema(*ID_SCHEMA), num_shards=2,
                                                          shard_id=k))[0]] for k in range(2)]
    assert sorted(sum(shuffled, [])) == list(range(6))     # a partition in every epoch
    with pytest.raises(ValueError, match="shard_equal_rows=True"):
        ds.TFRecordDataset(paths[:1], num_shards=2, shard_id=0)


def test_upstream_style_pipeline_with_batch_and_map(tmp_path):
    """Wide&Deep's _get_tf_dataset: records of 4 lines x 3 fields, batch(1), reshape in map."""
    path = str(tmp_path / "train_part.tfrecord")
    ds.write_tfrecord(path, [{"feat_ids": np.arange(12) + 100 * r, "feat_vals": np.ones(12, np.float32),
                              "label": np.zeros(4, np.float32)} for r in range(6)])
    s = schema(("feat_ids", mstype.int32), ("feat_vals", mstype.float32), ("label", mstype.float32))
    data = ds.TFRecordDataset(dataset_files=[path], shuffle=True, schema=s, num_parallel_workers=8,
                              num_shards=2, shard_id=1, shard_equal_rows=True).batch(1, drop_remainder=True)
    data = data.map(lambda x, y, z: (x.reshape(4, 3), y.reshape(4, 3), z.reshape(4, 1)),
                    input_columns=["feat_ids", "feat_vals", "label"], num_parallel_workers=8)
    out = list(data.create_dict_iterator(output_numpy=True))
    assert len(out) == 3 == data.get_dataset_size()
    assert out[0]["feat_ids"].shape == (4, 3) and out[0]["feat_ids"].dtype == np.int32


def test_reading_without_the_crc32c_package(tmp_path, monkeypatch):
    """The pure-Python CRC32C is the fallback when `crc32c` is not installed: same files, same rows."""
    paths = make_files(str(tmp_path), [3])
    expected = rows(ds.TFRecordDataset(paths, shuffle=False))
    monkeypatch.setattr(tio, "_crc32c_c", None)
    assert rows(ds.TFRecordDataset(paths, shuffle=False)) == expected
    ds.write_tfrecord(paths[0], [{"id": [1]}])
    monkeypatch.undo()
    assert rows(ds.TFRecordDataset(paths, shuffle=False)) == [[[[1]]]]
