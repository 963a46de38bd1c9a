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
never trigger it (the sequence numbers say so), however long they take. Point-to-point
messages (pipeline stages) are judged the same way: the exit record counts the messages
sent to and received from each peer (``"p2p"``), and a rank waiting for a message from a
peer that left after sending it no more than it has received cannot go on
(``parallel/comm/p2p_watch.py`` marks such waits).

A rank on a machine that cannot see the job directory (a multi-machine job without a shared
``--log-dir``) relays its records instead: each is one line on its stderr,
``RECORD_PREFIX NAME JSON``, which the launcher's output reader writes into the job
directory (``relay``). Such a rank cannot read the others' exit records either, so once
it has waited in one collective for ``RELAY_WAIT_SECONDS`` it relays a ``wait.<rank>.json``
record, and the launcher applies ``stuck_reason_for`` on its behalf.

The library layers never import this module: a communicator announces itself through
``communication.hooks`` (``install`` registers ``watch`` there; the rank runner and
``spawn`` call it), and ``Model.train`` records its step there (``set_step`` here is the
same function).
"""
import json
import os
import sys
import threading
import time
import traceback
import uuid
import weakref

from ..communication import hooks
from ..communication.mpi import import_mpi
from .record_check import record_problem, warn_dropped

__all__ = ["JOB_DIR_VARIABLE", "RECORD_PREFIX", "job_dir", "launched", "world_rank", "set_step",
           "current_step", "install", "watch", "record_exit", "record_failure", "comm_key",
           "stuck_reason", "stuck_reason_for", "wait_record", "p2p_wait_record", "write_record",
           "read_records",
           "early_exit_record", "POLL_SECONDS"]

JOB_DIR_VARIABLE = "MINITORCH_DIST_JOB_DIR"
POLL_SECONDS = 0.5
RELAY_WAIT_SECONDS = 1.0
RECORD_PREFIX = "minitorch_dist: record "
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
_watched = weakref.WeakSet()
_counters = []        # (comm key, [calls]): a communicator's count outlives the object
_p2p_counters = []    # (comm key, {"sent": {peer: n}, "received": {peer: n}})
_state = {"thread": None, "exited": False, "relayed_wait": None}
# the step lives below the launcher (Model.train records it without importing launch/)
set_step, current_step = hooks.set_step, hooks.current_step
_lock = threading.Lock()


def job_dir():
    """The launcher's job directory, or None (not started by the launcher, or on a machine
    that cannot see it: then ``launched()`` is still True and records are relayed)."""
    folder = os.environ.get(JOB_DIR_VARIABLE)
    return folder if folder and os.path.isdir(folder) else None


def launched():
    """True in a rank of a job started by ``python -m minitorch_dist.run``."""
    return bool(os.environ.get(JOB_DIR_VARIABLE))


def world_rank():
    """This process's rank in the launched job (from the launcher's environment), else 0."""
    for name in _RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def comm_key(comm):
    """A name of ``comm`` that every member computes alike: its world ranks."""
    ranks = getattr(comm, "world_ranks", None)
    return "world" if ranks is None else ",".join(str(r) for r in ranks)


def install():
    """Watch every communicator made from now on (``watch`` them as they are created)."""
    hooks.on_communicator_created(watch)


def watch(comm):
    """Watch ``comm`` (an MPI communicator of a launched job) for peers that left early."""
    if not launched() or comm.size <= 1:
        return
    with _lock:
        if comm in _watched:
            return
        _watched.add(comm)
        # Communicator._enter keeps the box current; the box stays here after release()
        # drops the communicator, so an exit record still counts its calls
        comm._seq_box = box = [getattr(comm, "_call_seq", 0)]
        _counters.append((comm_key(comm), box))
        # point-to-point messages (parallel/comm/p2p_watch.py counts them), per peer
        comm._p2p_counts = counts = {"sent": {}, "received": {}}
        _p2p_counters.append((comm_key(comm), counts))
        if _state["thread"] is None:
            thread = threading.Thread(target=_loop, name="minitorch_dist-watchdog", daemon=True)
            _state["thread"] = thread
            thread.start()


def write_record(folder, name, record):
    """Write ``record`` as ``folder/name`` (JSON) atomically: readers never see half of it.
    The temporary file is this writer's own (process, thread and a random part in its
    name): two writers of one record, say a rank and the launcher's relay, or a failure
    written by the watchdog while the main thread writes its own, each rename their own
    file, where a shared ``name.part`` let one rename the other's away
    (``FileNotFoundError: .../exit.1.json.part``)."""
    path = os.path.join(folder, name)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}."
                                     f"{uuid.uuid4().hex[:8]}.part")
    try:
        with open(temporary, "w") as handle:
            json.dump(record, handle)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise
    return path


def _write(name, record):
    """Into the job directory, or relayed through stderr where this machine cannot see it."""
    folder = job_dir()
    if folder is not None:
        return write_record(folder, name, record)
    if launched():
        line = f"{RECORD_PREFIX}{name} {json.dumps(record)}\n".encode()
        while line:                 # fd 2 itself: the program may have replaced sys.stderr
            line = line[os.write(2, line):]
    return None


def record_exit(code=0):
    """Write this rank's exit record (called when its script ends without an exception)."""
    _state["exited"] = True
    collectives = _totals()
    return _write(f"exit.{world_rank()}.json",
                  {"rank": world_rank(), "code": code, "collectives": collectives,
                   "p2p": _p2p_totals(), "step": current_step(), "time": time.time()})


def _p2p_totals():
    """Point-to-point messages sent to and received from each peer (its rank in the
    communicator), per communicator key."""
    totals = {}
    for key, counts in list(_p2p_counters):
        mine = totals.setdefault(key, {"sent": {}, "received": {}})
        for side in ("sent", "received"):
            for peer, n in list(counts[side].items()):
                mine[side][peer] = mine[side].get(peer, 0) + n
    return {key: sides for key, sides in totals.items() if sides["sent"] or sides["received"]}


def _totals():
    """Collective calls made so far per communicator key (objects wrapping the same MPI
    communicator share one sequence of collectives, so their counts add up), including
    communicators released since."""
    totals = {}
    for key, box in list(_counters):
        totals[key] = totals.get(key, 0) + box[0]
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
              "fold": fold or summary, "step": current_step(), "time": time.time()}
    _write(f"failure.{rank}.json", record)
    return record


def read_records(folder, kind):
    """``{rank: record}`` of the well-formed ``<kind>.<rank>.json`` files in ``folder``; a
    malformed one is left out with a one-line warning (``record_check``)."""
    records = {}
    for name in os.listdir(folder):
        if name.startswith(kind + ".") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as handle:
                    record = json.load(handle)
            except (OSError, ValueError):
                continue
            problem = record_problem(name, record)
            if problem is not None:
                warn_dropped(name, problem, f"in {folder}")
                continue
            records[int(record["rank"])] = record
    return records


def wait_record(comm, pending, me):
    """What rank ``me`` waits in: ``comm``'s ``pending`` collective, with the number of calls
    it has made on that MPI communicator (``stuck_reason_for`` reads it)."""
    op, seq, _ = pending
    key = comm_key(comm)
    members = getattr(comm, "world_ranks", None) or range(comm.size)
    return {"rank": me, "key": key, "op": op, "seq": seq, "mine": _totals().get(key, seq),
            "members": [int(r) for r in members], "step": current_step(), "time": time.time()}


def p2p_wait_record(comm, pending, me):
    """What rank ``me`` waits in: a point-to-point message with a peer of ``comm``
    (``pending`` is ``comm._p2p_pending``: op, message number, since, peer)."""
    op, number, _, peer = pending
    members = list(getattr(comm, "world_ranks", None) or range(comm.size))
    return {"rank": me, "key": comm_key(comm), "op": op, "seq": number, "mine": number,
            "peer": int(members[peer]), "peer_local": int(peer), "me_local": int(comm.rank),
            "members": [int(me), int(members[peer])], "step": current_step(),
            "time": time.time()}


def _p2p_stuck_reason(wait, exits):
    """Why the point-to-point ``wait`` can never finish: its peer left after sending this
    rank fewer messages than it waits for (a receive), or before receiving every message
    this rank sent it (a send). None while it still can."""
    me, peer = wait["rank"], wait["peer"]
    if peer not in exits:
        return None
    record = exits[peer]
    sides = record.get("p2p", {}).get(wait["key"], {})
    mine = str(wait.get("me_local", me))
    if wait["op"] == "recv":
        count = sides.get("sent", {}).get(mine, 0)
        if count >= wait["mine"]:
            return None             # the message was sent: it is on its way
        what = f"after sending rank {me} {count} pipeline messages"
        waits = f"rank {me} waits to receive message #{wait['mine']} from it"
    else:
        count = sides.get("received", {}).get(mine, 0)
        if count >= wait["mine"]:
            return None
        what = f"after receiving {count} of the pipeline messages rank {me} sent it"
        waits = f"rank {me} waits to send message #{wait['mine']} to it"
    where = f" at step {record['step']}" if record.get("step") is not None else ""
    code = record.get("code", 0)
    how = "without an error" if code in (0, None) else f"with exit code {code}"
    return (f"rank {peer} left the job {how}{where} {what}, while {waits}"
            + (f" (step {wait['step']})" if wait.get("step") is not None else "")
            + ": every pipeline stage must run the same number of steps and micro-batches")


def stuck_reason_for(wait, exits):
    """Why the collective (or point-to-point message) of the ``wait`` record can never
    finish, given the ``exits`` records of ranks that left; None when it still can."""
    if wait.get("op") in ("send", "recv") and "peer" in wait:
        return _p2p_stuck_reason(wait, exits)
    me = wait["rank"]
    for rank in wait["members"]:
        if rank == me or rank not in exits:
            continue
        record = exits[rank]
        done = record.get("collectives", {}).get(wait["key"], 0)
        if done < wait["mine"]:
            where = f" at step {record['step']}" if record.get("step") is not None else ""
            code = record.get("code", 0)
            how = "without an error" if code in (0, None) else f"with exit code {code}"
            return (f"rank {rank} left the job {how}{where} after {done} collective calls, "
                    f"while rank {me} waits in {wait['op']} #{wait['seq']}"
                    + (f" (step {wait['step']})" if wait.get("step") is not None else "")
                    + ": every rank must make the same collective calls (the same number "
                      "of steps and batches)")
    return None


def stuck_reason(comm, pending, exits, me):
    """``stuck_reason_for`` of rank ``me`` waiting in ``comm``'s ``pending`` collective."""
    return stuck_reason_for(wait_record(comm, pending, me), exits)


def _relay_wait(busy, me):
    """Relay mode: announce a wait (collective or point-to-point) this rank has been in for
    a while (once each), and withdraw it (``"open": false``) once it has completed."""
    announced = _state["relayed_wait"]
    current = {_marker(comm, pending) for comm, pending in busy}
    if announced is not None and announced not in current:
        _state["relayed_wait"] = None
        _write(f"wait.{me}.json", {"rank": me, "open": False, "time": time.time()})
    for comm, pending in busy:
        marker = _marker(comm, pending)
        if time.monotonic() - pending[2] >= RELAY_WAIT_SECONDS \
                and _state["relayed_wait"] != marker:
            _state["relayed_wait"] = marker
            _write(f"wait.{me}.json", dict(_wait_of(comm, pending, me), open=True))
            return


def _marker(comm, pending):
    return (comm_key(comm),) + tuple(pending[:2]) + tuple(pending[3:])


def _wait_of(comm, pending, me):
    """The wait record of a collective wait (3 fields) or a point-to-point one (4)."""
    return p2p_wait_record(comm, pending, me) if len(pending) == 4 \
        else wait_record(comm, pending, me)


def _busy():
    """``(comm, pending)`` of every wait this rank is in: collectives and messages."""
    busy = []
    for comm in list(_watched):
        for pending in (comm._pending, getattr(comm, "_p2p_pending", None)):
            if pending is not None:
                busy.append((comm, pending))
    return busy


def _loop():
    me = world_rank()
    while True:
        time.sleep(POLL_SECONDS)
        if _state["exited"]:
            continue
        busy = _busy()
        folder = job_dir()
        if folder is None:
            _relay_wait(busy, me)
            continue
        if not busy:
            continue
        try:
            exits = read_records(folder, "exit")
        except OSError:
            continue
        for comm, pending in busy:
            reason = stuck_reason_for(_wait_of(comm, pending, me), exits) if exits else None
            if reason is not None:
                _abort(reason)


def early_exit_record(reason, rank, step):
    """The failure record of rank ``rank``, stuck in a collective for ``reason``
    (``stuck_reason_for``); the report groups such failures by the rank that left."""
    return {"rank": int(rank), "kind": "early_exit", "summary": reason, "traceback": reason,
            "fold": reason.split(", while rank")[0], "step": step, "time": time.time()}


def _abort(reason):
    me = world_rank()
    _write(f"failure.{me}.json", early_exit_record(reason, me, current_step()))
    print(f"minitorch_dist: {reason}", file=sys.stderr, flush=True)
    try:
        import_mpi().COMM_WORLD.Abort(1)
    finally:
        os._exit(1)
