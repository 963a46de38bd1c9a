"""Checkpoints that fail or resume. A killed save leaves no temporary file once the next save
ran, every single-byte corruption of the ZIP headers is a ValueError naming the file (or is
harmless), and a checkpoint resumes exactly: shuffle order and dropout masks included."""
import os
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import nn
from minitorch_dist.train import CheckpointConfig, Model, ModelCheckpoint
from minitorch_dist.train import checkpoint as ckpt
from mpi_jobs import REPO, child_env


def _small_checkpoint(path):
    values = {"w": ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
              "b": ms.Tensor(np.array([1.5, -2.0], np.float32))}
    ckpt.save_checkpoint(values, str(path))
    return {k: v.asnumpy() for k, v in values.items()}


# ---- killed and failed saves ---------------------------------------------------------------------
KILLED_SAVE = r'''
import sys, time
import numpy as np
from minitorch_dist.train import checkpoint as ckpt
original = ckpt._write_entry
def slow(archive, member, array):
    original(archive, member, array)
    print("writing", flush=True)
    time.sleep(60)
ckpt._write_entry = slow
ckpt.save_checkpoint({"w": np.zeros(1000, np.float32)}, sys.argv[1])
'''


def _temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def test_a_killed_save_leaves_nothing_after_the_next_save(tmp_path):
    target = tmp_path / "model.ckpt"
    for _ in range(3):                      # three saves killed with SIGKILL mid-write:
        child = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(target)],
                                 env=child_env(), stdout=subprocess.PIPE, text=True, cwd=REPO)
        try:
            assert child.stdout.readline().strip() == "writing"
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        assert len(_temporaries(tmp_path)) == 1      # each save removed its dead predecessor's
    _small_checkpoint(target)
    assert _temporaries(tmp_path) == []
    assert set(ckpt.load_checkpoint(str(target))) == {"w", "b"}


def test_a_temporary_file_of_a_running_save_is_left_alone(tmp_path):
    target = tmp_path / "model.ckpt"
    busy = tmp_path / f".model.ckpt.{os.getppid()}.0123456789ab.tmp"   # a live process's
    busy.write_bytes(b"partial")
    _small_checkpoint(target)
    assert _temporaries(tmp_path) == [busy.name]


def test_a_failed_save_removes_its_temporary_file(tmp_path, monkeypatch):
    def broken(archive, member, array):
        raise OSError("disk full")
    monkeypatch.setattr(ckpt, "_write_entry", broken)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_checkpoint({"w": np.zeros(3, np.float32)}, str(tmp_path / "m.ckpt"))
    assert os.listdir(tmp_path) == []


# ---- single-byte corruptions of the ZIP headers ----------------------------------------------------
def _header_offsets(data):
    """Byte offsets of the first local file header, the first central directory record and
    the end-of-central-directory record (their fixed-size parts)."""
    end = data.rindex(b"PK\x05\x06")
    central = struct.unpack_from("<I", data, end + 16)[0]
    return ([("local", i) for i in range(30)] + [("central", central + i) for i in range(46)]
            + [("end", end + i) for i in range(22)])


def _corruption_cases():
    """The case list: every byte of the three header structures, flipped (98 cases)."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:       # gone again after collection
        path = os.path.join(folder, "probe.ckpt")
        _small_checkpoint(path)
        with open(path, "rb") as handle:
            data = handle.read()
    return [pytest.param(offset, id=f"{part}+{offset}") for part, offset in _header_offsets(data)]


@pytest.mark.parametrize("offset", _corruption_cases())
def test_every_header_corruption_is_a_value_error_naming_the_file(tmp_path, offset):
    path = tmp_path / "model.ckpt"
    original = _small_checkpoint(path)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    try:
        loaded = ckpt.load_checkpoint(str(path))
    except ValueError as err:
        assert str(path) in str(err), err
        return
    # an unchecked field (a timestamp, a comment length...) changed: the data must be intact
    assert {k: v.asnumpy().tolist() for k, v in loaded.items()} == \
        {k: v.tolist() for k, v in original.items()}


def test_truncations_are_value_errors(tmp_path):
    path = tmp_path / "model.ckpt"
    _small_checkpoint(path)
    data = path.read_bytes()
    for length in (0, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:length])
        with pytest.raises(ValueError, match=str(path)):
            ckpt.load_checkpoint(str(path))


# ---- exact resume ---------------------------------------------------------------------------------
EPOCHS, SPLIT = 4, 2


def _data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((48, 6)).astype(np.float32)
    y = rng.standard_normal((48, 2)).astype(np.float32)
    return ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=True).batch(8)


def _model():
    ms.set_seed(11)
    net = nn.SequentialCell([nn.Dense(6, 16), nn.ReLU(), nn.Dropout(keep_prob=0.7),
                             nn.Dense(16, 2)])
    return net, Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))


def _weights(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def _checkpointing(folder):
    return ModelCheckpoint("run", str(folder), CheckpointConfig(save_checkpoint_steps=6,
                                                                keep_checkpoint_max=10))


def test_resume_with_shuffle_and_dropout_equals_an_uninterrupted_run(tmp_path):
    net, model = _model()
    model.train(EPOCHS, _data())
    expected = _weights(net)

    net, model = _model()
    model.train(SPLIT, _data(), callbacks=[_checkpointing(tmp_path)])
    saved = tmp_path / f"run-{SPLIT}_6.ckpt"
    assert saved.exists()

    net, model = _model()                                  # a new process, in effect
    ms.set_seed(99)                                        # whatever the script does first
    train_network = model._train_network
    ckpt.load_checkpoint(str(saved), net=train_network)
    data = _data()
    state = ckpt.restore_train_state(str(saved), data)
    assert state["epoch"] == SPLIT and state["step"] == 6 * SPLIT and state["complete_epoch"]
    model.train(EPOCHS, data, initial_epoch=state["epoch"])
    for got, want in zip(_weights(net), expected):
        np.testing.assert_array_equal(got, want)           # bit for bit


def test_without_the_random_state_the_resume_differs(tmp_path):
    """The check above can fail: skipping restore_train_state changes the dropout masks."""
    net, model = _model()
    model.train(EPOCHS, _data())
    expected = _weights(net)
    net, model = _model()
    model.train(SPLIT, _data(), callbacks=[_checkpointing(tmp_path)])
    net, model = _model()
    ms.set_seed(99)
    ckpt.load_checkpoint(str(tmp_path / f"run-{SPLIT}_6.ckpt"), net=model._train_network)
    model.train(EPOCHS, _data(), initial_epoch=SPLIT)
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(net), expected))


def test_initial_epoch_alone_resumes_the_shuffle_order():
    first = ds.NumpySlicesDataset({"x": np.arange(10)}, shuffle=True)
    orders = [[int(x) for (x,) in first] for _ in range(3)]
    resumed = ds.NumpySlicesDataset({"x": np.arange(10)}, shuffle=True)
    seen = []

    class Record(nn.Cell):
        def construct(self, x):
            seen.append(int(x.asnumpy()))
            return x.sum()
    Model(Record())._run_epochs(3, resumed, None, False, -1, 2)
    assert seen == orders[2]


def test_restore_rejects_checkpoints_without_state(tmp_path):
    path = tmp_path / "plain.ckpt"
    _small_checkpoint(path)
    with pytest.raises(ValueError, match="has no __train_state__ entry"):
        ckpt.restore_train_state(str(path))


def test_resume_from_the_middle_of_an_epoch_is_exact_too(tmp_path):
    net, model = _model()
    model.train(EPOCHS, _data())
    expected = _weights(net)

    net, model = _model()
    config = CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=10)
    model.train(2, _data(), callbacks=[ModelCheckpoint("mid", str(tmp_path), config)])
    saved = tmp_path / "mid-2_2.ckpt"          # global step 8: step 2 of 6 in epoch 2

    net, model = _model()
    ckpt.load_checkpoint(str(saved), net=model.train_network)
    data = _data()
    state = ckpt.restore_train_state(str(saved), data)
    assert state["complete_epoch"] is False and state["epoch"] == 1
    assert state["step_in_epoch"] == 2 and state["batch_num"] == 6
    model.train(EPOCHS, data, initial_epoch=state["epoch"])
    for got, want in zip(_weights(net), expected):
        np.testing.assert_array_equal(got, want)


def test_mid_epoch_without_the_dataset_warns(tmp_path):
    net, model = _model()
    config = CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=10)
    model.train(1, _data(), callbacks=[ModelCheckpoint("mid", str(tmp_path), config)])
    with pytest.warns(UserWarning, match="not bit-identical"):
        state = ckpt.restore_train_state(str(tmp_path / "mid-1_4.ckpt"))
    assert state["complete_epoch"] is False


def test_rng_state_round_trips_and_rejects_garbage():
    from minitorch_dist import random as framework_random
    ms.set_seed(4)
    state = framework_random.get_rng_state()
    first = framework_random.rng().random(3)
    framework_random.set_rng_state(state)
    np.testing.assert_array_equal(framework_random.rng().random(3), first)
    assert framework_random.get_seed() == 4
    for bad in (None, {"bit_generator": 3}, {"bit_generator": {"bit_generator": "Nope"}}):
        with pytest.raises(ValueError, match="set_rng_state"):
            framework_random.set_rng_state(bad)
