"""Tearing a launched job down, whatever happens to the launcher.

* ``parent_death_signal()``: a ``preexec_fn`` asking the kernel to SIGTERM mpiexec when the
  launcher dies (Linux ``prctl``);
* ``start_guard(session)``/``stop_guard(guard)``: a tiny process that kills the job's session
  if the launcher dies without cleaning up (SIGKILL);
* ``kill_job(process)``: SIGTERM mpiexec, then SIGKILL whatever is left of its session;
* ``launcher_identity()``/``local_launcher_pid(identity)``: how a rank tells whether the
  launcher is a process it can watch (the same machine and PID namespace) or not (a rank
  on another machine, where the same number is some other process or none).
"""
import os
import signal
import subprocess
import sys

__all__ = ["parent_death_signal", "start_guard", "stop_guard", "kill_job",
           "LAUNCHER_PID_VARIABLE", "launcher_identity", "local_launcher_pid"]

LAUNCHER_PID_VARIABLE = "MINITORCH_DIST_LAUNCHER_PID"


def _process_space():
    """This machine's boot id and this process's PID namespace: two processes with the same
    pair see the same PIDs. "" where /proc does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as source:
            boot = source.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def launcher_identity():
    """``PID@SPACE`` of this process (the launcher), for ``LAUNCHER_PID_VARIABLE``."""
    return f"{os.getpid()}@{_process_space()}"


def local_launcher_pid(identity):
    """The launcher's PID from ``identity`` when this process shares its machine and PID
    namespace, else None (also for a malformed or space-less value: never a guess).

    >>> local_launcher_pid("12@") is None, local_launcher_pid("x") is None
    (True, True)
    >>> local_launcher_pid(launcher_identity()) == os.getpid() or not _process_space()
    True
    """
    pid, _, space = (identity or "").partition("@")
    if not pid.isdigit() or not space or space != _process_space():
        return None
    return int(pid)


def parent_death_signal():
    """A function for ``preexec_fn`` that asks the kernel to SIGTERM the child (mpiexec) when
    the launcher dies (Linux ``prctl(PR_SET_PDEATHSIG)``), or None elsewhere. libc is bound
    here, in the parent: the child only makes the call (nothing is imported or allocated
    between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong)
    term = int(signal.SIGTERM)

    def set_death_signal():
        prctl(1, term, 0, 0, 0)           # PR_SET_PDEATHSIG
    return set_death_signal


_GUARD_CODE = r"""
import os, signal, sys, time
session = int(sys.argv[1])
data = sys.stdin.buffer.read()          # EOF when the launcher exits or is killed
if data.startswith(b"done"):
    sys.exit(0)
def members():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry, "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session:
                found.append(int(entry))
    return found
for signum, pause in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
    for pid in members():
        try:
            os.kill(pid, signum)
        except OSError:
            pass
    time.sleep(pause)
"""


def start_guard(session):
    """A tiny process that kills the job's session if the launcher dies without cleaning up
    (SIGKILL): it waits for EOF on a pipe only the launcher holds."""
    if not os.path.isdir("/proc"):
        return None
    read_end, write_end = os.pipe()
    try:
        guard = subprocess.Popen([sys.executable, "-c", _GUARD_CODE, str(session)],
                                 stdin=read_end, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return guard, write_end


def stop_guard(guard):
    if guard is None:
        return
    process, write_end = guard
    try:
        os.write(write_end, b"done")
    except OSError:
        pass
    os.close(write_end)
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()


def kill_job(process):
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
