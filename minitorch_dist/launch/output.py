"""What a launched job prints: mpiexec's tagged output split into one log per rank.

``OutputDemux`` reads ``mpiexec --output tag`` (see its docstring); the launcher
(``minitorch_dist.run``) shows the ranks' lines untagged and keeps the logs for its report.
"""
import io
import os
import re
import sys
import threading

from ..log import RANK0_ONLY_REQUEST
from .relay import parse_record_line

__all__ = ["OutputDemux"]

_TAG = re.compile(rb"^\[(\d+),(\d+)\]<(stdout|stderr|stddiag)>: ?(.*)$", re.S)
# Open MPI's error-handler lines ("[host:pid] *** An error occurred in ..."): the
# consequence of another rank's failure when the job has a report, shown only without one
_MPI_ERROR_LINE = re.compile(rb"^\[[^\]\s]+:\d+\] \*\*\* ")
_OWN_WARNING = b"minitorch_dist: warning: "     # always shown, from wherever it comes
_OWN_NOTE = b"minitorch_dist: note: "           # shown once for all ranks
_RANK0_ONLY_REQUEST = RANK0_ONLY_REQUEST.encode()   # log.rank0_progress_only()
# the rule around Open MPI's and PRRTE's help messages (74 and 60 dashes); a shorter rule
# is the program's own
_MPI_RULE = re.compile(rb"^-{60,}\s*$")


class OutputDemux:
    """Reads mpiexec's tagged output (``--output tag``): each rank's lines go to its own log
    ``rank.<N>.log`` in the job directory and, untagged, to the launcher's stdout/stderr;
    mpiexec's own messages go to ``mpiexec.log`` (shown only when no rank explained a
    failure). A rank's "minitorch_dist: rank N failed" line stays in its log: the job's
    report says it once (a "minitorch_dist: note: ..." line is shown). So do MPI's help
    blocks and error lines ("peer process has unexpectedly disconnected", "*** An error
    occurred"), usually the echo of another rank's failure: they are held back and shown at
    the end only when no rank explained the failure (``release_mpi_messages``). Records
    relayed by ranks that cannot see the job directory go to ``relay``
    (``relay.RecordRelay``).

    ``tag`` starts each shown line with its rank ("[1] "); ``rank0_only`` shows only rank
    0's standard output (the other ranks' standard error is still shown); the logs keep
    everything. Without ``rank0_only``, a program may ask for it itself: a rank's line
    "minitorch_dist: control: rank0-only" (``minitorch_dist.log.rank0_progress_only()``,
    which the examples call) turns it on from then on; the line itself is neither shown nor
    logged. ``follow_program`` says whether that request is followed; by default only when
    the output is a terminal (as ``--tag``): a person watching wants one copy of the
    progress, while a captured output (a pipe, a file, a test reading it) keeps every
    rank's lines. A "minitorch_dist: note: ..." line (``log.note``) is shown once, however many
    ranks say it."""

    def __init__(self, job_dir, out_sink=None, err_sink=None, relay=None, tag=False,
                 rank0_only=False, follow_program=None):
        self.job_dir = job_dir
        self.tag = tag
        self.rank0_only = rank0_only
        self.notes_shown = set()
        if follow_program is None:
            follow_program = out_sink is None and sys.stdout.isatty()
        self.follow_program = follow_program
        self.relay = relay          # takes (name, record) of relayed records (relay)
        self.sinks = {"stdout": out_sink, "stderr": err_sink}
        self.logs = {}
        self.untagged = []
        self.mpi_messages = []      # help blocks and error lines, shown at the end or dropped
        self.lock = threading.Lock()
        self.threads = []

    def start(self, process):
        """Start one reader thread per pipe of ``process``."""
        for stream, pipe in (("stdout", process.stdout), ("stderr", process.stderr)):
            thread = threading.Thread(target=self._pump, args=(stream, pipe), daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self):
        """Wait (briefly) until the pipes are drained, then close the logs."""
        for thread in self.threads:
            thread.join(10)
        with self.lock:
            for handle in self.logs.values():
                handle.close()
            self.logs.clear()

    def _log(self, rank):
        if rank not in self.logs:
            self.logs[rank] = open(os.path.join(self.job_dir, f"rank.{rank}.log"), "ab")
        return self.logs[rank]

    def _emit(self, stream, data):
        sink = self.sinks[stream]
        if sink is None:
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.write(data.decode(errors="replace"))
            target.flush()
        elif isinstance(sink, int):
            os.write(sink, data)
        elif isinstance(sink, io.TextIOBase):
            sink.write(data.decode(errors="replace"))
            sink.flush()
        else:
            sink.write(data)
            sink.flush()

    def _show(self, rank, kind, text):
        """Show one line of a rank: tagged with its rank when asked, and (``rank0_only``)
        only rank 0's standard output."""
        if kind == "stdout" and self.rank0_only and rank != 0:
            return
        if kind != "stdout" and text.startswith(_OWN_NOTE):
            with self.lock:
                if text.rstrip() in self.notes_shown:
                    return
                self.notes_shown.add(text.rstrip())
        if self.tag:
            text = f"[{rank}] ".encode() + text
        self._emit("stdout" if kind == "stdout" else "stderr", text)

    def _pump(self, stream, pipe):
        held = {}       # rank -> lines of an MPI help block (between dashed lines) held back
        for line in iter(pipe.readline, b""):
            match = _TAG.match(line)
            with self.lock:
                if match is None:
                    self.untagged.append(line.decode(errors="replace"))
                    with open(os.path.join(self.job_dir, "mpiexec.log"), "ab") as handle:
                        handle.write(line)
                    if line.startswith(_OWN_WARNING):   # a daemon's (remote, the shim)
                        self._emit("stderr", line)
                    continue
                rank, kind, text = int(match.group(2)), match.group(3).decode(), match.group(4)
                text = text.replace(b"\x00", b"")
                nested = _TAG.match(text)
                while nested is not None:   # an empty write's tag inside another's line
                    text = nested.group(4).replace(b"\x00", b"")
                    nested = _TAG.match(text)
                if not text:
                    continue
                if kind == "stdout" and text.rstrip() == _RANK0_ONLY_REQUEST:
                    if self.follow_program:     # the program asked (rank0_progress_only)
                        self.rank0_only = True
                    continue
                relayed = parse_record_line(text) if kind == "stderr" else None
                if relayed is None:
                    self._log(rank).write(text)
                self._log(rank).flush()
            if relayed is not None:
                if self.relay is not None:
                    self.relay(*relayed)
                continue
            if kind == "stderr" and text.startswith(b"minitorch_dist: ") \
                    and not text.startswith((b"minitorch_dist: note: ", _OWN_WARNING)):
                continue        # a failure line: the report says it once
            if kind != "stdout" and (rank in held or _MPI_RULE.match(text)):
                block = held.setdefault(rank, [])
                block.append(text)
                if len(block) > 1 and _MPI_RULE.match(text) or len(block) > 200:
                    self._hold_mpi_message(held.pop(rank))
                continue
            if kind != "stdout" and _MPI_ERROR_LINE.match(text):
                self._hold_mpi_message([text])
                continue
            self._show(rank, kind, text)
        for block in held.values():
            self._hold_mpi_message(block)
        pipe.close()

    def _hold_mpi_message(self, lines):
        """Keep an MPI help block or error line for ``release_mpi_messages``; MPI_Abort's
        banner is dropped at once (the job's report explains the abort)."""
        if not any(b"MPI_ABORT was invoked" in line for line in lines):
            with self.lock:
                self.mpi_messages.append(b"".join(lines))

    def release_mpi_messages(self, show):
        """At the job's end: print the MPI messages held back (``show``), or drop them when
        the job's report explains its failure (they stay in the ranks' logs)."""
        with self.lock:
            messages, self.mpi_messages = self.mpi_messages, []
        if show:
            for message in messages:
                self._emit("stderr", message)

    def untagged_text(self):
        """What mpiexec itself printed (banners, launch errors)."""
        return "".join(self.untagged)

    def append_tracebacks(self, records):
        """Add each failed rank's full traceback to its log."""
        for record in records:
            path = os.path.join(self.job_dir, f"rank.{record['rank']}.log")
            with open(path, "a") as handle:
                handle.write(record.get("traceback") or "")
