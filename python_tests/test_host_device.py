"""Host/device heterogeneity (issue #8, items 2 and 5): embedding tables that stay on the
host, the virtual GPU's memory capacity, the placement report's names and optimizer
updates, and MindSpore's INFO line for a primitive placed off the backend."""
import logging
import re
import os
import subprocess
import sys

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.backend import DeviceOutOfMemoryError, cupy_or_none, parse_size
from minitorch_dist.placement import gradient_nbytes, record_update

F32 = 4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def small_gpu(monkeypatch):
    """A virtual GPU with a 64 KiB capacity, the context's default device for this test."""
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "1")
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU_MEMORY", "64KiB")
    ms.reset_transfer_stats()
    ms.reset_placement_stats()
    gpu = ms.get_device("GPU")
    assert gpu.virtual and gpu.memory is not None
    ms.set_context(device_target="GPU")
    yield gpu
    ms.set_context(device_target="CPU")


def _wide_model(vocab, dim, target="CPU"):
    emb = nn.EmbeddingLookup(vocab, dim, target=target)
    fc = nn.Dense(dim, 1)
    return emb, fc


# ---- only the looked-up rows cross, never the table ----------------------------------------

def test_host_table_sends_only_looked_up_rows_and_their_gradients(virtual_gpu):
    ms.set_context(device_target="GPU")
    ms.set_seed(3)
    vocab, dim, lr = 500, 16, 0.1
    emb, fc = _wide_model(vocab, dim)
    table = emb.embedding_table
    table_array, table_bytes = table.data, vocab * dim * F32
    assert table.device.is_host and fc.weight.device is virtual_gpu
    opt = nn.SGD(emb.trainable_params() + fc.trainable_params(), lr)
    step = ms.value_and_grad(lambda i: fc(emb(i)).sum(), None, opt.parameters)
    rng = np.random.default_rng(0)
    for batch in ([[1, 2, 3], [4, 5, 5]], rng.integers(0, vocab, (8, 4)), [[7]]):
        ids_np = np.asarray(batch)
        ids = ms.Tensor(ids_np, device="CPU")           # ids come from the host data pipeline
        before = table.asnumpy().copy()
        w = fc.weight.asnumpy().reshape(-1)              # d loss / d row, for every occurrence
        ms.reset_transfer_stats()
        _, grads = step(ids)
        opt(grads)
        stats = ms.transfer_stats()
        rows_bytes = ids_np.size * dim * F32
        # forward: the looked-up rows go to the GPU for the Dense; backward: their gradient rows
        # come back. Nothing else crosses, and never the table.
        assert stats == {"host_to_device": rows_bytes, "device_to_host": rows_bytes,
                         "device_to_device": 0, "copies": 2}
        assert rows_bytes < table_bytes
        assert isinstance(grads[0], ms.RowTensor) and grads[0].device.is_host
        # the table stayed where it was and only the looked-up rows changed, by -lr * count * w
        assert table.device.is_host and table.data is table_array
        counts = np.bincount(ids_np.reshape(-1), minlength=vocab)
        expected = before - lr * counts[:, None] * w[None, :]
        np.testing.assert_allclose(table.asnumpy(), expected, rtol=1e-5, atol=1e-6)
        untouched = counts == 0
        np.testing.assert_array_equal(table.asnumpy()[untouched], before[untouched])
    report = {r["name"]: r for r in ms.placement_report()}
    assert report["lookup"]["device"] == "CPU" and report["lookup"]["bytes_in"] == 0
    assert report["matmul"]["device"] == "GPU:0"


# ---- the virtual GPU's capacity --------------------------------------------------------------

@pytest.mark.parametrize("text, size", [("512MiB", 512 * 2 ** 20), ("2GB", 2 * 10 ** 9),
                                        ("1.5GiB", 3 * 2 ** 29), ("4096", 4096), (" 64 kib ", 65536)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "12XB", "-5MiB", "0", ""])
def test_parse_size_refuses_what_is_not_a_size(text):
    with pytest.raises(ValueError, match="MINITORCH_DIST_VIRTUAL_GPU_MEMORY=.*expected a number"
                                         "|must be positive"):
        parse_size(text)


def test_bad_capacity_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "1")
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU_MEMORY", "half a gig")
    with pytest.raises(ValueError, match=r"MINITORCH_DIST_VIRTUAL_GPU_MEMORY='half a gig' is not a "
                                         r"memory size.*'512MiB'"):
        ms.get_device("GPU")


def test_capacity_gives_its_own_device_and_none_without_it(virtual_gpu, monkeypatch):
    assert virtual_gpu.memory is None and virtual_gpu.memory_stats() is None
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU_MEMORY", "1MiB")
    limited = ms.get_device("GPU")
    assert limited is not virtual_gpu and limited.memory_stats() == {
        "capacity": 2 ** 20, "in_use": 0, "peak": 0}
    assert ms.get_device("CPU").memory_stats() is None


def test_allocation_past_capacity_names_capacity_request_and_remedy(small_gpu):
    with pytest.raises(DeviceOutOfMemoryError) as info:
        nn.EmbeddingLookup(1000, 32, target="DEVICE")      # 128000 bytes > 64 KiB
    err = info.value
    assert isinstance(err, MemoryError)
    assert (err.requested, err.capacity, err.device) == (1000 * 32 * F32, 65536, "GPU:0")
    message = str(err)
    for part in ("out of memory", "float32 array of shape (1000, 32)", "128000 bytes",
                 "capacity is 64.0 KiB", "MINITORCH_DIST_VIRTUAL_GPU_MEMORY=64KiB",
                 'nn.EmbeddingLookup(vocab_size, embedding_size, target="CPU")'):
        assert part in message, (part, message)
    # nothing was allocated or left counted
    assert small_gpu.memory_stats()["in_use"] == 0


def test_capacity_counts_copies_and_primitive_outputs_and_frees_them(small_gpu):
    x = ms.Tensor(np.ones((64, 1), np.float32))            # 256 bytes on the GPU
    assert small_gpu.memory.used == 256
    outer = ops.MatMul(transpose_b=True)
    y = outer(x, x)                                          # 64 x 64 float32: 16 KiB
    assert small_gpu.memory.used == 256 + 64 * 64 * F32
    view = y.reshape(4096)                                   # a view: no new memory
    assert small_gpu.memory.used == 256 + 64 * 64 * F32
    del y, view
    assert small_gpu.memory.used == 256
    big = ms.Tensor(np.ones((200, 1), np.float32))
    with pytest.raises(DeviceOutOfMemoryError, match=r"float32 array of shape \(200, 200\).*"
                                                     r"needs 156.2 KiB \(160000 bytes\)"):
        outer(big, big)
    assert small_gpu.memory.used == 256 + 800
    assert small_gpu.memory.peak >= 256 + 64 * 64 * F32


def test_table_bigger_than_the_device_trains_host_side(small_gpu):
    ms.set_seed(5)
    vocab, dim, fields, batch = 4000, 16, 4, 32               # a 250 KiB table, a 64 KiB GPU
    assert vocab * dim * F32 > small_gpu.memory.capacity
    with pytest.raises(DeviceOutOfMemoryError):
        _wide_model(vocab, dim, target="DEVICE")
    emb, fc = _wide_model(vocab, dim, target="CPU")
    rng = np.random.default_rng(1)
    truth = rng.standard_normal(vocab).astype(np.float32)    # each id's share of the target
    loss_fn = nn.MSELoss()
    opt = nn.SGD(emb.trainable_params() + fc.trainable_params(), 0.05)
    reduce = ops.ReduceSum()

    def forward(ids, target):
        return loss_fn(reduce(fc(emb(ids)), (1, 2)), target)

    step = ms.value_and_grad(forward, None, opt.parameters)
    losses = []
    for _ in range(150):
        ids_np = rng.integers(0, 200, (batch, fields))        # the head of the vocabulary
        target = ms.Tensor(truth[ids_np].sum(axis=1))
        loss, grads = step(ms.Tensor(ids_np, device="CPU"), target)
        opt(grads)
        losses.append(float(loss.asnumpy()))
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])
    assert emb.embedding_table.device.is_host
    assert small_gpu.memory_stats()["peak"] < vocab * dim * F32   # the table never went there


def test_host_table_needs_sparse_gradients_as_in_mindspore():
    with pytest.raises(ValueError, match=r"target='CPU' needs sparse=True.*When target is CPU, "
                                         r"embedding_lookup must be sparse"):
        nn.EmbeddingLookup(10, 4, target="CPU", sparse=False)
    assert nn.EmbeddingLookup(10, 4, target="DEVICE", sparse=False).sparse is False


@pytest.mark.skipif(cupy_or_none() is None, reason="needs CuPy and a GPU")
def test_cupy_out_of_memory_is_the_same_clear_error(monkeypatch):
    import cupy
    monkeypatch.delenv("MINITORCH_DIST_VIRTUAL_GPU", raising=False)
    monkeypatch.setenv("MINITORCH_DIST_GPU_MEMORY", "1MiB")
    try:
        gpu = ms.get_device("GPU")
        with pytest.raises(DeviceOutOfMemoryError, match=r"8000000 bytes.*capacity is 1.0 MiB.*"
                                                         r"MINITORCH_DIST_GPU_MEMORY=1MiB.*target=\"CPU\""):
            ms.Tensor(np.ones(2_000_000, np.float32), device=gpu)
        column = ms.Tensor(np.ones((1000, 1), np.float32), device=gpu)        # 4 KB
        with pytest.raises(DeviceOutOfMemoryError, match=r"allocation \(in MatMul-op\d+\)"):
            ops.MatMul(transpose_b=True)(column, column)                        # 4 MB
    finally:
        cupy.get_default_memory_pool().set_limit(size=0)


# ---- the report: scope and type, optimizer updates -----------------------------------------

class _Dense(nn.Cell):
    def __init__(self):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.full((3, 2), 0.5, np.float32)))
        self.matmul = ops.MatMul().set_device("CPU")
        self.add = ops.Add()

    def construct(self, x):
        return self.add(self.matmul(x, self.weight), 1.0)


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layer1 = _Dense()

    def construct(self, x):
        return self.layer1(x)


def test_report_names_scope_and_type(virtual_gpu):
    net = _Net()
    net(ms.Tensor(np.ones((4, 3), np.float32), device="GPU"))
    unnamed = ops.Mul()
    unnamed(ms.Tensor([1.0]), 2.0)
    report = ms.placement_report()
    rows = {r["name"]: r for r in report}
    assert rows["layer1.matmul"]["display"] == "layer1.matmul (MatMul)"
    assert rows["layer1.matmul"]["op"] == "MatMul" and rows["layer1.matmul"]["device"] == "CPU"
    assert rows["layer1.add"]["display"] == "layer1.add (Add)"
    assert rows[unnamed.name]["display"] == unnamed.name            # "Mul-op12": says its type
    lines = str(report).splitlines()
    line = next(line for line in lines if line.startswith("layer1.matmul (MatMul)"))
    assert line.split()[2:4] == ["CPU", "1"]


def test_record_update_lists_optimizer_updates_with_their_device(virtual_gpu):
    add = ops.Add()
    add(ms.Tensor([1.0]), 1.0)
    record_update("SGD.embedding_table", ms.get_device("CPU"), 0.002, 96)
    record_update("SGD.fc.weight", "GPU", 0.001, np.int64(64))
    record_update("SGD.embedding_table", "CPU", 0.001, 96)
    report = ms.placement_report()
    assert report.updates == [
        {"name": "SGD.embedding_table", "device": "CPU", "calls": 2,
         "update_ms": pytest.approx(3.0), "bytes": 192},
        {"name": "SGD.fc.weight", "device": "GPU:0", "calls": 1,
         "update_ms": pytest.approx(1.0), "bytes": 64}]
    text = str(report)
    primitives, updates = text.split("\n\n")
    assert primitives.splitlines()[0].split()[0] == "name"
    assert updates.splitlines()[0].split() == ["update", "device", "calls", "update_ms", "bytes"]
    assert updates.splitlines()[2].split() == ["SGD.embedding_table", "CPU", "2", "3.000", "192"]
    assert updates.splitlines()[3].split()[:3] == ["SGD.fc.weight", "GPU:0", "1"]
    ms.reset_placement_stats()
    assert ms.placement_report().updates == [] and "\n\n" not in str(ms.placement_report())
    rows = ms.RowTensor(ms.Tensor(np.array([3, 7, 3])), ms.Tensor(np.ones((3, 16), np.float32)),
                        (10 ** 6, 16))
    assert gradient_nbytes(rows) == 3 * 8 + 3 * 16 * F32          # the rows, never the table
    assert gradient_nbytes(ms.Tensor(np.ones((5, 2), np.float32))) == 40
    assert gradient_nbytes(None) == 0
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        record_update("", "CPU", 0.0, 0)
    with pytest.raises(ValueError, match="nbytes must be a non-negative int, got -1"):
        record_update("SGD.w", "CPU", 0.0, -1)
    with pytest.raises(ValueError, match="unknown device target 'TPU'"):
        record_update("SGD.w", "TPU", 0.0, 0)


# ---- MindSpore's INFO line: primitive target does not match backend ------------------------

_LINE = "primitive target does not match backend: {}, primitive_target: {}, node name: {}"


def _mismatch_lines(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "minitorch_dist" and "does not match backend" in r.getMessage()]


def test_target_mismatch_is_logged_once_per_primitive(virtual_gpu, caplog):
    caplog.set_level(logging.INFO, logger="minitorch_dist")
    ms.set_context(device_target="GPU")
    net = _Net()                                         # layer1.matmul on the CPU
    on_gpu = ops.Add().set_device("GPU")                 # matches the backend: no line
    follows = ops.Mul()                                  # no target: no line
    for _ in range(3):
        out = net(ms.Tensor(np.ones((4, 3), np.float32)))
        follows(on_gpu(out, 1.0), 2.0)
    ms.reset_placement_stats()
    net(ms.Tensor(np.ones((4, 3), np.float32)))          # counters reset: still not again
    assert _mismatch_lines(caplog) == [_LINE.format("GPU", "CPU", "layer1.matmul (MatMul)")]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "minitorch_dist")
    caplog.clear()
    ms.set_context(device_target="CPU")
    on_gpu.set_device("GPU")                             # a new target: checked at its next call
    on_gpu(ms.Tensor([1.0]), 1.0)
    unnamed = ops.Sub().set_device("GPU")
    unnamed(ms.Tensor([1.0]), 1.0)
    assert _mismatch_lines(caplog) == [_LINE.format("CPU", "GPU", on_gpu.name),
                                       _LINE.format("CPU", "GPU", unnamed.name)]


def test_no_line_below_info(virtual_gpu, caplog):
    caplog.set_level(logging.WARNING, logger="minitorch_dist")
    ms.set_context(device_target="GPU")
    ops.Add().set_device("CPU")(ms.Tensor([1.0]), 1.0)
    assert _mismatch_lines(caplog) == []


def test_set_context_log_level(virtual_gpu, caplog):
    logger = logging.getLogger("minitorch_dist")
    try:
        ms.set_context(log_level="INFO", device_target="GPU")
        assert logger.level == logging.INFO and ms.get_context("log_level") == "INFO"
        add = ops.Add().set_device("CPU")
        add(ms.Tensor([1.0]), 1.0)
        assert _mismatch_lines(caplog) == [_LINE.format("GPU", "CPU", add.name)]
        with pytest.raises(ValueError, match=r"log_level must be one of \['DEBUG', 'INFO', "
                                             r"'WARNING', 'ERROR'\] or None, got 'LOUD'"):
            ms.set_context(log_level="LOUD")
    finally:
        ms.set_context(log_level=None)
    assert logger.level == logging.NOTSET and ms.get_context("log_level") is None


def test_glog_v_1_prints_the_line_seed_000_searches_for():
    """Seed 000: 'set the log level to INFO by adding export GLOG_v=1 ... search for CPU'."""
    script = ("import minitorch_dist as ms\nfrom minitorch_dist import ops\n"
              "ms.set_context(device_target='GPU')\n"
              "add = ops.Add().set_device('CPU')\nadd.instance_name = 'layer1.add'\n"
              "for _ in range(3): add(ms.Tensor([1.0]), 1.0)\n")
    env = dict(os.environ, GLOG_v="1", MINITORCH_DIST_VIRTUAL_GPU="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "CPU" in line]
    assert lines == ["[INFO] minitorch_dist: " + _LINE.format("GPU", "CPU", "layer1.add (Add)")]


def test_example_table_too_big_for_the_device_trains_on_the_host():
    env = dict(os.environ, MINITORCH_DIST_VIRTUAL_GPU="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MINITORCH_DIST_VIRTUAL_GPU_MEMORY", None)
    done = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "host_embedding_table.py"),
                           "--steps", "120", "--vocab", "100000", "--capacity", "16MiB"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "target='DEVICE': GPU:0 (virtual) is out of memory" in out
    assert "capacity is 16.0 MiB" in out and "(25600000 bytes)" in out
    losses = [float(x) for x in re.findall(r"step +\d+  loss ([0-9.]+)", out)]
    assert losses[-1] < 0.8 * losses[0], out
    assert "embedding.lookup (EmbeddingLookup)  CPU" in out
    rows, labels = 256 * 8 * 64 * 4, 256 * 4
    assert f"host->device {rows + labels} bytes" in out and f"device->host {rows} bytes" in out


@pytest.mark.host_default
def test_optimizer_updates_appear_in_the_report_with_their_device():
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import nn
    ms.reset_placement_stats()
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    for _ in range(2):
        step(ms.Tensor(np.ones((4, 3), np.float32)), ms.Tensor(np.zeros((4, 2), np.float32)))
    rows = {row["name"]: row for row in ms.placement_report().updates}
    assert rows["SGD.weight"]["calls"] == 2 and str(rows["SGD.weight"]["device"]) == "CPU"
    assert rows["SGD.bias"]["bytes"] == 2 * 2 * 4
