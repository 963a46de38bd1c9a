"""``MINITORCH_DIST_TEST_DEVICE`` (conftest.py): the suite run with the GPU as the default
device starts every test there, except those marked ``host_default``."""
import os
import subprocess
import sys

import pytest

import minitorch_dist as ms

HERE = os.path.dirname(os.path.abspath(__file__))


def test_probe_an_unmarked_test_starts_on_the_test_device():
    assert ms.Tensor([1.0]).device.kind == os.environ.get("MINITORCH_DIST_TEST_DEVICE", "CPU")


@pytest.mark.host_default
def test_probe_a_host_default_test_starts_on_the_cpu():
    assert ms.Tensor([1.0]).device.is_host


def _run_probes(device):
    env = dict(os.environ, MINITORCH_DIST_VIRTUAL_GPU="1", MINITORCH_DIST_TEST_DEVICE=device)
    this = os.path.join(HERE, os.path.basename(__file__))
    probes = [f"{this}::{name}" for name in ("test_probe_an_unmarked_test_starts_on_the_test_device",
                                             "test_probe_a_host_default_test_starts_on_the_cpu")]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", *probes],
                          env=env, cwd=os.path.dirname(HERE), capture_output=True, text=True,
                          timeout=120)


def test_a_run_with_the_gpu_as_default_device_starts_the_probes_where_they_say():
    done = _run_probes("GPU")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_another_test_device_is_refused_with_what_is_expected():
    done = _run_probes("TPU")
    assert done.returncode != 0
    assert "MINITORCH_DIST_TEST_DEVICE must be CPU or GPU, got 'TPU'" in done.stdout + done.stderr
