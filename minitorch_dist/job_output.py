"""What a launched job prints: mpiexec's tagged output split into one log per rank.

``OutputDemux`` reads ``mpiexec --output tag`` (see its docstring); the launcher
(``minitorch_dist.run``) shows the ranks' lines untagged and keeps the logs for its report.
"""
import io
import os
import re
import sys
import threading

__all__ = ["OutputDemux"]

_TAG = re.compile(rb"^\[(\d+),(\d+)\]<(stdout|stderr|stddiag)>: ?(.*)$", re.S)


class OutputDemux:
    """Reads mpiexec's tagged output (``--output tag``): each rank's lines go to its own log
    ``rank.<N>.log`` in the job directory and, untagged, to the launcher's stdout/stderr;
    mpiexec's own messages go to ``mpiexec.log`` (shown only when no rank explained a
    failure). A rank's "minitorch_dist: rank N failed" line stays in its log: the job's
    report says it once (a "minitorch_dist: note: ..." line is shown)."""

    def __init__(self, job_dir, out_sink=None, err_sink=None):
        self.job_dir = job_dir
        self.sinks = {"stdout": out_sink, "stderr": err_sink}
        self.logs = {}
        self.untagged = []
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

    def _pump(self, stream, pipe):
        held = {}       # rank -> lines of an MPI help block (between dashed lines) held back
        for line in iter(pipe.readline, b""):
            match = _TAG.match(line)
            with self.lock:
                if match is None:
                    self.untagged.append(line.decode(errors="replace"))
                    with open(os.path.join(self.job_dir, "mpiexec.log"), "ab") as handle:
                        handle.write(line)
                    continue
                rank, kind, text = int(match.group(2)), match.group(3).decode(), match.group(4)
                text = text.replace(b"\x00", b"")
                if not text:
                    continue
                self._log(rank).write(text)
                self._log(rank).flush()
            if kind == "stderr" and text.startswith(b"minitorch_dist: ") \
                    and not text.startswith(b"minitorch_dist: note: "):
                continue        # a failure line: the report says it once
            if kind != "stdout" and (rank in held or text.startswith(b"-" * 20)):
                block = held.setdefault(rank, [])
                block.append(text)
                if len(block) > 1 and text.startswith(b"-" * 20) or len(block) > 200:
                    del held[rank]
                    if not any(b"MPI_ABORT was invoked" in part for part in block):
                        self._emit("stderr", b"".join(block))
                continue        # MPI_Abort's banner: the report explains the failure
            self._emit("stdout" if kind == "stdout" else "stderr", text)
        for block in held.values():
            if not any(b"MPI_ABORT was invoked" in part for part in block):
                self._emit("stderr", b"".join(block))
        pipe.close()

    def untagged_text(self):
        """What mpiexec itself printed (banners, launch errors)."""
        return "".join(self.untagged)

    def append_tracebacks(self, records):
        """Add each failed rank's full traceback to its log."""
        for record in records:
            path = os.path.join(self.job_dir, f"rank.{record['rank']}.log")
            with open(path, "a") as handle:
                handle.write(record.get("traceback") or "")
