"""SINGA-style ResNet and Xception (``examples/singa/resnet.py``, ``xceptionnet.py``) trained
the way SINGA's autograd examples train them, under one process, ``mpiexec -n 2`` and
SINGA's multiprocessing launch.

SINGA's data-parallel semantics: every rank runs the whole model on its share of the batch
(batch norm uses that share's statistics and keeps its own running statistics), the
gradients are averaged, every rank applies the same SGD step. So a 2-rank job equals, not
one process on the whole batch, but one process playing two replicas
(``singa_cnn_dist.py --replicas 2``): the tests compare every state of rank 0 (parameters
and running statistics) with it, and the MPI job with the multiprocessing launch.
"""
import os
import re
import sys

import numpy as np

from minitorch_dist import random as ms_random
import pytest

from mpi_jobs import REPO, SCRIPTS, launch, needs_mpi, run_process
from minitorch_dist.singa import autograd, opt, tensor

sys.path.insert(0, os.path.join(REPO, "examples", "singa"))
import resnet  # noqa: E402
import xceptionnet  # noqa: E402

SCRIPT = os.path.join(SCRIPTS, "singa_cnn_dist.py")
MODELS = ["resnet", "xception"]


def small(name):
    if name == "resnet":
        return resnet.resnet18(num_classes=10, width=4)
    return xceptionnet.Xception(num_classes=10, widths=(4, 8, 8, 8, 8, 8, 8, 8), middle=1)


@pytest.mark.parametrize("name", MODELS)
def test_one_process_trains_every_parameter_and_learns_a_fixed_batch(name):
    ms_random.set_seed(0)        # the initial weights must not depend on the tests run before
    net = small(name)
    r = np.random.default_rng(0)
    x = tensor.from_numpy(r.normal(size=(8, 3, 32, 32)).astype(np.float32))
    y = tensor.from_numpy(r.integers(0, 10, 8).astype(np.int32))
    sgd = opt.SGD(lr=0.05, momentum=0.9)
    autograd.training = True
    try:
        net(x)
        start = {k: v.asnumpy().copy() for k, v in net.get_params().items()}
        losses = []
        for _ in range(12):
            loss = autograd.softmax_cross_entropy(net(x), y)
            losses.append(float(tensor.to_numpy(loss)[0]))
            sgd(loss)
    finally:
        autograd.training = False
    assert losses[-1] < 0.5 * losses[0], losses
    still = [k for k, v in net.get_params().items() if np.array_equal(v.asnumpy(), start[k])]
    assert not still, still       # downsample (closure) and registered list layers included
    if name == "resnet":
        assert any("downsample" in k for k in start)


def _states(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _assert_same(a, b, tol):
    assert sorted(a) == sorted(b)
    worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert worst <= tol, worst


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """The one-process reference with two replicas, per model."""
    out = {}
    for name in MODELS:
        path = str(tmp_path_factory.mktemp("ref") / f"{name}.npz")
        done, _ = run_process([sys.executable, SCRIPT, name, path, "--replicas", "2"],
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        out[name] = (_states(path), done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("name", MODELS)
def test_mpiexec_2_equals_one_process_with_two_replicas(name, replicas, tmp_path):
    path = str(tmp_path / "mpi.npz")
    done, _ = launch(2, SCRIPT, name, path)
    assert done.returncode == 0, done.stdout + done.stderr
    reference, line = replicas[name]
    assert done.stdout.strip().splitlines()[-1] == line        # the same losses, printed
    _assert_same(_states(path), reference, 1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_multiprocessing_launch_equals_one_process_with_two_replicas(name, replicas, tmp_path):
    path = str(tmp_path / "mp.npz")
    done, _ = run_process([sys.executable, SCRIPT, name, path, "--multiprocess", "2"],
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    reference, line = replicas[name]
    assert done.stdout.strip().splitlines()[-1] == line
    _assert_same(_states(path), reference, 1e-6)


THREADS = os.path.join(SCRIPTS, "singa_threads.py")
UNSET = {name: "" for name in ("MINITORCH_DIST_NUM_THREADS", "OMP_NUM_THREADS",
                               "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def test_multiprocessing_launch_runs_each_process_on_one_blas_thread():
    done, _ = run_process([sys.executable, THREADS], timeout=60, env=UNSET)
    assert done.returncode == 0, done.stdout + done.stderr
    found = sorted(re.findall(r"rank (\d+) before (\d+) after (\d+)", done.stdout))
    assert [rank for rank, _, _ in found] == ["0", "1"], done.stdout
    assert all(after == "1" for _, _, after in found), done.stdout
    # a count the user chose is kept
    done, _ = run_process([sys.executable, THREADS], timeout=60, env={**UNSET,
                                                                      "OMP_NUM_THREADS": "3"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("before 3 after 3") == 2, done.stdout
