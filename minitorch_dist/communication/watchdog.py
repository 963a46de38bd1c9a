"""Early-exit detection and failure records for jobs started by ``python -m minitorch_dist.run``.

The launcher gives every rank a job directory (``MINITORCH_DIST_JOB_DIR``). In it:

* ``exit.<rank>.json``: written by a rank that leaves the job without an exception (its script
  ended, or ``sys.exit``), with how many collectives it made on each communicator;
* ``failure.<rank>.json``: written by a rank that fails (an uncaught exception, or the
  watchdog below), with the exception and its traceback; the launcher's report reads these.

A rank left without error while another still waits in a collective: MPI would hang (the
waiting rank in its collective, the leaving rank in ``MPI_Finalize``). So every rank of an
MPI job with a job directory runs a small watchdog thread. Twice a second it looks at the
collective this rank is waiting in (the ``Communicator`` records it, with its sequence
number); if a member of that communicator has left after fewer collectives than this one's
number, the wait can never end: the rank writes a failure record naming the rank that left
and the collective, and aborts the job. Collectives that the leaving rank did take part in
never trigger it (the sequence numbers say so), however long they take.
"""
import json
import os
import sys
import threading
import time
import traceback
import weakref

__all__ = ["JOB_DIR_VARIABLE", "job_dir", "world_rank", "set_step", "current_step", "watch",
           "record_exit", "record_failure", "comm_key", "POLL_SECONDS"]

JOB_DIR_VARIABLE = "MINITORCH_DIST_JOB_DIR"
POLL_SECONDS = 0.5
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
_watched = weakref.WeakSet()
_state = {"thread": None, "step": None, "exited": False}
_lock = threading.Lock()


def job_dir():
    """The launcher's job directory, or None (not started by the launcher)."""
    folder = os.environ.get(JOB_DIR_VARIABLE)
    return folder if folder and os.path.isdir(folder) else None


def world_rank():
    """This process's rank in the launched job (from the launcher's environment), else 0."""
    for name in _RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def set_step(step):
    """Record the training step this rank is in (named in early-exit messages)."""
    _state["step"] = None if step is None else int(step)


def current_step():
    """The step last given to ``set_step``, or None."""
    return _state["step"]


def comm_key(comm):
    """A name of ``comm`` that every member computes alike: its world ranks."""
    ranks = getattr(comm, "world_ranks", None)
    return "world" if ranks is None else ",".join(str(r) for r in ranks)


def watch(comm):
    """Watch ``comm`` (an MPI communicator of a launched job) for peers that left early."""
    if job_dir() is None or comm.size <= 1:
        return
    with _lock:
        _watched.add(comm)
        if _state["thread"] is None:
            thread = threading.Thread(target=_loop, name="minitorch_dist-watchdog", daemon=True)
            _state["thread"] = thread
            thread.start()


def _write(name, record):
    folder = job_dir()
    if folder is None:
        return None
    path = os.path.join(folder, name)
    temporary = path + ".part"
    with open(temporary, "w") as handle:
        json.dump(record, handle)
    os.replace(temporary, path)    # readers never see half a record
    return path


def record_exit(code=0):
    """Write this rank's exit record (called when its script ends without an exception)."""
    _state["exited"] = True
    collectives = _totals()
    return _write(f"exit.{world_rank()}.json",
                  {"rank": world_rank(), "code": code, "collectives": collectives,
                   "step": _state["step"], "time": time.time()})


def _totals():
    """Collective calls made so far per communicator key (objects wrapping the same MPI
    communicator share one sequence of collectives, so their counts add up)."""
    totals = {}
    for comm in list(_watched):
        key = comm_key(comm)
        totals[key] = totals.get(key, 0) + comm._call_seq
    return totals


def record_failure(exc=None, message=None, kind="exception", fold=None, rank=None):
    """Write this rank's failure record: the exception (type, message, traceback) or a
    ``message`` from the watchdog; ``fold`` is the text by which the launcher's report groups
    ranks with the same failure (default: the summary); ``rank`` defaults to the launched
    rank (``world_rank``). Returns the record."""
    if exc is not None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        summary = f"{type(exc).__name__}: {exc}".strip()
    else:
        text, summary = message, message
    rank = world_rank() if rank is None else int(rank)
    record = {"rank": rank, "kind": kind, "summary": summary, "traceback": text,
              "fold": fold or summary, "step": _state["step"], "time": time.time()}
    _write(f"failure.{rank}.json", record)
    return record


def _exits(folder):
    records = {}
    for name in os.listdir(folder):
        if name.startswith("exit.") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as handle:
                    record = json.load(handle)
            except (OSError, ValueError):
                continue
            records[int(record["rank"])] = record
    return records


def stuck_reason(comm, pending, exits, me):
    """Why ``comm``'s ``pending`` collective can never finish, given the ``exits`` records
    of ranks that left; None when it still can."""
    op, seq, _ = pending
    members = getattr(comm, "world_ranks", None) or range(comm.size)
    key = comm_key(comm)
    mine = _totals().get(key, seq)       # this rank's calls on that MPI communicator so far
    for rank in members:
        if rank == me or rank not in exits:
            continue
        record = exits[rank]
        done = record.get("collectives", {}).get(key, 0)
        if done < mine:
            where = f" at step {record['step']}" if record.get("step") is not None else ""
            code = record.get("code", 0)
            how = "without an error" if code in (0, None) else f"with exit code {code}"
            return (f"rank {rank} left the job {how}{where} after {done} collective calls, "
                    f"while rank {me} waits in {op} #{seq}"
                    + (f" (step {_state['step']})" if _state["step"] is not None else "")
                    + ": every rank must make the same collective calls (the same number "
                      "of steps and batches)")
    return None


def _loop():
    me = world_rank()
    while True:
        time.sleep(POLL_SECONDS)
        folder = job_dir()
        if folder is None or _state["exited"]:
            continue
        busy = [(c, c._pending) for c in list(_watched) if c._pending is not None]
        if not busy:
            continue
        try:
            exits = _exits(folder)
        except OSError:
            continue
        for comm, pending in busy:
            reason = stuck_reason(comm, pending, exits, me) if exits else None
            if reason is not None:
                _abort(reason)


def _abort(reason):
    record_failure(message=reason, kind="early_exit", fold=reason.split(", while rank")[0])
    print(f"minitorch_dist: {reason}", file=sys.stderr, flush=True)
    try:
        from .mpi import import_mpi
        import_mpi().COMM_WORLD.Abort(1)
    finally:
        os._exit(1)
