"""Placement: ``set_device``, where dispatch runs a primitive, mixed CPU/GPU graphs, and the
exact byte counts in ``ms.transfer_stats()`` and ``ms.placement_report()``."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops

F32 = 4  # bytes per float32 element


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((8, 5)).astype(np.float32),
            rng.standard_normal((5, 6)).astype(np.float32),
            rng.standard_normal(6).astype(np.float32))


def _run(matmul, add, relu, arrays, device=None):
    """relu(x @ w + b).sum() and the gradients of x, w and b."""
    x, w, b = (Tensor(a, device=device, requires_grad=True) for a in arrays)
    out = relu(add(matmul(x, w), b))
    loss = out.sum()
    loss.backward()
    return out, loss, (x, w, b)


def _row(report, prim):
    rows = [r for r in report if r["name"] == prim.name]
    assert len(rows) == 1, f"{prim.name} not listed once in the placement report"
    return rows[0]


def test_set_device_records_and_returns_self():
    add = ops.Add()
    assert add.primitive_target is None
    assert add.set_device("CPU") is add and add.primitive_target == "CPU"
    assert "target=CPU" in repr(add)
    mm = ops.MatMul()
    assert mm.add_prim_attr("primitive_target", "GPU") is mm and mm.primitive_target == "GPU"


@pytest.mark.host_default
def test_mixed_graph_matches_cpu_and_counts_exact_bytes(virtual_gpu):
    arrays = _data()
    mm, add, relu = ops.MatMul().set_device("CPU"), ops.Add().set_device("GPU"), ops.ReLU()
    out, loss, (x, w, b) = _run(mm, add, relu, arrays)

    # Read the counters before anything else is copied (asnumpy on the GPU is a copy too).
    stats = ms.transfer_stats()
    report = ms.placement_report()
    h_bytes = 8 * 6 * F32                     # x @ w, computed on the CPU, goes to the GPU for Add
    b_bytes = 6 * F32                         # b lives on the CPU and goes to the GPU for Add
    assert stats == {"host_to_device": h_bytes + b_bytes,      # forward: Add's two inputs
                     "device_to_host": h_bytes + b_bytes,      # backward: their gradients
                     "device_to_device": 0, "copies": 4}
    rows = {p: _row(report, p) for p in (mm, add, relu)}
    assert (rows[mm]["device"], rows[mm]["bytes_in"], rows[mm]["bytes_out"]) == ("CPU", 0, 0)
    assert (rows[add]["device"], rows[add]["bytes_in"], rows[add]["bytes_out"]) == \
        ("GPU:0", h_bytes + b_bytes, h_bytes + b_bytes)
    assert (rows[relu]["device"], rows[relu]["bytes_in"], rows[relu]["bytes_out"]) == ("GPU:0", 0, 0)
    assert rows[relu]["target"] is None and rows[add]["target"] == "GPU"
    assert out.device is virtual_gpu and loss.device is virtual_gpu
    assert x.grad.device.is_host and w.grad.device.is_host and b.grad.device.is_host

    ref_out, ref_loss, (rx, rw, rb) = _run(ops.MatMul(), ops.Add(), ops.ReLU(), arrays)
    np.testing.assert_allclose(out.asnumpy(), ref_out.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(loss.asnumpy(), ref_loss.asnumpy(), rtol=1e-6)
    for got, ref in ((x, rx), (w, rw), (b, rb)):
        assert got.grad.dtype == np.float32
        np.testing.assert_allclose(got.grad.asnumpy(), ref.grad.asnumpy(), rtol=1e-6)


def test_gpu_default_with_host_layer_copies_only_needed_gradients(virtual_gpu):
    """MindSpore's host-device tutorial: default GPU, MatMul and Add placed on the CPU."""
    ms.set_context(device_target="GPU")
    x_np, w_np, b_np = _data(1)
    x = Tensor(x_np)                                   # data: no gradient wanted
    w = Tensor(w_np, requires_grad=True)
    b = Tensor(b_np, requires_grad=True)
    assert x.device is virtual_gpu and w.device is virtual_gpu
    created = x.nbytes + w.nbytes + b.nbytes
    assert ms.transfer_stats()["host_to_device"] == created
    ms.reset_transfer_stats()

    mm, add = ops.MatMul().set_device("CPU"), ops.Add().set_device("CPU")
    relu = ops.ReLU()
    out = relu(add(mm(x, w), b))
    assert out.device.is_host                          # relu follows its input
    out.backward(np.ones((8, 6), np.float32))
    report = ms.placement_report()
    # forward: x, w and b go to the host; backward: only w's and b's gradients come back
    assert _row(report, mm)["bytes_in"] == x.nbytes + w.nbytes
    assert _row(report, mm)["bytes_out"] == w.nbytes
    assert _row(report, add)["bytes_in"] == b.nbytes and _row(report, add)["bytes_out"] == b.nbytes
    assert ms.transfer_stats()["device_to_host"] == x.nbytes + w.nbytes + b.nbytes
    assert ms.transfer_stats()["host_to_device"] == w.nbytes + b.nbytes
    assert w.grad.device is virtual_gpu and b.grad.device is virtual_gpu
    h = np.maximum(x_np @ w_np + b_np, 0)
    np.testing.assert_allclose(b.grad.asnumpy(), (h > 0).sum(axis=0), rtol=1e-6)


@pytest.mark.host_default
def test_dispatch_without_target_follows_inputs(virtual_gpu):
    add = ops.Add()
    g1, g2 = Tensor([1.0], device="GPU"), Tensor([2.0], device="GPU")
    assert add(g1, g2).device is virtual_gpu           # all inputs on the GPU: run there
    assert add(g1, 3.0).device is virtual_gpu          # numbers follow the tensor
    c = Tensor([1.0])
    assert add(c, g1).device.is_host                   # mixed: the default device (CPU) wins
    ms.set_context(device_target="GPU")
    assert add(c, g1).device is virtual_gpu            # ... whichever it is
    assert add(c, c).device.is_host                    # all on the CPU: stays there
    assert ops.Add()(1.0, 2.0).device is virtual_gpu   # no tensor at all: the default device


@pytest.mark.host_default
def test_tensor_to_row_in_report(virtual_gpu):
    x = Tensor(np.ones(10, np.float32), requires_grad=True)
    y = x.to("GPU")
    (y * 2.0).backward(np.ones(10, np.float32))
    row = [r for r in ms.placement_report() if r["name"] == "Tensor.to"]
    assert len(row) == 1 and row[0]["bytes_in"] == 40 and row[0]["bytes_out"] == 40
    assert row[0]["device"] == "GPU:0" and row[0]["calls"] == 1


def test_report_prints_a_table_and_totals(virtual_gpu):
    mm, add = ops.MatMul().set_device("CPU"), ops.Add().set_device("GPU")
    for _ in range(3):
        add(mm(Tensor(np.ones((2, 2), np.float32)), Tensor(np.ones((2, 2), np.float32))), 1.0)
    report = ms.placement_report()
    text = str(report)
    lines = text.splitlines()
    assert lines[0].split() == ["name", "device", "calls", "forward_ms", "backward_ms",
                                "bytes_in", "bytes_out"]
    assert set(lines[1]) <= {"-", " "}
    mm_line = next(line for line in lines if line.startswith(mm.name))
    add_line = next(line for line in lines if line.startswith(add.name))
    assert mm_line.split()[1:3] == ["CPU", "3"]
    assert add_line.split()[1:3] == ["GPU:0", "3"] and add_line.split()[-2:] == ["48", "0"]
    assert _row(report, add)["op"] == "Add" and _row(report, mm)["op"] == "MatMul"
    totals = report.by_device()
    assert totals["CPU"] >= 3 and totals["GPU:0"] >= 3


@pytest.mark.host_default
def test_each_primitive_instance_has_its_own_row(virtual_gpu):
    a, b = ops.Add(), ops.Add().set_device("GPU")
    a(Tensor([1.0]), 1.0)
    b(Tensor([1.0]), 1.0)
    report = ms.placement_report()
    assert a.name != b.name
    assert _row(report, a)["device"] == "CPU" and _row(report, b)["device"] == "GPU:0"
    a.instance_name = "encoder.add"
    assert _row(ms.placement_report(), a)["name"] == "encoder.add"


def test_reset_placement_stats():
    add = ops.Add()
    add(Tensor([1.0]), 2.0)
    assert _row(ms.placement_report(), add)["calls"] == 1
    ms.reset_placement_stats()
    assert all(r["name"] != add.name for r in ms.placement_report())
    assert add.calls == 0 and add.bytes_in == 0 and add.forward_time == 0.0
    add(Tensor([1.0]), 2.0)
    assert _row(ms.placement_report(), add)["calls"] == 1


def test_backward_time_is_recorded():
    mul = ops.Mul()
    x = Tensor([1.0, 2.0], requires_grad=True)
    mul(x, x).backward(np.ones(2, np.float32))
    row = _row(ms.placement_report(), mul)
    assert row["backward_ms"] > 0.0 and row["forward_ms"] > 0.0


@pytest.mark.host_default
def test_placement_inside_value_and_grad(virtual_gpu):
    w = Tensor(np.full((3, 2), 0.5, np.float32), requires_grad=True)
    mm = ops.MatMul().set_device("GPU")
    fn = ms.value_and_grad(lambda x: mm(x, w), None, [w])
    _, (gw,) = fn(Tensor(np.ones((4, 3), np.float32)))
    assert gw.device.is_host
    np.testing.assert_allclose(gw.asnumpy(), np.full((3, 2), 4.0))
    # x (48 B) and w (24 B) went over; only w's gradient (24 B) came back
    assert mm.bytes_in == 72 and mm.bytes_out == 24


@pytest.mark.parametrize("strategy", [((2, 1), (1, 4)), [[1, 2]], None])
def test_shard_records_a_valid_strategy(strategy):
    mm = ops.MatMul()
    assert mm.shard(strategy) is mm
    assert mm.in_strategy == (None if strategy is None else tuple(tuple(s) for s in strategy))
