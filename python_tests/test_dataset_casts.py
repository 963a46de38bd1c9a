"""Checked casts: narrowing a column never wraps; schema files fail naming the file; batches
refuse rows of mixed dtypes (issue 28, items 4 and 8)."""
import os

import numpy as np
import pytest

import minitorch_dist.common.dtype as mstype
import minitorch_dist.dataset as ds
from minitorch_dist.dataset.checked_cast import checked_cast


def schema(*columns):
    s = ds.Schema()
    for c in columns:
        s.add_column(*c)
    return s


def tfrecord_rows(path, columns):
    data = ds.TFRecordDataset(path, schema=schema(*columns), shuffle=False)
    return [[v.tolist() for v in row] for row in data.create_tuple_iterator(output_numpy=True)]


def test_tfrecord_int64_through_int8_refuses_instead_of_wrapping(tmp_path):
    path = str(tmp_path / "w.tfrecord")
    ds.write_tfrecord(path, [{"v": [199, 200, 201]}])
    with pytest.raises(ValueError, match=r"w\.tfrecord.*column 'v' holds 199, which does not fit int8"):
        tfrecord_rows(path, [("v", mstype.int8, [3])])
    assert tfrecord_rows(path, [("v", "int16", [3])]) == [[[199, 200, 201]]]


def test_tfrecord_negative_through_uint32_refuses(tmp_path):
    path = str(tmp_path / "n.tfrecord")
    ds.write_tfrecord(path, [{"v": [-1]}])
    with pytest.raises(ValueError, match=r"column 'v' holds -1, which does not fit uint32"):
        tfrecord_rows(path, [("v", mstype.uint32, [1])])


def test_tfrecord_string_column_refuses_bytes_that_are_not_utf8(tmp_path):
    path = str(tmp_path / "s.tfrecord")
    ds.write_tfrecord(path, [{"s": [b"\xffok"]}])
    with pytest.raises(ValueError, match=r"s\.tfrecord.*column 's' \(string\) holds bytes that are not UTF-8"):
        tfrecord_rows(path, [("s", "string")])
    assert tfrecord_rows(path, [("s", "uint8", [3])]) == [[[255, 111, 107]]]


def test_generator_column_types_refuse_out_of_range_values():
    data = ds.GeneratorDataset(lambda: iter([(np.array(300),)]), ["x"], column_types=[mstype.int8])
    with pytest.raises(ValueError, match=r"GeneratorDataset: column 'x' holds 300, which does not fit int8"):
        list(data.create_tuple_iterator(output_numpy=True))
    fits = ds.GeneratorDataset(lambda: iter([(np.array(100),)]), ["x"], column_types=[mstype.int8])
    (row,) = list(fits.create_tuple_iterator(output_numpy=True))
    assert row[0].dtype == np.int8 and int(row[0]) == 100


@pytest.mark.parametrize("values, target, message", [
    ([1.5], "int32", "not a whole number"),
    ([np.nan], "int64", "not a finite number"),
    ([2.0**63], "int64", "range"),
    ([1e300], "float32", "largest magnitude"),
    ([2], "bool", "only 0 and 1"),
    (np.array([2**64 - 1], np.uint64), "int64", "18446744073709551615"),
])
def test_checked_cast_rules(values, target, message):
    with pytest.raises(ValueError, match=message):
        checked_cast(np.asarray(values), target, "c", "here")


def test_text_casts_decode_utf8_or_refuse():
    assert checked_cast(np.array("é".encode()), np.str_, "c", "w").tolist() == "é"
    with pytest.raises(ValueError, match="column 'c' holds bytes that are not UTF-8"):
        checked_cast(np.array(b"\xff"), np.str_, "c", "w")
    with pytest.raises(ValueError, match="column 'c' holds int64 values, which do not convert to str"):
        checked_cast(np.array(5), np.str_, "c", "w")


def test_checked_cast_keeps_what_fits():
    assert checked_cast(np.array([255]), "uint8", "c", "w").tolist() == [255]
    assert checked_cast(np.array([2.0**62]), "int64", "c", "w").tolist() == [2**62]
    assert np.isinf(checked_cast(np.array([np.inf]), "float32", "c", "w")).all()
    assert checked_cast(np.array([0.1]), "float32", "c", "w").dtype == np.float32


def test_a_schema_file_of_random_bytes_is_a_value_error_naming_it(tmp_path):
    path = tmp_path / "random.json"
    path.write_bytes(bytes(np.random.default_rng(0).integers(128, 256, 64, dtype=np.uint8)))
    with pytest.raises(ValueError, match=r"random\.json' is not UTF-8 text"):
        ds.Schema(str(path))


@pytest.mark.parametrize("text, message", [
    ('{"numRows": 3}', "needs a 'columns' entry"),
    ("[1, 2]", "needs a 'columns' entry"),
    ('{"columns": {"a": {"type": "int99"}}}', "unsupported data type"),
])
def test_a_schema_file_without_columns_names_the_file(tmp_path, text, message):
    path = tmp_path / "bad_schema.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"bad_schema\.json'.*{message}"):
        ds.Schema(str(path))
    with pytest.raises(ValueError, match=r"bad_schema\.json'"):
        ds.TFRecordDataset(os.fspath(path), schema=str(path))


def test_batch_refuses_float32_and_int64_rows_of_one_column():
    rows = [(np.float32(1.5),), (np.int64(2),)]
    data = ds.GeneratorDataset(rows, ["x"], shuffle=False).batch(2)
    with pytest.raises(TypeError, match=r"column 'x' have different dtypes \['float32', 'int64'\]"):
        list(data.create_tuple_iterator(output_numpy=True))


def test_batch_keeps_one_dtype_and_text_of_any_width():
    same = ds.GeneratorDataset([(np.float32(1.5),), (np.float32(2),)], ["x"], shuffle=False).batch(2)
    (batch,) = list(same.create_tuple_iterator(output_numpy=True))
    assert batch[0].dtype == np.float32
    text = ds.GeneratorDataset([(np.array("a"),), (np.array("abc"),)], ["s"], shuffle=False).batch(2)
    (batch,) = list(text.create_tuple_iterator(output_numpy=True))
    assert batch[0].tolist() == ["a", "abc"]
