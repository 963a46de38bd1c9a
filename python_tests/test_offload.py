"""Memory offload (``set_context(memory_offload="ON")``, ``set_offload_context``): saved
activations wait on the host, optimizer states live there; gradients are bit-identical, the
virtual GPU's peak falls, and a model that overflows its cap trains with offload on."""
import json
import sys
import textwrap

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.offload import get_offload_context, reset_offload_context, set_offload_context

from mpi_jobs import run_process


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.set_context(memory_offload="OFF")
    reset_offload_context()


_JOB = textwrap.dedent("""
    import json, numpy as np, minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.backend import get_device
    from minitorch_dist.backend.memory import DeviceOutOfMemoryError
    ms.set_context(device_target="GPU")
    budget = get_device("GPU").memory

    def net():
        ms.set_seed(1)
        layers = []
        for _ in range(12):
            layers += [nn.Dense(64, 64), nn.ReLU()]
        return nn.WithLossCell(nn.SequentialCell(layers), nn.MSELoss())

    x = ms.Tensor(np.ones((512, 64), np.float32))
    y = ms.Tensor(np.linspace(-1, 1, 512 * 64, dtype=np.float32).reshape(512, 64))
    out = {}
    for switch in ("OFF", "ON"):
        ms.set_context(memory_offload=switch)
        n = net()
        opt = nn.Adam(n.trainable_params(), 1e-3)
        grad_fn = ms.value_and_grad(n, None, n.trainable_params())
        budget.peak = budget.used
        start = budget.used
        try:
            for _ in range(2):
                loss, grads = grad_fn(x, y)
                opt(grads)
            out[switch] = {"peak": budget.peak - start,
                           "grad_sum": [float(np.abs(g.asnumpy()).sum()) for g in grads],
                           "params": [float(p.asnumpy().sum()) for p in n.trainable_params()],
                           "state_device": str(opt.states_of(n.trainable_params()[0])[0].device)}
        except DeviceOutOfMemoryError:
            out[switch] = "out of memory"
    print(json.dumps(out))
""")


def _virtual_gpu(capacity):
    done, _ = run_process([sys.executable, "-c", _JOB], timeout=120,
                          env={"MINITORCH_DIST_VIRTUAL_GPU": "1",
                               "MINITORCH_DIST_VIRTUAL_GPU_MEMORY": capacity})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_offload_lowers_the_device_peak_with_identical_training():
    roomy = _virtual_gpu("1GiB")
    off, on = roomy["OFF"], roomy["ON"]
    assert on["peak"] < 0.5 * off["peak"]
    assert on["grad_sum"] == off["grad_sum"]          # the same arrays, copied and back
    assert on["params"] == off["params"]
    assert (off["state_device"], on["state_device"]) == ("GPU:0", "CPU")
    # a cap between the two peaks (past the 24 parameters, charged at their first use)
    cap = 24 * (64 * 64 + 64) * 4 + (on["peak"] + off["peak"]) // 2
    tight = _virtual_gpu(str(cap))
    assert tight["OFF"] == "out of memory"
    assert tight["ON"]["params"] == off["params"]


def test_on_the_host_offload_changes_nothing():
    ms.set_seed(2)
    net = nn.WithLossCell(nn.SequentialCell([nn.Dense(4, 4), nn.ReLU()]), nn.MSELoss())
    x = ms.Tensor(np.ones((3, 4), np.float32))
    _, plain = ms.value_and_grad(net, None, net.trainable_params())(x, x)
    ms.set_context(memory_offload="ON")
    assert ms.get_context("memory_offload") == "ON"
    _, grads = ms.value_and_grad(net, None, net.trainable_params())(x, x)
    for a, b in zip(grads, plain):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_offload_context_keys_are_checked():
    set_offload_context(offload_config={"offload_param": "cpu", "auto_offload": False,
                                        "offload_cpu_size": "512GB"})
    assert get_offload_context()["auto_offload"] is False
    assert get_offload_context()["memory_offload"] == "OFF"
    with pytest.raises(NotImplementedError, match="offload_param='disk'"):
        set_offload_context(offload_config={"offload_param": "disk"})
    with pytest.raises(ValueError, match="unknown key 'offload_gpu'"):
        set_offload_context(offload_config={"offload_gpu": True})
    with pytest.raises(TypeError, match="auto_offload must be True or False"):
        set_offload_context(offload_config={"auto_offload": "yes"})
    with pytest.raises(ValueError, match="offload_cpu_size"):
        set_offload_context(offload_config={"offload_cpu_size": "lots"})
    with pytest.raises(TypeError, match="enable_aio must be a bool"):
        set_offload_context(offload_config={"enable_aio": 1})
    set_offload_context(offload_config={"enable_aio": False, "host_mem_block_size": "1GB"})
    with pytest.raises(TypeError, match="offload_config must be a dict"):
        set_offload_context(offload_config=["cpu"])


def test_memory_offload_values_are_checked():
    with pytest.raises(ValueError, match="memory_offload must be 'ON' or 'OFF'"):
        ms.set_context(memory_offload="on")
    assert ms.get_context("memory_offload") == "OFF"
