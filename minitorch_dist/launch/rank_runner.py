"""What each rank of ``python -m minitorch_dist.run`` executes: the user's script, watched.

    python -m minitorch_dist.launch.rank_runner script.py [args...]
    python -m minitorch_dist.launch.rank_runner -m package.module [args...]
    python -m minitorch_dist.launch.rank_runner -c "code" [args...]

Like ``python -m mpi4py`` (which it replaces in the launcher) it runs the program as
``__main__`` and, when the program dies of an uncaught exception, ends the whole MPI job with
``MPI_Abort`` instead of leaving the other ranks waiting. In addition:

* the exception and its traceback go to a failure record in the job directory
  (``watchdog.record_failure``) instead of this rank's stderr: the launcher prints one report
  for the whole job (which rank failed first, its error, the last lines of its traceback) and
  keeps every rank's full log;
* a program that ends without an exception (or with ``sys.exit``) leaves an exit record, from
  which ranks still waiting in a collective learn that it will never come (see ``watchdog``);
* when the launcher itself disappears (killed with SIGKILL), the rank ends too: a thread
  checks every second that the launcher's process still exists (ranks on the launcher's
  machine; the others end with their daemon, which loses the launcher's);
* in a multi-machine job with ``--iface``, the bind shim keeps MPI's listeners on the named
  networks (``network``), and is released right after ``MPI_Init`` (``shim_release``),
  so the user's own sockets bind where the user says.

* under ``--compute-slots K`` the rank takes one of the job's K compute slots before the
  program starts, waits for others off the slot, and gives it back when the program ends
  (``compute_slots``);

* a usage error of the program's ``argparse`` parser (a mistyped option, the wrong ``-n``
  for the script) goes to the failure record too: the launcher's report shows its message
  and usage line once, instead of N copies of the usage block and "SystemExit: exit code 2".

Without a job directory (started by hand) it prints the traceback like Python does.
"""
import argparse
import os
import runpy
import sys
import threading
import time
import traceback

from . import compute_slots, watchdog
from .bind_shim import MODE_VARIABLE
from .shim_release import release_after_mpi_init
from .teardown import LAUNCHER_PID_VARIABLE, local_launcher_pid

__all__ = ["main", "run_program", "LAUNCHER_PID_VARIABLE"]
_USAGE = "usage: python -m minitorch_dist.launch.rank_runner script.py | -m module | -c code [args...]"


def run_program(argv):
    """Run ``argv`` (``script args``, ``-m module args`` or ``-c code args``) as ``__main__``,
    with ``sys.argv`` and ``sys.path[0]`` as plain ``python`` would set them."""
    if not argv:
        raise SystemExit(_USAGE)
    # ``python -m <this module>`` put the working directory first on sys.path; replace it
    # with what ``python script.py`` / ``python -c`` / ``python -m`` would have put there.
    if argv[0] == "-c" and len(argv) > 1:
        sys.argv = ["-c"] + list(argv[2:])
        sys.path[0] = ""
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        exec(compile(argv[1], "<string>", "exec"), namespace)
    elif argv[0] == "-m" and len(argv) > 1:
        sys.argv = [argv[1]] + list(argv[2:])
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        script = argv[0]
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")


def _user_traceback(exc):
    """``exc`` with the runner's own frames (this module, runpy) cut from its traceback."""
    tb = exc.__traceback__
    skipped = (os.path.abspath(__file__), os.path.abspath(runpy.__file__))
    while tb is not None and (tb.tb_frame.f_code.co_filename in skipped
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    if tb is not None:
        exc.__traceback__ = tb
    return exc


class _UsageExit(SystemExit):
    """An ``argparse`` usage error of the program, kept for the launcher's report."""

    def __init__(self, usage, message):
        super().__init__(2)
        self.usage, self.message = usage, message


def _report_usage_errors():
    """Under the launcher, ``ArgumentParser.error`` raises ``_UsageExit`` instead of printing
    the usage block on every rank (a parser class with its own ``error`` keeps it)."""
    def error(parser, message):
        raise _UsageExit(parser.format_usage().rstrip(), f"{parser.prog}: error: {message}")
    argparse.ArgumentParser.error = error


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    if not watchdog.launched():   # under the launcher its report says it once
        print(code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def say_failed(stream, rank, exc):
    """The rank's one failure line, in one write. ``print`` writes the line and its newline
    apart: MPI_Abort's banner, which follows at once, could then land between them, so the
    launcher saw the banner's first rule glued to this line and showed the rest of it."""
    stream.write(f"minitorch_dist: rank {rank} failed: {type(exc).__name__}: {exc}".rstrip()
                 + "\n")
    stream.flush()


def _abort(code=1):
    """End the whole job: MPI_Abort when MPI runs in this process, else exit now."""
    sys.stdout.flush()
    sys.stderr.flush()
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.COMM_WORLD.Abort(code)
    os._exit(code)


def _watch_launcher(pid):
    """End this rank when the launcher process ``pid`` is gone (it was SIGKILLed)."""
    def loop():
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(137)
            except PermissionError:
                pass
    threading.Thread(target=loop, name="minitorch_dist-launcher-watch", daemon=True).start()


def main(argv=None):
    """Run the program; record how it ended; abort the job when it raised."""
    argv = sys.argv[1:] if argv is None else argv
    watchdog.install()            # the program's communicators are watched for early exits
    launcher = local_launcher_pid(os.environ.get(LAUNCHER_PID_VARIABLE))
    if launcher is not None:
        _watch_launcher(launcher)
    try:
        if os.environ.get(MODE_VARIABLE, "").startswith("net:"):
            release_after_mpi_init()     # MPI_Init opens its listeners under the shim
        if watchdog.launched():
            _report_usage_errors()
        compute_slots.install()
        try:
            run_program(argv)
        finally:
            compute_slots.uninstall()      # MPI_Finalize (at exit) waits for the others
    except _UsageExit as exc:
        watchdog.record_failure(message=f"{exc.message}\n{exc.usage}", kind="usage",
                                fold=exc.message)
        watchdog.record_exit(2)
        sys.stdout.flush()
        raise SystemExit(2)
    except SystemExit as exc:
        code = _exit_code(exc.code)
        if code != 0 and watchdog.launched():
            message = exc.code if isinstance(exc.code, str) else f"exit code {code}"
            watchdog.record_failure(message=f"SystemExit: {message}", kind="system_exit")
        watchdog.record_exit(code)
        sys.stdout.flush()
        raise SystemExit(code)
    except BaseException as exc:       # KeyboardInterrupt included: the job must end
        _user_traceback(exc)
        if watchdog.launched():
            watchdog.record_failure(exc)
            say_failed(sys.stderr, watchdog.world_rank(), exc)
        else:
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        _abort(1)
    watchdog.record_exit(0)


if __name__ == "__main__":
    main()
