"""The launcher's half of the records that ranks relay through their output.

A rank on a machine that cannot see the job directory prints each of its records (exit,
failure, and how long it has waited in a collective) as one stderr line
``RECORD_PREFIX NAME JSON`` (``watchdog``). The launcher's output reader hands
such lines to a ``RecordRelay``, which writes the record into the job directory, where the
report and the ranks that can see the directory find it as if the rank had written it.

Ranks that relay cannot read the others' exit records, so the relay also judges for them:
when a relayed wait that is still open can never end (a member of that collective left
after fewer calls, ``watchdog.stuck_reason_for``), it writes the waiting rank's failure
record naming the rank that left, and ends the job (``stop``), as that rank's own watchdog
would have. It judges when a relayed record arrives and, while a wait is open, twice a
second (an exit record may come as a file from a rank that sees the job directory).

Every relayed record is checked first (``record_check``): a malformed one (no ``rank``, a
``collectives`` that is not a map of counts, ...) is dropped with a one-line warning and
never stops the output reader. Once the job is over (``close``) nothing more is written:
the launcher may remove the job directory then.
"""
import json
import re
import threading

from . import watchdog
from .record_check import record_problem, warn_dropped

__all__ = ["parse_record_line", "RecordRelay"]

_NAME = re.compile(r"(exit|failure|wait)\.\d+\.json")


def parse_record_line(text):
    """``(name, record)`` from a relayed record line (bytes or str), else None.

    >>> parse_record_line(b'minitorch_dist: record exit.3.json {"rank": 3}')
    ('exit.3.json', {'rank': 3})
    >>> parse_record_line(b'minitorch_dist: record ../x {}') is None
    True
    """
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    if not text.startswith(watchdog.RECORD_PREFIX):
        return None
    name, _, payload = text[len(watchdog.RECORD_PREFIX):].strip().partition(" ")
    if not _NAME.fullmatch(name):
        return None
    try:
        record = json.loads(payload)
    except ValueError:
        return None
    return (name, record) if isinstance(record, dict) else None


class RecordRelay:
    """Writes relayed records into ``job_dir``; calls ``stop()`` (once) when a relayed wait
    can never end. ``close()`` ends its polling when the job is over."""

    def __init__(self, job_dir, stop):
        self.job_dir, self.stop = job_dir, stop
        self.lock = threading.Lock()
        self.stopped = False
        self.closed = threading.Event()
        self.poller = None

    def __call__(self, name, record):
        problem = record_problem(name, record)
        if problem is not None:       # never let a bad line stop the output reader
            warn_dropped(name, problem, "relayed in a rank's output")
            return
        with self.lock:
            if self.closed.is_set():
                return                # the job is over (its directory may be gone)
            try:
                watchdog.write_record(self.job_dir, name, record)
            except OSError as err:
                warn_dropped(name, f"cannot write it: {err}", "relayed in a rank's output")
                return
            if name.startswith("wait.") and record.get("open") and self.poller is None:
                self.poller = threading.Thread(target=self._poll, daemon=True,
                                               name="minitorch_dist-relay-judge")
                self.poller.start()
        if not name.startswith("failure."):
            self._judge()

    def close(self):
        with self.lock:     # a write in progress ends before the job directory may go
            self.closed.set()

    def _poll(self):
        while not self.closed.wait(watchdog.POLL_SECONDS) and not self.stopped:
            self._judge()

    def _judge(self):
        with self.lock:
            if self.stopped or self.closed.is_set():
                return
            reason, wait = self._stuck()
            if reason is None:
                return
            self.stopped = True
            watchdog.write_record(self.job_dir, f"failure.{wait['rank']}.json",
                                  watchdog.early_exit_record(reason, wait["rank"],
                                                             wait.get("step")))
        self.stop()

    def _stuck(self):
        """The first open relayed wait that can never end: ``(reason, wait record)``. A wait
        is withdrawn (``open`` false) once its collective completed, and stale once its rank
        has left."""
        try:
            exits = watchdog.read_records(self.job_dir, "exit")
            waits = watchdog.read_records(self.job_dir, "wait")
        except OSError:
            return None, None
        if not exits:
            return None, None
        for rank, wait in sorted(waits.items()):
            if not wait.get("open") or rank in exits:
                continue
            reason = watchdog.stuck_reason_for(wait, exits)
            if reason is not None:
                return reason, wait
        return None, None
