"""mindrecord.FileWriter / FileReader and ds.MindDataset: API, schema rules, shuffle, shards."""
import json
import os
import struct

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist import mindrecord
from minitorch_dist.mindrecord import FileReader, FileWriter

SCHEMA = {"id": {"type": "int64"}, "ids": {"type": "int32", "shape": [-1]},
          "vals": {"type": "float32", "shape": [2, 2]}, "x": {"type": "float64"},
          "name": {"type": "string"}, "blob": {"type": "bytes"}, "n32": {"type": "int32"},
          "f32": {"type": "float32"}, "i64s": {"type": "int64", "shape": [3]}}


def row(i):
    return {"id": i, "ids": np.arange(i % 3 + 1, dtype=np.int32) + i, "vals": np.full((2, 2), i, np.float32),
            "x": i / 4, "name": f"row{i}", "blob": bytes([i, 255 - i]), "n32": np.int32(-i),
            "f32": np.float32(i) / 8, "i64s": np.array([i, -i, 2**40], np.int64)}


def write(path, count, shard_num=1, calls=1, schema=SCHEMA, make=row):
    writer = FileWriter(path, shard_num)
    assert writer.add_schema(schema, "test") == 0
    per = -(-count // calls)
    for start in range(0, count, per):
        writer.write_raw_data([make(i) for i in range(start, min(count, start + per))])
    writer.commit()


def ids(data, epochs=1):
    it = data.create_tuple_iterator(output_numpy=True, columns=["id"], num_epochs=epochs)
    return [[int(r[0]) for r in it] for _ in range(epochs)]


def simple(i):
    return {"id": i}


SIMPLE = {"id": {"type": "int64"}}


# ---- FileWriter ---------------------------------------------------------------------------------------
def test_module_paths():
    import minitorch_dist.mindrecord as mr
    from minitorch_dist.mindrecord import FileWriter as FW
    assert mr.FileWriter is FW is mindrecord.FileWriter and mr.SUCCESS == 0


@pytest.mark.parametrize("shard_num, suffixes", [(1, [""]), (3, ["0", "1", "2"]),
                                                 (21, [f"{i:02d}" for i in range(21)])])
def test_shard_file_names_follow_mindspore(tmp_path, shard_num, suffixes):
    path = str(tmp_path / "train_input_part.mindrecord")
    write(path, 5, shard_num, schema=SIMPLE, make=simple)
    assert sorted(os.listdir(tmp_path)) == sorted(f"train_input_part.mindrecord{s}{db}"
                                                  for s in suffixes for db in ("", ".db"))


def test_existing_files_need_overwrite(tmp_path):
    path = str(tmp_path / "a.mindrecord")
    write(path, 2, schema=SIMPLE, make=simple)
    with pytest.raises(RuntimeError, match="already exists.*overwrite=True"):
        FileWriter(path)
    open(path + ".db", "w").close()
    writer = FileWriter(path, overwrite=True)
    assert not os.path.exists(path) and not os.path.exists(path + ".db")
    writer.add_schema(SIMPLE)
    writer.write_raw_data([{"id": 7}])
    writer.commit()
    assert [int(r["id"]) for r in FileReader(path).get_next()] == [7]


@pytest.mark.parametrize("args, error, message", [
    (dict(shard_num=0), ValueError, r"shard_num must be an int in \[1, 1000\]"),
    (dict(shard_num=1001), ValueError, "shard_num"),
    (dict(shard_num=True), ValueError, "shard_num"),
    (dict(overwrite="yes"), TypeError, "overwrite"),
])
def test_writer_bad_arguments(tmp_path, args, error, message):
    with pytest.raises(error, match=message):
        FileWriter(str(tmp_path / "a.mindrecord"), **args)


def test_writer_bad_paths(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        FileWriter(str(tmp_path / "no_such_dir" / "a.mindrecord"))
    with pytest.raises(ValueError, match="is a folder"):
        FileWriter(str(tmp_path))
    with pytest.raises(ValueError, match="non-empty path"):
        FileWriter("")


@pytest.mark.parametrize("schema, message", [
    ({}, "non-empty dict"),
    ({"a": {"type": "int16"}}, "has type 'int16'"),
    ({"a": {"type": "string", "shape": [2]}}, "cannot have a shape"),
    ({"a": {"type": "int32", "shape": [0]}}, "positive ints or -1"),
    ({"a": {"type": "int32", "shape": [-1, -1]}}, "at most one dimension"),
    ({"a-b": {"type": "int32"}}, "letters, digits and underscores"),
    ({"a": {"type": "int32", "dims": 1}}, "optional 'shape'"),
])
def test_bad_schemas(tmp_path, schema, message):
    writer = FileWriter(str(tmp_path / "a.mindrecord"))
    with pytest.raises(ValueError, match=message):
        writer.add_schema(schema)


def test_writer_call_order_and_index(tmp_path):
    writer = FileWriter(str(tmp_path / "a.mindrecord"))
    with pytest.raises(RuntimeError, match="add the schema first"):
        writer.write_raw_data([{"id": 1}])
    with pytest.raises(RuntimeError, match="add the schema first"):
        writer.add_index(["id"])
    with pytest.raises(TypeError, match="desc"):
        writer.add_schema(SCHEMA, desc=3)
    writer.add_schema(SCHEMA)
    with pytest.raises(RuntimeError, match="already added"):
        writer.add_schema(SCHEMA)
    with pytest.raises(ValueError, match="only scalar fields"):
        writer.add_index(["ids"])
    with pytest.raises(ValueError, match="not in the schema"):
        writer.add_index(["nope"])
    writer.add_index(["id", "name"])
    writer.set_page_size(64 * 1024)
    with pytest.raises(ValueError, match="set_header_size"):
        writer.set_header_size(1)
    with pytest.raises(ValueError, match="multiple of 4"):
        writer.set_page_size(64 * 1024 + 2)
    writer.write_raw_data([row(0)])
    writer.commit()
    with pytest.raises(RuntimeError, match="has committed"):
        writer.write_raw_data([row(1)])
    reader = FileReader(str(tmp_path / "a.mindrecord"))
    assert reader.len() == 1 and reader.schema() == SCHEMA
    assert reader._shards[0].index_fields == ["id", "name"]
    assert reader._shards[0].header["page_size"] == 64 * 1024


@pytest.mark.parametrize("bad, message", [
    ({"id": 1.5}, r"row 0: field 'id' \(int64\) got float64"),
    ({"n32": 2**31}, "outside int32's range"),
    ({"vals": np.zeros((2, 3), np.float32)}, r"shape \[2, 3\], the schema says \[2, 2\]"),
    ({"ids": np.zeros((2, 2), np.int32)}, r"shape \[2, 2\], the schema says \[-1\]"),
    ({"i64s": np.zeros(4, np.int64)}, "the schema says"),
    ({"x": np.zeros(2)}, "is a scalar"),
    ({"name": 5}, r"'name' \(string\) got int"),
    ({"blob": "text"}, r"'blob' \(bytes\) got str"),
    ({"extra": 1}, r"not in the schema \['extra'\]"),
])
def test_rows_that_do_not_match_the_schema_are_errors(tmp_path, bad, message):
    writer = FileWriter(str(tmp_path / "a.mindrecord"))
    writer.add_schema(SCHEMA)
    with pytest.raises(ValueError, match=message):
        writer.write_raw_data([dict(row(0), **bad)])
    with pytest.raises(ValueError, match=r"missing \['x'\]"):
        writer.write_raw_data([{k: v for k, v in row(0).items() if k != "x"}])
    with pytest.raises(ValueError, match="list of dicts"):
        writer.write_raw_data(row(0))


def test_every_field_type_round_trips(tmp_path):
    path = str(tmp_path / "all.mindrecord")
    write(path, 7, shard_num=2, calls=3)
    data = ds.MindDataset(path + "0", shuffle=False)
    # MindSpore keeps a schema's fields sorted by name (its header is a sorted JSON map)
    assert data.get_col_names() == sorted(SCHEMA) and data.get_dataset_size() == 7
    got = list(data.create_dict_iterator(output_numpy=True))
    # 3 calls of 3, 3, 1 rows, each split over the 2 files; the files are read in order
    assert [int(out["id"]) for out in got] == [0, 1, 3, 4, 6, 2, 5]
    for out in got:
        expected = row(int(out["id"]))
        for name, value in expected.items():
            if name == "blob":
                assert out[name].dtype == np.uint8 and bytes(out[name]) == value
            elif name == "name":
                assert str(out[name]) == value
            else:
                np.testing.assert_array_equal(out[name], value)
                assert out[name].dtype == np.dtype(SCHEMA[name]["type"]), name
    tensors = next(data.create_tuple_iterator(columns=["ids", "vals", "blob"]))   # as Tensors
    assert tensors[0].dtype == np.int32 and tensors[1].shape == (2, 2) and tensors[2].dtype == np.uint8


# ---- reading: files, columns, errors -------------------------------------------------------------------------
def test_one_file_loads_its_set_a_list_loads_those(tmp_path):
    path = str(tmp_path / "set.mindrecord")
    write(path, 10, shard_num=3, schema=SIMPLE, make=simple)
    assert ids(ds.MindDataset(path + "1", shuffle=False)) == [list(range(10))]
    # 10 rows over 3 files: 4, 3, 3 (MindSpore gives the extra rows to random files)
    assert ids(ds.MindDataset([path + "2", path + "0"], shuffle=False)) == [[7, 8, 9, 0, 1, 2, 3]]
    os.remove(path + "2")
    with pytest.raises(ValueError, match=r"one of 3 shard files.*set\.mindrecord2' is missing"):
        ds.MindDataset(path + "0")


def test_files_that_cannot_be_read_are_errors_naming_them(tmp_path):
    missing = str(tmp_path / "none.mindrecord")
    with pytest.raises(ValueError, match="none.mindrecord' does not exist"):
        ds.MindDataset(missing)
    other = tmp_path / "text.mindrecord"
    other.write_bytes(b"hello world, not a record")
    with pytest.raises(ValueError, match="text.mindrecord' is damaged or not a MindRecord file"):
        ds.MindDataset(str(other))
    # a header that is JSON but not MindSpore's
    header = json.dumps({"header_size": 16384, "page_size": 33554432}).encode()
    odd = tmp_path / "odd.mindrecord"
    odd.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    with pytest.raises(ValueError, match="odd.mindrecord' is damaged.*lacks"):
        ds.MindDataset(str(odd))
    half = tmp_path / "half.mindrecord"
    writer = FileWriter(str(half))
    writer.add_schema(SIMPLE)
    writer.write_raw_data([{"id": 1}])            # written but never committed: no such file yet
    with pytest.raises(ValueError, match="half.mindrecord' does not exist"):
        ds.MindDataset(str(half))
    assert os.path.exists(str(half) + ".part")
    with pytest.raises(TypeError, match="dataset_files"):
        ds.MindDataset([])


def test_columns_list(tmp_path):
    path = str(tmp_path / "c.mindrecord")
    write(path, 3)
    data = ds.MindDataset(path, columns_list=["x", "id"], shuffle=False)
    assert data.get_col_names() == ["x", "id"]
    assert [(float(x), int(i)) for x, i in data.create_tuple_iterator(output_numpy=True)] == \
        [(0.0, 0), (0.25, 1), (0.5, 2)]
    with pytest.raises(ValueError, match=r"names \['nope'\], which the files"):
        ds.MindDataset(path, columns_list=["nope"])
    with pytest.raises(ValueError, match="columns_list must be"):
        ds.MindDataset(path, columns_list=["x", "x"])


def test_bad_reader_arguments(tmp_path):
    path = str(tmp_path / "b.mindrecord")
    write(path, 3, schema=SIMPLE, make=simple)
    for kwargs, error, message in [
            (dict(shuffle="yes"), TypeError, "shuffle must be a bool"),
            (dict(shuffle=ds.Shuffle.FILES, num_samples=2), ValueError, "num_samples cannot"),
            (dict(num_shards=2, shard_id=5), ValueError, r"shard_id must be an integer in .*\[0, 1\]"),
            (dict(shard_id=0), ValueError, "together"),
            (dict(sampler=object()), ValueError, "sampler is not supported"),
            (dict(num_parallel_workers=-1), ValueError, "num_parallel_workers"),
            (dict(num_samples=-3), ValueError, "num_samples"),
            (dict(cache=object()), ValueError, "cache"),
    ]:
        with pytest.raises(error, match=message):
            ds.MindDataset(path, **kwargs)


# ---- shuffle and sharding ---------------------------------------------------------------------------------
def test_shuffle_levels(tmp_path):
    path = str(tmp_path / "s.mindrecord")
    write(path, 12, shard_num=3, schema=SIMPLE, make=simple)    # files: 0-3, 4-7, 8-11
    assert ids(ds.MindDataset(path + "0", shuffle=False)) == [list(range(12))]
    first, second = ids(ds.MindDataset(path + "0"), epochs=2)   # default: global, new each epoch
    assert sorted(first) == sorted(second) == list(range(12)) and first != second
    files = ids(ds.MindDataset(path + "0", shuffle=ds.Shuffle.FILES))[0]
    assert sorted(files[i:i + 4] for i in (0, 4, 8)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    infile = ids(ds.MindDataset(path + "0", shuffle=ds.Shuffle.INFILE))[0]
    assert [sorted(infile[i:i + 4]) for i in (0, 4, 8)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert infile != list(range(12))
    assert ids(ds.MindDataset(path + "0", shuffle=False, num_samples=5)) == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_are_consecutive_equal_and_cover_everything(tmp_path, shuffle):
    path = str(tmp_path / "sh.mindrecord")
    write(path, 10, shard_num=2, schema=SIMPLE, make=simple)
    shards = [ds.MindDataset(path + "1", num_shards=4, shard_id=k, shuffle=shuffle) for k in range(4)]
    got = [ids(s)[0] for s in shards]
    assert [len(g) for g in got] == [3, 3, 3, 3] == [s.get_dataset_size() for s in shards]
    assert set().union(*map(set, got)) == set(range(10))
    if not shuffle:
        assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]]   # MindSpore's wrap-around
    else:
        whole = ids(ds.MindDataset(path + "0", shuffle=True))[0]          # one shared order, cut in 4
        assert sum(got, [])[:10] == whole


def test_padded_samples(tmp_path):
    path = str(tmp_path / "p.mindrecord")
    write(path, 10, schema=SIMPLE, make=simple)
    shards = [ds.MindDataset(path, columns_list=["id"], shuffle=False, num_shards=4, shard_id=k,
                             padded_sample={"id": np.int64(-1)}, num_padded=2) for k in range(4)]
    assert [ids(s)[0] for s in shards] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, -1, -1]]
    with pytest.raises(ValueError, match="not divisible by num_shards=4"):
        ds.MindDataset(path, columns_list=["id"], num_shards=4, shard_id=0,
                       padded_sample={"id": 0}, num_padded=1)
    with pytest.raises(ValueError, match="needs columns_list"):
        ds.MindDataset(path, num_shards=4, shard_id=0, padded_sample={"id": 0}, num_padded=2)
    with pytest.raises(ValueError, match="given together"):
        ds.MindDataset(path, columns_list=["id"], num_shards=4, shard_id=0, padded_sample={"id": 0})
    with pytest.raises(ValueError, match="exactly the keys"):
        ds.MindDataset(path, columns_list=["id"], num_shards=4, shard_id=0, padded_sample={"x": 0},
                       num_padded=2)


def test_file_reader(tmp_path):
    path = str(tmp_path / "r.mindrecord")
    write(path, 4, shard_num=2)
    reader = FileReader(path + "1", columns=["name", "id"])
    assert [(str(r["name"]), int(r["id"])) for r in reader.get_next()] == \
        [("row0", 0), ("row1", 1), ("row2", 2), ("row3", 3)]
    with pytest.raises(ValueError, match="unknown columns"):
        FileReader(path + "0", columns=["zz"])
    with pytest.raises(ValueError, match="num_consumer"):
        FileReader(path + "0", num_consumer=0)
    reader.close()


def test_preprocess_then_train_two_epochs(tmp_path):
    """The Wide&Deep flow in small: FileWriter records of several lines, MindDataset, batch(1),
    a map that reshapes, Model.train for two epochs (each epoch sees every batch)."""
    import minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.train import Model
    path = str(tmp_path / "train_input_part.mindrecord")
    writer = FileWriter(path, 3)
    writer.add_schema({"label": {"type": "float32", "shape": [-1]},
                       "feat_vals": {"type": "float32", "shape": [-1]}}, "CRITEO_TRAIN")
    rng = np.random.default_rng(0)
    records = []
    for _ in range(6):
        x = rng.random((4, 3)).astype(np.float32)
        records.append({"feat_vals": x.ravel(), "label": (x.sum(1) > 1.5).astype(np.float32)})
    writer.write_raw_data(records)
    writer.commit()
    data = ds.MindDataset(path + "0", columns_list=["feat_vals", "label"], shuffle=True, num_parallel_workers=8)
    data = data.batch(1, drop_remainder=True).map(lambda x, y: (x.reshape(4, 3), y.reshape(4, 1)),
                                                  input_columns=["feat_vals", "label"])
    ms.set_seed(0)
    net = nn.Dense(3, 1)
    steps = []

    class Count(ms.train.Callback):
        def on_train_step_end(self, run_context):
            steps.append(run_context.original_args().cur_epoch_num)

    model = Model(net, nn.BCEWithLogitsLoss(), nn.SGD(net.trainable_params(), 0.1))
    model.train(2, data, callbacks=[Count()])
    assert steps == [1] * 6 + [2] * 6


def test_exact_resume_positions_work_on_mind_datasets(tmp_path):
    """set_epoch(k, skip) (what ModelCheckpoint's training state restores) replays epoch k."""
    path = str(tmp_path / "resume.mindrecord")
    write(path, 9, shard_num=2, schema=SIMPLE, make=simple)
    data = ds.MindDataset(path + "0", num_shards=2, shard_id=1)
    epochs = ids(data, epochs=3)
    again = ds.MindDataset(path + "0", num_shards=2, shard_id=1)
    again.set_epoch(2, skip=3)
    assert ids(again) == [epochs[2][3:]]
    assert again.get_epoch() == 3


@pytest.mark.mpi
def test_shards_on_real_mpi_ranks(tmp_path):
    """MindDataset and TFRecordDataset on 2 MPI ranks: equal shard sizes, union = every row."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
    from mpi_jobs import SCRIPTS, launch, mpi_missing
    if mpi_missing():
        pytest.skip(mpi_missing())
    rows = 11
    write(str(tmp_path / "train.mindrecord"), rows, shard_num=3, schema=SIMPLE, make=simple)
    for k in range(3):
        ds.write_tfrecord(str(tmp_path / f"train_{k}.tfrecord"), [{"id": [i]} for i in range(k, rows, 3)])
    done, _ = launch(2, os.path.join(SCRIPTS, "dataset_shards_check.py"), str(tmp_path), str(rows))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DATASET_SHARDS OK world=2" in done.stdout
