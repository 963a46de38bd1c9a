"""SINGA's multiprocessing start (``python script.py 2``) with the launcher's manners.

``spawn(target, world_size)`` runs ``target(rank, world_size, ...)`` in ``world_size``
processes on this machine, without MPI: a failing process writes a failure record instead
of its traceback, the others are stopped, and one report is printed, as for a job of
``python -m minitorch_dist.run``. ``from minitorch_dist.run import spawn`` is the short name.
"""
import math
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import traceback

from . import report, watchdog
from .job import (JOB_DIR_PREFIX, TIMEOUT_EXIT_CODE, _remove_job_dir, check_timeout,
                  wait_processes)

__all__ = ["spawn"]


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
    start = time.monotonic()
    previous = _interruptible()
    try:
        for process in processes:    # inside the try: a Ctrl-C while starting stops those started
            process.start()
        codes = wait_processes(processes, math.inf if timeout is None else timeout)
    except KeyboardInterrupt:
        wait_processes([p for p in processes if p.pid is not None], 0)
        print(f"minitorch_dist.run: interrupted (Ctrl-C): stopped all {world_size} processes",
              file=sys.stderr, flush=True)
        _remove_job_dir(job_dir, keep_logs)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
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


def _interruptible():
    """Make SIGINT raise KeyboardInterrupt in the main thread for the job's lifetime, as
    ``python -m minitorch_dist.run`` does, whatever this process inherited: Python leaves
    SIGINT alone when it starts with it ignored (a background job of a script, or a parent
    that ignored it), and the job could then not be stopped. Returns the handler to put back
    (None off the main thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.default_int_handler)


def _spawned(target, rank, world_size, args, kwargs, job_dir):
    """A process of ``spawn``: run ``target``, record a failure instead of a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # Ctrl-C is the parent's business
    os.environ[watchdog.JOB_DIR_VARIABLE] = job_dir
    watchdog.install()            # the target's communicators are watched, as a rank's are
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
