"""Datasets after an error: a failed iterator stays failed until reset; writers are atomic
(issue 28, item 5)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.mindrecord import FileWriter


def failing_in_first_epoch():
    calls = {"n": 0}

    def source():
        calls["n"] += 1
        for i in range(4):
            if calls["n"] == 1 and i == 2:
                raise RuntimeError("generator broke")
            yield (np.array(i),)
    return source


def test_an_iterator_whose_generator_raised_stays_failed():
    data = ds.GeneratorDataset(failing_in_first_epoch(), ["x"])
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=3)
    with pytest.raises(RuntimeError, match="generator broke"):
        list(it)
    # before: the next epoch of the same iterator yielded 0 rows and no error
    with pytest.raises(RuntimeError, match=r"failed earlier \(RuntimeError: generator broke\).*reset"):
        list(it)
    with pytest.raises(RuntimeError, match="failed earlier"):
        next(it)


def test_reset_clears_the_failure():
    data = ds.GeneratorDataset(failing_in_first_epoch(), ["x"])
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=3)
    with pytest.raises(RuntimeError, match="generator broke"):
        list(it)
    data.reset()
    assert [int(r[0]) for r in it] == [0, 1, 2, 3]


def test_write_tfrecord_that_fails_midway_leaves_no_file(tmp_path):
    path = str(tmp_path / "half.tfrecord")

    def examples():
        for i in range(2000):
            if i == 277:
                raise KeyboardInterrupt      # as if killed mid-write
            yield {"id": [i]}
    with pytest.raises(KeyboardInterrupt):
        ds.write_tfrecord(path, examples())
    assert os.listdir(tmp_path) == []       # before: a file that read as 277 records, no error
    ds.write_tfrecord(path, [{"id": [i]} for i in range(3)])
    assert os.listdir(tmp_path) == ["half.tfrecord"]


def test_write_tfrecord_killed_with_sigkill_leaves_only_a_part_file(tmp_path):
    path = str(tmp_path / "killed.tfrecord")
    script = textwrap.dedent(f"""
        import sys, time
        import minitorch_dist.dataset as ds
        def examples():
            for i in range(10**9):
                if i == 500:
                    print("writing", flush=True)
                    time.sleep(60)
                yield {{"id": [i]}}
        ds.write_tfrecord({path!r}, examples())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert not os.path.exists(path) and os.path.exists(path + ".part")
    with pytest.raises(ValueError, match=r"killed\.tfrecord"):
        ds.TFRecordDataset(path)


def test_mindrecord_writer_that_never_commits_leaves_no_dataset(tmp_path):
    path = str(tmp_path / "never.mindrecord")
    writer = FileWriter(path, shard_num=2)
    writer.add_schema({"x": {"type": "int32"}})
    writer.write_raw_data([{"x": i} for i in range(5)])
    assert not any(os.path.exists(f"{path}{k}") for k in range(2))
    with pytest.raises(ValueError, match=r"never\.mindrecord0' does not exist"):
        ds.MindDataset(path + "0")
    del writer                                # abandoned: its partial files go too
    time.sleep(0)
    assert sorted(os.listdir(tmp_path)) == []
