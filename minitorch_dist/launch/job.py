"""Run one job: a script on N MPI ranks, watched, reported, and cleaned up after.

    python -m minitorch_dist.run -n 4 [--timeout 600] [--oversubscribe] [--log-dir DIR] train.py --lr 0.1

runs ``mpiexec -n 4 <this python> train.py --lr 0.1`` with the flags this machine needs: the
``mpiexec`` installed by ``pip install "minitorch_dist[mpi]"`` (next to this interpreter, else
on PATH), ``--allow-run-as-root`` when running as root (containers), ``--oversubscribe`` when
N exceeds the cores, ``--bind-to none``, and one BLAS/OpenMP thread per rank unless the
environment already says otherwise (N ranks each starting all-core BLAS pools thrash).

How a job ends (docs/failures.md has the whole story):

* Each rank runs under ``minitorch_dist.launch.rank_runner``: a rank that dies of an
  uncaught exception ends the whole job (``MPI_Abort``) instead of leaving the others
  waiting, and a rank that leaves early without error while others wait in a collective is
  detected within a second or so (``watchdog``). Either way the launcher prints
  one report: the rank that failed first, its error and the last lines of its traceback,
  identical errors of other ranks folded into one line, and the directory that keeps every
  rank's full log (``rank.<N>.log``).
* ``--timeout`` (a positive number of seconds) kills the whole job and exits 124.
* SIGTERM, SIGHUP and Ctrl-C stop the whole job: one line, exit 128 + signal (130 for
  Ctrl-C). If the launcher itself is killed (SIGKILL), mpiexec gets SIGTERM from the kernel,
  the ranks notice within a second that the launcher is gone, and a guard process kills
  whatever is left of the job's session.
* A single-machine job is not reachable from the network: the ranks talk over shared
  memory (no TCP listeners) and Open MPI's daemon listens on loopback only
  (``network``). ``--hosts`` or ``--hostfile`` start ranks on several machines;
  ``--iface`` names the network that their traffic uses and that every daemon and rank
  listens on, on every machine (``remote``).

Otherwise the launcher returns mpiexec's code, which is non-zero when any rank failed.
``launch(n, argv, timeout)`` does it from Python (tests, notebooks); ``cli`` is the command
line, ``mpiexec`` builds the ``mpiexec`` command, ``multiprocess`` is SINGA's start without
MPI (it shares the job directories and ``wait_processes`` of this module).
"""
import importlib.util
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import report
from .mpiexec import (build_command, find_mpiexec, forwarded_variables, mpi_flavor,
                      rank_environment)
from .network import check_interfaces, job_environment, parse_hosts, read_hostfile
from .output import OutputDemux
from .relay import RecordRelay
from .teardown import (LAUNCHER_PID_VARIABLE, kill_job, launcher_identity,
                       parent_death_signal, start_guard, stop_guard)

__all__ = ["launch", "check_timeout", "wait_processes", "TIMEOUT_EXIT_CODE", "JOB_DIR_PREFIX",
           "KEPT_JOB_DIRS"]

TIMEOUT_EXIT_CODE = 124


def check_timeout(timeout):
    """``timeout`` as a positive finite float (None stays None); anything else is a ValueError.

    >>> check_timeout("2.5"), check_timeout(None)
    (2.5, None)
    """
    if timeout is None:
        return None
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        raise ValueError(f"--timeout must be a number of seconds, got {timeout!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"--timeout must be a positive finite number of seconds, got {timeout!r}"
                         " (leave it out for no timeout)")
    return value


class _Signalled(BaseException):
    """Raised in the launcher's main thread by its SIGTERM/SIGHUP handler."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def launch(n, argv, timeout=None, oversubscribe=False, env=None, mpiexec=None, log_dir=None,
           hosts=None, hostfile=None, interfaces=None, tag=None, rank0_only=False,
           **popen_kwargs):
    """Run ``argv`` (a script and its arguments) on ``n`` ranks; return the exit code.

    ``timeout`` (seconds, positive and finite) kills the whole job and returns 124. SIGTERM,
    SIGHUP and Ctrl-C (SIGINT) stop the whole job too (exit 128 + the signal's number, 130
    for Ctrl-C), and ranks end by themselves when the launcher is killed outright. A failed
    job gets one report on stderr (``report.format_report``); every rank's full output is
    kept in ``log_dir`` (default: a new temporary directory, removed when the job succeeds).
    ``hosts`` ("a,b" or a list) / ``hostfile`` start ranks on other machines, over the
    network ``interfaces`` named (e.g. "eth0"); without them the job stays on this machine
    and its ranks talk over shared memory (they open no TCP port), and Open MPI's daemon
    listens on loopback only; with ``interfaces`` every listener of the job is on those
    networks (``network.job_environment``). Extra keyword arguments go to
    ``subprocess.Popen``; ``stdout``/``stderr`` may be files (prefer them to pipes).
    ``tag`` starts each line the ranks print with "[RANK] " (default: when the output goes
    to a terminal); ``rank0_only`` shows only rank 0's standard output (every rank's
    standard error is still shown, every line is still in the logs).
    """
    timeout = check_timeout(timeout)
    if interfaces:
        interfaces = check_interfaces(interfaces)
    if hosts:
        parse_hosts(hosts)          # the command line's checks, for callers of launch() too
    if hostfile:
        read_hostfile(hostfile)
    mpiexec = find_mpiexec() if mpiexec is None else mpiexec
    flavor = mpi_flavor(mpiexec)
    out_sink, err_sink = popen_kwargs.pop("stdout", None), popen_kwargs.pop("stderr", None)
    if err_sink == subprocess.STDOUT:
        err_sink = sys.stdout if out_sink is None else out_sink
    demux = flavor == "openmpi" and all(sink not in (subprocess.PIPE, subprocess.DEVNULL)
                                        for sink in (out_sink, err_sink))
    runner = importlib.util.find_spec("mpi4py") is not None
    remote = bool(hosts or hostfile)
    keep_logs = log_dir is not None
    if keep_logs:
        os.makedirs(log_dir, exist_ok=True)
        job_dir = log_dir
    else:
        _prune_job_dirs(tempfile.gettempdir())
        job_dir = tempfile.mkdtemp(prefix=JOB_DIR_PREFIX)
    session_base = None
    try:    # a job that cannot start (bad ranks or hosts, no mpiexec) leaves no folder behind
        rank_env = job_environment(rank_environment(env), flavor, remote=remote,
                                   interfaces=interfaces)
        rank_env["MINITORCH_DIST_JOB_DIR"] = os.path.abspath(job_dir)
        rank_env[LAUNCHER_PID_VARIABLE] = launcher_identity()
        session_base = fresh_session_base(rank_env, flavor)
        command = build_command(n, argv, mpiexec, flavor=flavor, oversubscribe=oversubscribe,
                                abort_on_error=runner, tag_output=demux, hosts=hosts,
                                hostfile=hostfile, interfaces=interfaces,
                                forward=forwarded_variables(rank_env) if remote else ())
        process = subprocess.Popen(command, env=rank_env, start_new_session=True,
                                   stdout=subprocess.PIPE if demux else out_sink,
                                   stderr=subprocess.PIPE if demux else err_sink,
                                   preexec_fn=parent_death_signal(), **popen_kwargs)
    except BaseException:
        if session_base is not None:
            shutil.rmtree(session_base, ignore_errors=True)
        _remove_job_dir(job_dir, keep_logs)
        raise
    guard = start_guard(process.pid)
    relay = RecordRelay(job_dir, stop=lambda: threading.Thread(
        target=kill_job, args=(process,), daemon=True).start())
    if tag is None:
        tag = out_sink is None and sys.stdout.isatty()
    streams = OutputDemux(job_dir, out_sink, err_sink, relay=relay, tag=tag,
                          rank0_only=rank0_only) if demux else None
    if streams is not None:
        streams.start(process)
    previous = _install_signal_handlers()
    code, ended_by = None, None
    try:
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            ended_by = "timeout"
        except _Signalled as caught:
            ended_by = caught.signum
        except KeyboardInterrupt:
            ended_by = signal.SIGINT
        if ended_by is not None:
            if previous is not None:      # a second Ctrl-C must not cut the clean-up short
                for signum in previous:
                    signal.signal(signum, signal.SIG_IGN)
            kill_job(process)
    finally:
        _restore_signal_handlers(previous)
        if streams is not None:
            streams.join()
        relay.close()
        stop_guard(guard)
        if session_base is not None:
            shutil.rmtree(session_base, ignore_errors=True)
    if relay.stopped and ended_by is None:
        code = 1        # the relay ended a job that could never finish, as a rank would
    return _finish(n, process, code, ended_by, timeout, job_dir, keep_logs, streams)


def _finish(n, process, code, ended_by, timeout, job_dir, keep_logs, streams):
    """Report the job's end once on stderr and return the exit code."""
    records = report.read_records(job_dir)
    if streams is not None:
        streams.append_tracebacks(records)
        # MPI's messages are the echo of a failure a rank explained; otherwise they are news
        streams.release_mpi_messages(show=not any(r.get("kind") != "exit" for r in records))
    if ended_by == "timeout":
        print(f"minitorch_dist.run: the job did not finish within {timeout} s and was killed"
              + report.left_early_text(records, n) + f"; logs: {job_dir}",
              file=sys.stderr, flush=True)
        return TIMEOUT_EXIT_CODE
    if ended_by is not None:
        name = signal.Signals(ended_by).name
        what = "interrupted (Ctrl-C)" if ended_by == signal.SIGINT else f"got {name}"
        print(f"minitorch_dist.run: {what}: stopped all {n} ranks", file=sys.stderr, flush=True)
        _remove_job_dir(job_dir, keep_logs)
        return 128 + int(ended_by)
    code = 128 - code if code < 0 else code
    if code == 0:
        _remove_job_dir(job_dir, keep_logs)
        return 0
    mpi_text = streams.untagged_text() if streams is not None else ""
    print(report.format_report(records, code, job_dir, mpi_text), file=sys.stderr, flush=True)
    return code


JOB_DIR_PREFIX = "minitorch_dist-job-"
KEPT_JOB_DIRS = 20


def _prune_job_dirs(folder, keep=KEPT_JOB_DIRS):
    """Remove all but the ``keep`` newest log directories of failed jobs in ``folder``
    (those the launcher made itself; a ``--log-dir`` is never touched)."""
    try:
        found = [os.path.join(folder, name) for name in os.listdir(folder)
                 if name.startswith(JOB_DIR_PREFIX)]
        found.sort(key=os.path.getmtime, reverse=True)
    except OSError:
        return
    for path in found[keep:]:
        shutil.rmtree(path, ignore_errors=True)


SESSION_BASE_VARIABLES = ("PRTE_MCA_prte_tmpdir_base", "PRTE_MCA_prte_local_tmpdir_base")


def fresh_session_base(env, flavor):
    """Give Open MPI's session files (``ompi.<mpiexec's pid>``) a new, empty folder of this
    job's (set in ``env``; returned, for removal after the job), unless ``env`` names one.

    By default they go to ``<temp>/ompi.<pid>``, where an mpiexec that was killed leaves
    them. A later mpiexec that gets the same pid (pids wrap at 32768 on many machines) then
    cannot open its listener and the job fails at start ("The PMIx server's listener thread
    failed to start"). The prefix is short: PMIx's socket paths inside must stay under
    108 bytes. On several machines this is the launcher's machine's folder only.

    >>> env = {}
    >>> base = fresh_session_base(env, "openmpi")
    >>> env["PRTE_MCA_prte_local_tmpdir_base"] == base and os.listdir(base) == []
    True
    >>> os.rmdir(base); fresh_session_base({}, "mpich") is None
    True
    """
    if flavor != "openmpi" or any(env.get(name) for name in SESSION_BASE_VARIABLES):
        return None
    base = tempfile.mkdtemp(prefix="mtd-mpi-")
    env["PRTE_MCA_prte_local_tmpdir_base"] = base
    return base


def _remove_job_dir(job_dir, keep_logs):
    if not keep_logs:
        shutil.rmtree(job_dir, ignore_errors=True)


def _install_signal_handlers():
    """SIGTERM/SIGHUP raise ``_Signalled`` in the main thread (SIGINT raises
    KeyboardInterrupt already); returns the previous handlers, None off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise _Signalled(signum)
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, handler)
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    return previous


def _restore_signal_handlers(previous):
    for signum, handler in (previous or {}).items():
        signal.signal(signum, handler)


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
