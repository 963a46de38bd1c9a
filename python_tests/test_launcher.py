"""The launcher ``python -m minitorch_dist.run``: the pure command builder and argument parser,
mpiexec discovery, and real launches (exit codes, environment, timeout kill)."""
import importlib.util
import os
import stat
import subprocess
import sys
import time

import pytest

from minitorch_dist.launch.cli import parse_args
from minitorch_dist.launch.job import TIMEOUT_EXIT_CODE, launch
from minitorch_dist.launch.mpiexec import build_command, find_mpiexec, mpi_flavor, rank_environment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mpi_available():
    try:
        find_mpiexec()
    except FileNotFoundError:
        return False
    return importlib.util.find_spec("mpi4py") is not None


needs_mpiexec = pytest.mark.skipif(not _mpi_available(), reason="needs mpiexec and mpi4py")


def test_the_run_shim_gives_the_launchers_own_objects():
    """``from minitorch_dist.run import spawn, wait_processes, ...`` (users, examples) keeps
    working: the shim re-exports each public name of the modules that define it."""
    import minitorch_dist.run as shim
    from minitorch_dist.launch import cli, job, mpiexec, multiprocess
    homes = {"main": cli, "parse_args": cli, "launch": job, "check_timeout": job,
             "wait_processes": job, "TIMEOUT_EXIT_CODE": job, "spawn": multiprocess,
             "find_mpiexec": mpiexec, "mpi_flavor": mpiexec, "build_command": mpiexec,
             "rank_environment": mpiexec, "MALLOC_VARIABLES": mpiexec,
             "THREAD_VARIABLES": mpiexec}
    assert sorted(shim.__all__) == sorted(homes)
    for name, module in homes.items():
        assert getattr(shim, name) is getattr(module, name), name


# ---- the command builder (pure) ---------------------------------------------------------------
def test_root_adds_allow_run_as_root_only_for_open_mpi():
    as_root = build_command(2, ["t.py"], "mpiexec", "py", is_root=True, cores=8)
    as_user = build_command(2, ["t.py"], "mpiexec", "py", is_root=False, cores=8)
    assert "--allow-run-as-root" in as_root and "--allow-run-as-root" not in as_user
    mpich = build_command(2, ["t.py"], "mpiexec", "py", flavor="mpich", is_root=True, cores=1)
    assert "--allow-run-as-root" not in mpich and "--oversubscribe" not in mpich


def test_oversubscribe_when_ranks_exceed_cores_or_asked():
    def flags(n, cores, asked=False):
        return build_command(n, ["t.py"], "mpiexec", "py", is_root=False, cores=cores,
                                 oversubscribe=asked)
    assert "--oversubscribe" not in flags(2, 2)
    assert "--oversubscribe" in flags(3, 2)
    assert "--oversubscribe" in flags(1, 2, asked=True)


def test_command_shape_and_python_runner():
    command = build_command(4, ["train.py", "--lr", "0.1"], "/x/mpiexec", "/py",
                                is_root=False, cores=4)
    assert command == ["/x/mpiexec", "--bind-to", "none", "--mca", "btl", "self,sm", "-n", "4",
                       "/py", "-m", "minitorch_dist.launch.rank_runner",
                       "train.py", "--lr", "0.1"]
    plain = build_command(1, ["-c", "pass"], "m", "/py", is_root=False, cores=1,
                              abort_on_error=False)
    assert plain[-3:] == ["/py", "-c", "pass"]
    assert build_command(1, ["t.py"], "m", is_root=False, cores=1)[8] == sys.executable


@pytest.mark.parametrize("n, argv, pattern", [(0, ["t.py"], "positive int"),
                                              ("2", ["t.py"], "positive int"),
                                              (2, [], "nothing to run")])
def test_command_builder_rejects_bad_input(n, argv, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_command(n, argv, "mpiexec", "py")


def test_rank_environment_pins_threads_and_yields_the_core_unless_set():
    env = rank_environment({"OMP_NUM_THREADS": "3", "HOME": "/h"})
    assert env == {"OMP_NUM_THREADS": "3", "HOME": "/h", "OPENBLAS_NUM_THREADS": "1",
                   "MKL_NUM_THREADS": "1", "OMPI_MCA_mpi_yield_when_idle": "1",
                   "MALLOC_MMAP_THRESHOLD_": str(256 << 20),
                   "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    assert rank_environment({"OMPI_MCA_mpi_yield_when_idle": "0"})[
        "OMPI_MCA_mpi_yield_when_idle"] == "0"
    assert rank_environment({"MALLOC_TRIM_THRESHOLD_": "0"})["MALLOC_TRIM_THRESHOLD_"] == "0"
    assert "MALLOC_TRIM_THRESHOLD_" not in rank_environment({"MINITORCH_DIST_SYSTEM_MALLOC": "1"})


def test_parse_args_stops_at_the_script():
    assert parse_args(["-np", "3", "--oversubscribe", "s.py", "--timeout", "1"]) == \
        (3, None, True, False, ["s.py", "--timeout", "1"])
    assert parse_args(["--dry-run", "-n", "1", "-m", "pkg"]) == \
        (1, None, False, True, ["-m", "pkg"])
    with pytest.raises(SystemExit, match="need -n N and a script"):
        parse_args(["s.py"])
    with pytest.raises(SystemExit, match="bad value 'x' for --timeout"):
        parse_args(["-n", "2", "--timeout", "x", "s.py"])
    with pytest.raises(SystemExit, match="bad value '0' for -n"):
        parse_args(["-n", "0", "s.py"])


# ---- finding mpiexec and its flavour ----------------------------------------------------------
def _fake_executable(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        handle.write(f"#!/bin/sh\necho '{text}'\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_find_mpiexec_prefers_the_environment_prefix(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "bin")
    fake = _fake_executable(str(tmp_path / "bin"), "mpiexec", "mpiexec (Open MPI) 5.0.0")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert find_mpiexec() == fake
    assert mpi_flavor(fake) == "openmpi"
    hydra = _fake_executable(str(tmp_path), "hydra", "HYDRA build details:")
    assert mpi_flavor(hydra) == "mpich"


def test_missing_mpiexec_names_the_pip_extra(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r'pip install "minitorch_dist\[mpi\]"'):
        find_mpiexec()


# ---- real launches -----------------------------------------------------------------------------
def _launcher(*args, timeout=60, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "minitorch_dist.run", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


@needs_mpiexec
def test_exit_code_is_forwarded_and_threads_are_pinned():
    code = ("import os, sys; from mpi4py import MPI; rank = MPI.COMM_WORLD.Get_rank(); "
            "print(rank, os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'], "
            "flush=True); MPI.COMM_WORLD.Barrier(); "  # both lines out before rank 1 fails
            "sys.exit(3 if rank == 1 else 0)")
    done = _launcher("-n", "2", "--timeout", "50", "-c", code, env_extra={"OMP_NUM_THREADS": "2"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert sorted(done.stdout.split()) == sorted("0 1 2 1 1 2".split())


@needs_mpiexec
def test_timeout_kills_the_whole_job(tmp_path):
    pid_file = tmp_path / "pids"
    code = (f"import os, time; open({str(pid_file)!r} + str(os.getpid()), 'w').close(); "
            "time.sleep(60)")
    start = time.monotonic()
    # long enough for both ranks to start on a loaded machine (3 s was not, in a full suite)
    done = _launcher("-n", "2", "--timeout", "10", "-c", code)
    assert done.returncode == TIMEOUT_EXIT_CODE
    assert "did not finish within 10.0 s" in done.stderr
    assert time.monotonic() - start < 40
    pids = [int(p.name[len("pids"):]) for p in tmp_path.iterdir()]
    assert len(pids) == 2
    for pid in pids:  # every rank is gone (a zombie has no /proc/<pid>/cmdline content)
        assert not os.path.exists(f"/proc/{pid}") or not open(f"/proc/{pid}/cmdline").read()


@needs_mpiexec
def test_launch_as_a_function(tmp_path):
    log = tmp_path / "log.txt"
    with open(log, "w") as out:
        code = launch(2, ["-c", "print('hello')"], timeout=50, stdout=out,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert code == 0
    assert log.read_text().split() == ["hello", "hello"]


@needs_mpiexec
def test_dry_run_prints_the_command():
    done = _launcher("--dry-run", "-n", "3", "train.py", "--epochs", "1")
    assert done.returncode == 0
    words = done.stdout.split()
    assert words[-6:] == [sys.executable, "-m", "minitorch_dist.launch.rank_runner",
                          "train.py", "--epochs", "1"]
    assert "--bind-to" in words and ("--oversubscribe" in words) == (3 > (os.cpu_count() or 1))
    assert ("--allow-run-as-root" in words) == (os.geteuid() == 0)


def test_glibc_thresholds_are_tuned_at_import_unless_opted_out():
    """A plain ``python script.py`` gets the launcher's allocator setting through mallopt
    (page faults on every reuse of a large freed block otherwise); opt-outs are honoured."""
    import sys as _sys
    from minitorch_dist.backend.allocator import tune_malloc
    assert tune_malloc({"MINITORCH_DIST_SYSTEM_MALLOC": "1"}) is False
    assert tune_malloc({"MALLOC_MMAP_THRESHOLD_": "1"}) is False
    if _sys.platform.startswith("linux"):
        import ctypes.util
        if ctypes.util.find_library("c") and "musl" not in ctypes.util.find_library("c"):
            assert tune_malloc({}) is True
