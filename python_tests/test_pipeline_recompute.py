"""Recompute and memory offload inside pipeline stages, on 2 MPI ranks (2 stages).

``Cell.recompute()`` on a staged cell and on cells inside a stage: the gradients are
bit-identical with and without it, and each stage's saved-activation bytes (the runner's
peak) fall. ``memory_offload="ON"`` on the virtual GPU: the same gradients, and the first
stage's peak device memory falls (its layers' saved activations wait on the host)."""
import re
import sys
import textwrap

import pytest

from mpi_jobs import launch, needs_mpi

_SCRIPT = textwrap.dedent("""
    import hashlib
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import communication, nn

    communication.init()
    rank = communication.get_rank()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                 pipeline_stages=2)

    class Block(nn.Cell):
        def __init__(self, width, depth):
            super().__init__()
            self.layers = nn.SequentialCell([
                nn.SequentialCell([nn.Dense(width, width), nn.Tanh(),
                               nn.Dense(width, width), nn.Tanh()])
                for _ in range(depth)])

        def construct(self, x):
            return self.layers(x)

    class Net(nn.Cell):
        def __init__(self, recompute):
            super().__init__()
            self.first, self.second = Block(32, 2), Block(32, 2)
            if recompute:
                self.first.recompute()               # a whole stage
                for pair in self.second.layers:      # cells inside a stage
                    pair.recompute()
            self.first.pipeline_stage, self.second.pipeline_stage = 0, 1

        def construct(self, x):
            return self.second(self.first(x))

    def run(recompute):
        ms.set_seed(7)
        net = Net(recompute)
        pipe = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 4)
        params = [p for p in net.trainable_params()]
        rng = np.random.default_rng(0)
        x = ms.Tensor(rng.standard_normal((16, 32)).astype(np.float32))
        y = ms.Tensor(rng.standard_normal((16, 32)).astype(np.float32))
        _, grads = ms.value_and_grad(pipe, None, params)(x, y)
        digest = hashlib.sha256()
        for g in grads:
            digest.update(np.ascontiguousarray(g.asnumpy()).tobytes())
        return digest.hexdigest()[:16], pipe.stats["peak_activation_bytes"]

    plain = run(False)
    recomputed = run(True)
    print(f"RANK {rank} plain={plain[0]} {plain[1]} recomputed={recomputed[0]} {recomputed[1]}",
          flush=True)
    communication.release()
""")


@needs_mpi
@pytest.mark.skipif(sys.platform == "win32", reason="MPI jobs run on POSIX")
def test_recompute_in_stages_keeps_gradients_and_lowers_saved_activations(tmp_path):
    script = tmp_path / "pipeline_recompute.py"
    script.write_text(_SCRIPT)
    done, _ = launch(2, str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    found = dict(re.findall(r"RANK (\d) (.*)", done.stdout))
    assert sorted(found) == ["0", "1"], done.stdout
    for line in found.values():
        plain, plain_bytes, recomputed, recomputed_bytes = re.match(
            r"plain=(\w+) (\d+) recomputed=(\w+) (\d+)", line).groups()
        assert recomputed == plain                          # bit-identical gradients
        assert int(recomputed_bytes) <= int(plain_bytes) // 2


_OFFLOAD_SCRIPT = textwrap.dedent("""
    import hashlib
    import sys
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import communication, nn
    from minitorch_dist.backend import get_device

    communication.init()
    rank = communication.get_rank()
    ms.set_context(device_target="GPU")
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                 pipeline_stages=2)
    if sys.argv[1] == "on":
        ms.set_context(memory_offload="ON")
    budget = get_device("GPU").memory

    def layers(n):
        cells = []
        for _ in range(n):
            cells += [nn.Dense(64, 64), nn.ReLU()]
        return nn.SequentialCell(cells)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.first, self.second = layers(3), layers(2)
            self.first.pipeline_stage, self.second.pipeline_stage = 0, 1

        def construct(self, x):
            return self.second(self.first(x))

    ms.set_seed(7)
    net = Net()
    pipe = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 4)
    params = net.trainable_params()
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.standard_normal((256, 64)).astype(np.float32))
    y = ms.Tensor(rng.standard_normal((256, 64)).astype(np.float32))
    grad_fn = ms.value_and_grad(pipe, None, params)
    grad_fn(x, y)                   # parameters placed, buffers made
    budget.peak = start = budget.used
    _, grads = grad_fn(x, y)
    digest = hashlib.sha256()
    for g in grads:
        digest.update(np.ascontiguousarray(g.asnumpy()).tobytes())
    print(f"RANK {rank} peak={budget.peak - start} grads={digest.hexdigest()[:16]}", flush=True)
    communication.release()
""")


def _offload_run(tmp_path, switch):
    script = tmp_path / "pipeline_offload.py"
    script.write_text(_OFFLOAD_SCRIPT)
    done, _ = launch(2, str(script), switch, env={"MINITORCH_DIST_VIRTUAL_GPU": "1",
                                                   "MINITORCH_DIST_VIRTUAL_GPU_MEMORY": "1GiB"})
    assert done.returncode == 0, done.stdout + done.stderr
    found = {int(r): (int(p), g) for r, p, g in
             re.findall(r"RANK (\d) peak=(\d+) grads=(\w+)", done.stdout)}
    assert sorted(found) == [0, 1], done.stdout
    return found


@needs_mpi
@pytest.mark.skipif(sys.platform == "win32", reason="MPI jobs run on POSIX")
def test_memory_offload_in_stages_keeps_gradients_and_lowers_device_peak(tmp_path):
    plain, offloaded = _offload_run(tmp_path, "off"), _offload_run(tmp_path, "on")
    for rank in (0, 1):
        assert offloaded[rank][1] == plain[rank][1]          # bit-identical gradients
    assert offloaded[0][0] < 0.75 * plain[0][0]              # the first stage's device peak
