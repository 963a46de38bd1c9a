"""Apache SINGA's own ``examples/cnn`` and ``examples/mlp``, run with only their imports
changed and their data swapped for small local files (``examples/singa/run_singa_examples.py``).

Needs a checkout of apache/singa: set ``SINGA_SOURCE=/path/to/singa``. SINGA's scripts
print one-element arrays with ``%f``, which NumPy 2.4 refuses; with NumPy >= 2.4 installed,
set ``SINGA_PYTHON`` to an interpreter with NumPy < 2.4 that can import minitorch_dist (a
venv made with ``--system-site-packages`` plus ``numpy==2.3.5``). Skipped otherwise.

The fast scripts must run (exit 0, the seed's last line printed); the multiprocessing
launch of ``train_multiprocess.py`` must take at most 1.2x the epoch time of
``train_mpi.py`` under ``mpiexec -n 2`` (one BLAS thread per process in both).
"""
import os
import re
import subprocess
import sys

import pytest

from mpi_jobs import REPO, needs_mpi

SOURCE = os.environ.get("SINGA_SOURCE")
PYTHON = os.environ.get("SINGA_PYTHON", sys.executable)
RUNNER = os.path.join(REPO, "examples", "singa", "run_singa_examples.py")


def _numpy_ok():
    try:
        version = subprocess.run([PYTHON, "-c", "import numpy; print(numpy.__version__)"],
                                 capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    major, minor = (int(v) for v in version.split(".")[:2])
    return (major, minor) < (2, 4)


pytestmark = [
    pytest.mark.skipif(not SOURCE or not os.path.isdir(SOURCE),
                       reason="set SINGA_SOURCE to a checkout of apache/singa"),
    pytest.mark.skipif(bool(SOURCE) and not _numpy_ok(),
                       reason="SINGA's examples need NumPy < 2.4 to print (set SINGA_PYTHON)"),
]

FAST = (r"autograd/(mnist|sparsification)|mlp/|train_cnn.py (cnn|mlp) |train_mpi.py cnn|"
        r"train_multiprocess")
ROW = re.compile(r"^rc=(\d+)\s+([\d.]+)s\s+(.*?)\s+\| (.*)$", re.M)


@pytest.fixture(scope="module")
def fast_runs(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("singa"))
    done = subprocess.run([sys.executable, RUNNER, "--singa", SOURCE, "--python", PYTHON,
                           "--quick", "--only", FAST, "--timeout", "300", "--work", work],
                          capture_output=True, text=True, timeout=1800)
    rows = {cmd.strip(): (int(rc), float(sec), last) for rc, sec, cmd, last in
            ROW.findall(done.stdout)}
    return done, rows, work


@needs_mpi
def test_the_fast_examples_run_with_only_their_imports_changed(fast_runs):
    done, rows, _ = fast_runs
    assert len(rows) == 15, done.stdout + done.stderr
    failed = {cmd: row for cmd, row in rows.items() if row[0] != 0}
    assert not failed, done.stdout
    for cmd, (_, _, last) in rows.items():
        if "mlp/" in cmd:
            assert "training loss" in last, (cmd, last)
        else:
            assert last.startswith("Evaluation accuracy"), (cmd, last)


def _epoch_seconds(python, folder, argv, mpi):
    prefix = [python, "-m", "minitorch_dist.run", "-n", "2", "--timeout", "300"] if mpi \
        else [python]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "MINITORCH_DIST_NUM_THREADS"):
        env.pop(name, None)                 # the launchers choose the thread counts
    done = subprocess.run(prefix + argv, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=330)
    assert done.returncode == 0, done.stdout + done.stderr
    times = [float(t) for t in re.findall(r"Elapsed Time = ([\d.]+)s", done.stdout)]
    return sum(times[1:])                   # the first epoch warms the caches up


@needs_mpi
def test_multiprocessing_launch_is_within_1_2x_of_mpiexec(fast_runs):
    _, _, work = fast_runs
    folder = os.path.join(work, "examples", "cnn")
    mpi = min(_epoch_seconds(PYTHON, folder, ["train_mpi.py", "cnn", "mnist", "-m", "4"], True)
              for _ in range(2))
    multi = min(_epoch_seconds(PYTHON, folder, ["train_multiprocess.py", "cnn", "mnist", "-m",
                                                "4", "-w", "2"], False) for _ in range(2))
    assert multi <= 1.2 * mpi, (multi, mpi)
