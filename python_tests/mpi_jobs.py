"""Shared helpers for tests that start real processes: MPI jobs through the launcher, and
plain subprocesses, each under a timeout so that no test can hang.

``needs_mpi`` skips a test where mpi4py or an ``mpiexec`` is missing; child processes get the
repository on ``PYTHONPATH`` and one BLAS thread each (2 cores are shared by all ranks).
"""
import importlib.util
import os
import subprocess
import sys
import time

import pytest

from minitorch_dist.run import THREAD_VARIABLES, rank_environment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "python_tests", "mpi_scripts")
JOB_TIMEOUT = 150              # the subprocess is killed after this
LAUNCH_TIMEOUT = JOB_TIMEOUT - 30   # the launcher ends the job itself after this (exit 124)


def mpi_missing():
    """Why MPI jobs cannot run here, or None."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed"
    from minitorch_dist.run import find_mpiexec
    try:
        find_mpiexec()
    except FileNotFoundError:
        return "no mpiexec on this machine"
    return None


needs_mpi = pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))


def child_env(extra=None):
    env = rank_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    for var in THREAD_VARIABLES:
        env[var] = "1"     # even where the caller's environment asks for more
    env.update(extra or {})
    return env


def run_process(command, timeout=JOB_TIMEOUT, env=None):
    """Run ``command``; returns (completed process, elapsed seconds)."""
    start = time.monotonic()
    done = subprocess.run(command, env=child_env(env), capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)
    return done, time.monotonic() - start


def launch(n, script, *args, launcher_timeout=LAUNCH_TIMEOUT, env=None):
    """``python -m minitorch_dist.run -n N --timeout T script args``; (process, seconds)."""
    return run_process([sys.executable, "-m", "minitorch_dist.run", "-n", str(n), "--timeout",
                        str(launcher_timeout), script, *args],
                       timeout=launcher_timeout + 30, env=env)
