"""Checkpoints: round trips, the file format, atomic writes, corrupt files, loading into a
network, and resuming training bit for bit."""
import json
import os
import zipfile

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.train import checkpoint as ckpt
from minitorch_dist.train import (checkpoint_entries, load_checkpoint, load_param_into_net,
                                  save_checkpoint, wait_async_saves)


class Mixed(nn.Cell):
    """Parameters of every supported dtype, a scalar, and names with odd characters."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.fc = nn.Dense(3, 2)
        self.half = ms.Parameter(ms.Tensor(rng.normal(size=(2, 2)).astype(np.float16)))
        self.double = ms.Parameter(ms.Tensor(rng.normal(size=(4,))), requires_grad=False)
        self.count = ms.Parameter(ms.Tensor(np.array(7, np.int64)))
        self.ids = ms.Parameter(ms.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3)))
        self.mask = ms.Parameter(ms.Tensor(np.array([True, False, True])))
        self.small = ms.Parameter(ms.Tensor(np.array([-3, 4], np.int8)), name="odd name/é.x")
        self.pixels = ms.Parameter(ms.Tensor(np.array([0, 255], np.uint8)))
        self.empty = ms.Parameter(ms.Tensor(np.zeros((0, 3), np.float32)))

    def construct(self, x):
        return self.fc(x)


def _values(cell):
    return {name: (p.asnumpy(), p.dtype, p.requires_grad) for name, p in checkpoint_entries(cell)}


def _scramble(cell):
    for _, p in checkpoint_entries(cell):
        p.set_data(ms.Tensor(np.zeros(p.shape, p.dtype) + (1 if p.dtype.kind != "b" else 0)))


# ---- round trips --------------------------------------------------------------------------------
def test_round_trip_preserves_names_dtypes_values_and_requires_grad(tmp_path):
    net = Mixed()
    before = _values(net)
    path = tmp_path / "mixed.ckpt"
    save_checkpoint(net, str(path))
    loaded = load_checkpoint(str(path))
    assert list(loaded) == list(before)          # same names, same order
    assert "odd name/é.x" in loaded
    for name, (array, dtype, requires_grad) in before.items():
        param = loaded[name]
        assert isinstance(param, ms.Parameter) and param.name == name
        assert param.dtype == dtype and param.shape == array.shape
        assert param.requires_grad == requires_grad
        np.testing.assert_array_equal(param.asnumpy(), array)


def test_load_into_network_copies_in_place(tmp_path):
    net = Mixed()
    before = _values(net)
    save_checkpoint(net, str(tmp_path / "m"))      # ".ckpt" is appended
    assert os.path.exists(tmp_path / "m.ckpt")
    other = Mixed()
    _scramble(other)
    weight, weight_array = other.fc.weight, other.fc.weight.data
    missing, unused = load_param_into_net(other, load_checkpoint(str(tmp_path / "m.ckpt")))
    assert missing == [] and unused == []
    assert other.fc.weight is weight and other.fc.weight.data is weight_array   # in place
    for name, (array, dtype, _) in _values(other).items():
        np.testing.assert_array_equal(array, before[name][0])
        assert dtype == before[name][1]


def test_file_is_a_numpy_npz_with_a_manifest(tmp_path):
    net = nn.Dense(3, 2)
    path = str(tmp_path / "dense.ckpt")
    save_checkpoint(net, path)
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["weight"], net.weight.asnumpy())
        np.testing.assert_array_equal(npz["bias"], net.bias.asnumpy())
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(ckpt.MANIFEST))
        assert all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
    assert manifest["format"] == ckpt.FORMAT and manifest["version"] == ckpt.VERSION
    assert [e["name"] for e in manifest["entries"]] == ["weight", "bias"]
    assert manifest["entries"][0]["shape"] == [2, 3]


def test_save_lists_dicts_and_appended_values(tmp_path):
    w = ms.Parameter(ms.Tensor([1.0, 2.0]), name="w")
    path = str(tmp_path / "a.ckpt")
    save_checkpoint([{"name": "x.y", "data": ms.Tensor([[1, 2]])}, w], path,
                    append_dict={"epoch_num": 3, "lr": 0.5, "tag": "run-1", "extra": ms.Tensor([9.0])})
    loaded = load_checkpoint(path)
    assert list(loaded) == ["x.y", "w", "epoch_num", "lr", "tag", "extra"]
    assert loaded["x.y"].dtype == np.int64 and loaded["x.y"].asnumpy().tolist() == [[1, 2]]
    assert loaded["epoch_num"].dtype == np.int64 and int(loaded["epoch_num"].asnumpy()) == 3
    assert loaded["lr"].dtype == np.float32 and loaded["tag"] == "run-1"
    save_checkpoint({"b": np.arange(3.0)}, path)   # a dict of arrays, overwriting
    assert list(load_checkpoint(path)) == ["b"]


def test_foreign_byte_order_loads_native_and_odd_dtypes_are_refused(tmp_path):
    path = str(tmp_path / "be.ckpt")
    save_checkpoint({"w": np.arange(3, dtype=">f4")}, path)
    w = load_checkpoint(path)["w"]
    assert w.dtype == np.float32 and w.dtype.isnative and w.asnumpy().tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="dtype complex128 cannot be saved"):
        save_checkpoint({"c": np.zeros(2, complex)}, path)


def test_save_choice_func_and_load_filters(tmp_path):
    net = Mixed()
    path = str(tmp_path / "f.ckpt")
    save_checkpoint(net, path, choice_func=lambda name: name != "pixels")
    assert "pixels" not in load_checkpoint(path)
    assert list(load_checkpoint(path, filter_prefix="fc.")) == [n for n in load_checkpoint(path)
                                                               if not n.startswith("fc.")]
    assert list(load_checkpoint(path, filter_prefix=["fc.", "h", "d", "c", "i", "m", "o", "e"])) == []
    assert list(load_checkpoint(path, specify_prefix="fc.")) == ["fc.weight", "fc.bias"]
    assert list(load_checkpoint(path, choice_func=lambda n: n.endswith("bias"))) == ["fc.bias"]
    with pytest.raises(TypeError, match="filter_prefix"):
        load_checkpoint(path, filter_prefix=3)


def test_bad_save_arguments(tmp_path):
    with pytest.raises(TypeError, match="save_obj must be"):
        save_checkpoint(42, str(tmp_path / "x.ckpt"))
    with pytest.raises(TypeError, match="list item 0"):
        save_checkpoint([ms.Tensor([1.0])], str(tmp_path / "x.ckpt"))
    with pytest.raises(ValueError, match="appears twice"):
        save_checkpoint([{"name": "a", "data": ms.Tensor([1.0])}] * 2, str(tmp_path / "x.ckpt"))
    with pytest.raises(ValueError, match="also a parameter name"):
        save_checkpoint(nn.Dense(2, 2), str(tmp_path / "x.ckpt"), append_dict={"weight": 1})
    os.mkdir(tmp_path / "dir.ckpt")
    with pytest.raises(ValueError, match="is a directory"):
        save_checkpoint(nn.Dense(2, 2), str(tmp_path / "dir.ckpt"))
    assert not os.path.exists(tmp_path / "x.ckpt")


def test_async_save_snapshots_values_at_call_time(tmp_path):
    net = nn.Dense(2, 2)
    expected = net.weight.asnumpy()
    path = str(tmp_path / "async.ckpt")
    save_checkpoint(net, path, async_save=True)
    net.weight.set_data(ms.Tensor(np.full((2, 2), 5.0, np.float32)))   # training goes on
    wait_async_saves()
    np.testing.assert_array_equal(load_checkpoint(path)["weight"].asnumpy(), expected)


def test_async_save_failure_is_reported(tmp_path, monkeypatch):
    def broken(archive, member, array):
        raise OSError("disk full")
    monkeypatch.setattr(ckpt, "_write_entry", broken)
    save_checkpoint(nn.Dense(2, 2), str(tmp_path / "a.ckpt"), async_save=True)
    with pytest.raises(RuntimeError, match="disk full"):
        wait_async_saves()
    assert os.listdir(tmp_path) == []


# ---- atomic writes ------------------------------------------------------------------------------
def test_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = str(tmp_path / "model.ckpt")
    save_checkpoint(nn.Dense(4, 3), path)
    with open(path, "rb") as f:
        original = f.read()
    calls = []

    def fail_on_second(archive, member, array):
        calls.append(member)
        if len(calls) == 2:
            raise OSError("simulated crash in the middle of the save")
        real_write(archive, member, array)

    real_write = ckpt._write_entry
    monkeypatch.setattr(ckpt, "_write_entry", fail_on_second)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(nn.Dense(4, 3), path)
    assert len(calls) == 2
    with open(path, "rb") as f:
        assert f.read() == original
    assert os.listdir(tmp_path) == ["model.ckpt"]
    load_checkpoint(path)   # still valid


def test_interrupt_during_first_save_leaves_nothing(tmp_path, monkeypatch):
    def interrupted(archive, member, array):
        raise KeyboardInterrupt
    monkeypatch.setattr(ckpt, "_write_entry", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(nn.Dense(2, 2), str(tmp_path / "new.ckpt"))
    assert os.listdir(tmp_path) == []


def test_save_creates_missing_directories(tmp_path):
    path = tmp_path / "a" / "b" / "c.ckpt"
    save_checkpoint(nn.Dense(2, 2), str(path))
    assert path.is_file()


# ---- corrupt and wrong files --------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "good.ckpt")
    save_checkpoint(nn.Dense(8, 4), path)
    with open(path, "rb") as f:
        return path, f.read()


def test_missing_file(tmp_path):
    missing = str(tmp_path / "nope.ckpt")
    with pytest.raises(ValueError, match=r"nope\.ckpt.*does not exist"):
        load_checkpoint(missing)


def test_truncated_file(saved, tmp_path):
    path, data = saved
    bad = tmp_path / "truncated.ckpt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.ckpt.*corrupt or truncated"):
        load_checkpoint(str(bad))


def test_garbage_and_pickle_files_are_rejected(tmp_path):
    bad = tmp_path / "garbage.ckpt"
    bad.write_bytes(b"\x80\x04K\x01." + b"x" * 100)    # a pickle stream: never unpickled
    with pytest.raises(ValueError, match="garbage.ckpt.*not a valid ZIP"):
        load_checkpoint(str(bad))


def test_flipped_data_byte_is_detected(saved, tmp_path):
    path, data = saved
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("weight.npy")
    # the last byte of the weight member's array data (member data ends at header + size)
    header_len = 30 + len(info.filename.encode()) + len(info.extra)
    offset = info.header_offset + header_len + info.compress_size - 1
    corrupt = bytearray(data)
    corrupt[offset] ^= 0xFF
    bad = tmp_path / "flipped.ckpt"
    bad.write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match=r"flipped\.ckpt.*weight|weight.*flipped\.ckpt"):
        load_checkpoint(str(bad))


def _rewrite(path, out, edit_manifest):
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == ckpt.MANIFEST:
                manifest = json.loads(data)
                edit_manifest(manifest)
                data = json.dumps(manifest).encode()
            dst.writestr(info.filename, data)


def test_checksum_mismatch_names_the_parameter(saved, tmp_path):
    path, _ = saved
    bad = str(tmp_path / "checksum.ckpt")
    _rewrite(path, bad, lambda m: m["entries"][1].update(crc32=m["entries"][1]["crc32"] ^ 1))
    with pytest.raises(ValueError, match="checksum mismatch for parameter 'bias'"):
        load_checkpoint(bad)


def test_newer_version_and_foreign_zip_are_rejected(saved, tmp_path):
    path, _ = saved
    newer = str(tmp_path / "newer.ckpt")
    _rewrite(path, newer, lambda m: m.update(version=ckpt.VERSION + 1))
    with pytest.raises(ValueError, match="format version"):
        load_checkpoint(newer)
    plain = str(tmp_path / "plain.npz")
    np.savez(plain, weight=np.zeros(3))
    with pytest.raises(ValueError, match="no __checkpoint__.json manifest"):
        load_checkpoint(plain)


def test_manifest_shape_disagreeing_with_data(saved, tmp_path):
    path, _ = saved
    bad = str(tmp_path / "shape.ckpt")
    _rewrite(path, bad, lambda m: m["entries"][0].update(shape=[4, 9]))
    with pytest.raises(ValueError, match="'weight'.*manifest says"):
        load_checkpoint(bad)


# ---- load_param_into_net ------------------------------------------------------------------------
def test_shape_mismatch_names_parameter_and_both_shapes():
    net = nn.Dense(3, 2)
    with pytest.raises(ValueError, match=r"'weight'.*\(2, 3\).*\(3, 3\)"):
        load_param_into_net(net, {"weight": ms.Tensor(np.zeros((3, 3), np.float32))})


def test_dtype_mismatch_names_parameter_and_both_dtypes():
    net = nn.Dense(3, 2)
    with pytest.raises(ValueError, match="'bias'.*float32.*float64"):
        load_param_into_net(net, {"bias": ms.Tensor(np.zeros(2, np.float64))})


def test_failed_load_leaves_the_network_unchanged():
    net = nn.Dense(3, 2)
    before = net.weight.asnumpy()
    bad = {"weight": ms.Tensor(np.ones((2, 3), np.float32)), "bias": ms.Tensor(np.ones(5, np.float32))}
    with pytest.raises(ValueError, match="'bias'"):
        load_param_into_net(net, bad)
    np.testing.assert_array_equal(net.weight.asnumpy(), before)


def test_strict_load_lists_missing_parameters():
    net = nn.SequentialCell([nn.Dense(3, 2), nn.Dense(2, 1)])
    partial = {"0.weight": ms.Tensor(np.ones((2, 3), np.float32)), "other": ms.Tensor([1.0])}
    with pytest.raises(ValueError, match=r"strict_load.*\['0.bias', '1.weight', '1.bias'\]"):
        load_param_into_net(net, partial, strict_load=True)
    assert load_param_into_net(net, partial) == (["0.bias", "1.weight", "1.bias"], ["other"])
    np.testing.assert_array_equal(net[0].weight.asnumpy(), np.ones((2, 3)))


def test_load_checkpoint_with_net_and_bad_arguments(tmp_path):
    src = nn.Dense(3, 2)
    path = str(tmp_path / "d.ckpt")
    save_checkpoint(src, path)
    dst = nn.Dense(3, 2)
    load_checkpoint(path, net=dst)
    np.testing.assert_array_equal(dst.weight.asnumpy(), src.weight.asnumpy())
    with pytest.raises(ValueError, match="strict_load"):
        load_checkpoint(path, net=nn.SequentialCell([nn.Dense(3, 2)]), strict_load=True)
    with pytest.raises(TypeError, match="must be a Cell"):
        load_param_into_net({"a": 1}, {})
    with pytest.raises(TypeError, match="must be a dict"):
        load_param_into_net(dst, [("weight", src.weight)])
    with pytest.raises(TypeError, match="must be a Tensor or an array"):
        load_param_into_net(dst, {"weight": "zeros"})


def test_loading_keeps_parameters_on_their_device(tmp_path, virtual_gpu):
    src = nn.Dense(3, 2)
    path = str(tmp_path / "d.ckpt")
    save_checkpoint(src, path)
    dst = nn.Dense(3, 2).to("GPU")
    load_checkpoint(path, net=dst)
    assert dst.weight.device is virtual_gpu
    np.testing.assert_array_equal(dst.weight.asnumpy(), src.weight.asnumpy())
    save_checkpoint(dst, str(tmp_path / "from_gpu.ckpt"))    # values copied to host to save
    np.testing.assert_array_equal(load_checkpoint(str(tmp_path / "from_gpu.ckpt"))["bias"].asnumpy(),
                                  src.bias.asnumpy())


def test_same_named_parameters_fall_back_to_their_paths(tmp_path):
    class TwoOptimizers(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Dense(2, 2), nn.Dense(2, 2)
            self.opt_a = nn.Momentum(self.a.trainable_params(), 0.1, 0.9)
            self.opt_b = nn.Momentum(self.b.trainable_params(), 0.1, 0.9)

    cell = TwoOptimizers()
    names = [name for name, _ in checkpoint_entries(cell)]
    # as in MindSpore, a parent built with auto_prefix renames each optimizer's global_step
    assert "opt_a.global_step" in names and "opt_b.global_step" in names
    cell.opt_b.global_step.set_data(ms.Tensor(np.array([4], np.int32)))
    save_checkpoint(cell, str(tmp_path / "two.ckpt"))
    fresh = TwoOptimizers()
    assert load_checkpoint(str(tmp_path / "two.ckpt"), net=fresh, strict_load=True)
    assert fresh.opt_b.global_step.asnumpy().tolist() == [4]
    assert fresh.opt_a.global_step.asnumpy().tolist() == [0]


# ---- resuming training --------------------------------------------------------------------------
def _batches(count):
    rng = np.random.default_rng(42)
    out = []
    for _ in range(count):
        x = rng.normal(size=(8, 4)).astype(np.float32)
        y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]], np.float32) + 0.3).astype(np.float32)
        out.append((ms.Tensor(x), ms.Tensor(y)))
    return out


def _train_step(seed, make_optimizer):
    ms.set_seed(seed)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 1)])
    return nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), make_optimizer(net.trainable_params()))


OPTIMIZERS = {
    "sgd_momentum": lambda params: nn.SGD(params, 0.05, momentum=0.9, weight_decay=1e-3),
    "momentum": lambda params: nn.Momentum(params, 0.05, 0.9, use_nesterov=True),
    "adam": lambda params: nn.Adam(params, 0.01, weight_decay=1e-4),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_resume_is_bit_identical_to_uninterrupted_training(tmp_path, kind):
    batches = _batches(7)
    make = OPTIMIZERS[kind]
    straight = _train_step(1, make)
    for x, y in batches:
        straight(x, y)

    first = _train_step(1, make)
    for x, y in batches[:4]:
        first(x, y)
    path = str(tmp_path / "resume.ckpt")
    save_checkpoint(first, path)
    resumed = _train_step(2, make)              # different initial weights, fresh optimizer
    missing, unused = load_param_into_net(resumed, load_checkpoint(path), strict_load=True)
    assert missing == [] and unused == []
    assert int(resumed.optimizer.global_step.asnumpy()[0]) == 4
    for x, y in batches[4:]:
        resumed(x, y)

    expected = dict(checkpoint_entries(straight))
    for name, param in checkpoint_entries(resumed):
        assert np.array_equal(param.asnumpy(), expected[name].asnumpy()), name


def test_train_cell_checkpoint_holds_optimizer_state(tmp_path):
    step = _train_step(0, OPTIMIZERS["adam"])
    path = str(tmp_path / "train.ckpt")
    save_checkpoint(step, path)
    names = list(load_checkpoint(path))
    assert names[:4] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert "global_step" in names and "moment1.0.weight" in names and "moment2.2.bias" in names


def test_two_optimizers_in_a_wrapper_save_and_load(tmp_path):
    """Wide&Deep's TrainStepWrap holds two optimizers under a wrapper that leaves attribute
    names out of parameter paths; both global_steps must still get distinct names
    (regression: "two different parameters are both named 'global_step'")."""
    import minitorch_dist as ms
    from minitorch_dist import nn

    class Wrap(nn.Cell):
        _name_scope = False

        def __init__(self):
            super().__init__()
            self.a = ms.Parameter(ms.Tensor([1.0]), name="a")
            self.b = ms.Parameter(ms.Tensor([2.0]), name="b")
            self.optimizer_w = nn.SGD([self.a], 0.1)
            self.optimizer_d = nn.SGD([self.b], 0.1)

    net = Wrap()
    net.optimizer_d.global_step.data[...] = 7
    path = str(tmp_path / "two.ckpt")
    ms.save_checkpoint(net, path)
    loaded = ms.load_checkpoint(path)
    assert "global_step" in loaded and "optimizer_d.global_step" in loaded
    fresh = Wrap()
    ms.load_param_into_net(fresh, loaded, strict_load=True)
    assert int(fresh.optimizer_d.global_step.asnumpy()[0]) == 7
