"""DistOpt across real processes (``mpi_scripts/dist_opt_check.py``): N MPI ranks that start
from different seeds must train exactly like one process on the full batch, and a rank that
raises must end the job non-zero well within its timeout. SINGA's multiprocessing launch
(a ``UniqueId`` handed to ``multiprocessing`` children) is checked the same way.

Every subprocess runs under a timeout; the launcher gets its own, shorter one.
"""
import os
import re
import sys

import pytest

from mpi_jobs import LAUNCH_TIMEOUT, SCRIPTS, launch, needs_mpi, run_process

SCRIPT = os.path.join(SCRIPTS, "dist_opt_check.py")


def _run(command):
    return run_process(command)


def mpi_job(n, *args):
    return launch(n, SCRIPT, *args)


def _assert_matches_one_process(done, world, tol=1e-5):
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    match = re.search(rf"DIST_OPT_CHECK OK world={world} steps=\d+ max_diff=(\S+)", done.stdout)
    assert match, output
    assert float(match.group(1)) <= tol


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_fp32_training_on_n_ranks_equals_one_process_on_the_full_batch(n):
    done, _ = mpi_job(n, "--steps", "6")
    _assert_matches_one_process(done, n)


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("n, args, tol", [
    (2, ["--option", "fp16", "--tol", "1e-3"], 1e-3),        # float16 summed by MPI user ops
    (4, ["--option", "sparseTopK", "--spars", "1.0"], 1e-5),  # everything sent: dense result
])
def test_other_options_on_real_ranks(n, args, tol):
    done, _ = mpi_job(n, *args)
    _assert_matches_one_process(done, n, tol)


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("n, option", [(2, "fp32"), (4, "fp32"), (2, "sparseTopK")])
def test_gradients_written_into_buckets_still_equal_one_process_to_1e6(n, option):
    """``backward_and_*`` write the gradients into the buckets during backward; with 256-byte
    buckets several of them are launched before backward ends (blocking over MPI). The
    result must stay within 1e-6 of one process on the full batch."""
    done, _ = mpi_job(n, "--option", option, "--spars", "1.0", "--steps", "8",
                      "--buff-size", "256", "--tol", "1e-6")
    _assert_matches_one_process(done, n, 1e-6)


@pytest.mark.mpi
@needs_mpi
def test_a_rank_that_raises_ends_the_job_nonzero_within_the_timeout():
    done, elapsed = mpi_job(4, "--fail-rank", "2")
    assert done.returncode not in (0, 124), done.stdout + done.stderr   # not killed by timeout
    assert "deliberate failure on rank 2" in done.stderr
    assert "DIST_OPT_CHECK OK" not in done.stdout
    assert elapsed < LAUNCH_TIMEOUT / 2


def test_singa_multiprocessing_launch_with_a_unique_id():
    done, _ = _run([sys.executable, SCRIPT, "--multiprocess", "2", "--timeout", "100"])
    _assert_matches_one_process(done, 2)


def test_multiprocessing_launch_fails_fast_when_a_rank_raises():
    done, elapsed = _run([sys.executable, SCRIPT, "--multiprocess", "3", "--fail-rank", "1",
                          "--timeout", "100"])
    assert done.returncode != 0 and "DIST_OPT_CHECK FAILED" in done.stderr
    assert "deliberate failure on rank 1" in done.stderr
    assert elapsed < 60
