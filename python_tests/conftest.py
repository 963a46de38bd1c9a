"""Shared pytest fixtures for the minitorch_dist test suite.

* every test starts and ends with ``device_target="CPU"`` (a test that switches the default
  device cannot leak it into the next one); ``MINITORCH_DIST_TEST_DEVICE=GPU`` starts every
  test not marked ``host_default`` on the GPU instead, to run the whole suite with the GPU as
  the default device;
* ``virtual_gpu`` turns on the emulated GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``) for one test
  and zeroes the transfer and placement counters, so byte counts can be asserted exactly;
* ``no_gpu`` makes sure neither a real nor a virtual GPU is visible;
* Hypothesis runs without deadlines and derandomized, so the suite is deterministic;
* every test leaves the process outside any communication world (``release()`` after it):
  a world left by one test would be the next test's (``init`` keeps the first world), and a
  process forked by a later test would inherit it;
* ``-n auto`` (pyproject's addopts) starts one pytest-xdist worker per usable core, at most
  ``MAX_WORKERS``: each MPI test starts ranks of its own, so more workers would only crowd
  the cores;
* a test that leaves the process ignoring Ctrl-C (SIGINT ignored at the C level, which
  ``signal.getsignal`` does not show) fails: every process the later tests start would
  inherit it, and a launcher started that way could not be interrupted.
"""
import os
import signal
import sys

import pytest

# `python -m pytest` from the repository root finds the package; plain `pytest` may not.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# The scripts under mpi_scripts/ run as MPI ranks; importing them for doctest collection
# would run their argument parsing and collectives in the pytest process.
collect_ignore = ["mpi_scripts"]

import minitorch_dist as ms  # noqa: E402
from minitorch_dist.backend import cupy_or_none  # noqa: E402

try:
    from hypothesis import settings
except ImportError:  # hypothesis is a test extra; tests that need it import-skip
    settings = None

if settings is not None:
    settings.register_profile("minitorch", deadline=None, derandomize=True, database=None,
                              print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "minitorch"))


MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """The worker count ``-n auto`` gives: the usable cores, 1 to ``MAX_WORKERS``."""
    from minitorch_dist.launch.mpiexec import usable_cores
    return min(MAX_WORKERS, usable_cores())


@pytest.fixture(autouse=True)
def _release_communication():
    """Every test leaves the process outside any communication world."""
    yield
    from minitorch_dist import communication
    if communication.GlobalComm.INITED:
        communication.release()


# The device new tensors start on in each test: "CPU", or "GPU" to run the suite with the
# GPU as the default device (a real one, or MINITORCH_DIST_VIRTUAL_GPU=1's).
TEST_DEVICE = os.environ.get("MINITORCH_DIST_TEST_DEVICE", "CPU")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "host_default: the test is about the CPU as the default device (host "
        "kernels, host naming and byte counts), so it starts there whatever "
        "MINITORCH_DIST_TEST_DEVICE says")
    if TEST_DEVICE not in ("CPU", "GPU"):
        raise pytest.UsageError(f"MINITORCH_DIST_TEST_DEVICE must be CPU or GPU, got {TEST_DEVICE!r}")


@pytest.fixture(autouse=True)
def _reset_device_target(request):
    """Every test starts with new tensors created on ``TEST_DEVICE`` (the CPU for a test
    marked ``host_default``), and leaves the process with them created on the CPU."""
    host = TEST_DEVICE == "CPU" or request.node.get_closest_marker("host_default") is not None
    ms.set_context(device_target="CPU" if host else TEST_DEVICE)
    yield
    ms.set_context(device_target="CPU")


def _sigint_ignored():
    """Whether the kernel ignores SIGINT for this process (Linux: /proc/self/status)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except OSError:
        pass
    return False


@pytest.fixture(autouse=True)
def _sigint_kept(request):
    """Fail the test after which SIGINT is ignored, and put the handler back."""
    before = _sigint_ignored()
    yield
    if not before and _sigint_ignored():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        pytest.fail(f"{request.node.nodeid} left SIGINT ignored in the pytest process; "
                    "the processes later tests start would inherit it", pytrace=False)


@pytest.fixture
def virtual_gpu(monkeypatch):
    """The emulated GPU for this test, with transfer and placement counters zeroed.

    Returns the ``Device`` for "GPU"; the environment variable is restored afterwards.
    """
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "1")
    ms.reset_transfer_stats()
    ms.reset_placement_stats()
    device = ms.get_device("GPU")
    assert device.virtual
    yield device
    ms.set_context(device_target="CPU")


@pytest.fixture
def no_gpu(monkeypatch):
    """No GPU at all: the virtual GPU is off; skipped where CuPy sees a real device."""
    monkeypatch.delenv("MINITORCH_DIST_VIRTUAL_GPU", raising=False)
    if cupy_or_none() is not None:
        pytest.skip("a real GPU is present, so 'GPU' is available")


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` unless CuPy sees a CUDA device."""
    if cupy_or_none() is not None:
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
