"""What a well-formed job record is: the check every record passes before anyone judges it.

Records come from the ranks (``exit``/``failure``/``wait.<rank>.json`` files in the job
directory, or relayed as lines of their output, ``relay``). A record that lacks a field or
holds the wrong type (a ``collectives`` that is a string, no ``rank``) must not stop the
thread that reads it: the relay and the watchdog drop it with a one-line warning instead,
and ``record_problem`` says what is wrong with it.

>>> record_problem("exit.1.json", {"rank": 1, "code": 0, "collectives": {"world": 3}})
>>> record_problem("exit.1.json", {"code": 0})
"no integer 'rank' field"
>>> record_problem("exit.1.json", {"rank": 1, "collectives": "3"})
"'collectives' must map communicator keys to call counts, got '3'"
"""
import re
import sys

__all__ = ["record_problem", "warn_dropped"]

_NAME = re.compile(r"(exit|failure|wait)\.(\d+)\.json")


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counts(value):
    """A ``{key: count}`` map (collective calls per communicator key)."""
    return isinstance(value, dict) and all(isinstance(k, str) and _count(v)
                                           for k, v in value.items())


def _p2p_problem(value):
    """``{key: {"sent": {peer: n}, "received": {peer: n}}}``: point-to-point messages."""
    if not isinstance(value, dict):
        return f"'p2p' must be a dict, got {value!r}"
    for key, sides in value.items():
        if not isinstance(sides, dict) or not all(
                _counts(sides.get(side, {})) for side in ("sent", "received")):
            return f"'p2p' of {key!r} must hold 'sent' and 'received' counts, got {sides!r}"
    return None


def _optional_step(record):
    step = record.get("step")
    return step is None or _count(step)


def _exit_problem(record):
    if not _counts(record.get("collectives", {})):
        return ("'collectives' must map communicator keys to call counts, got "
                f"{record.get('collectives')!r}")
    if "p2p" in record and _p2p_problem(record["p2p"]) is not None:
        return _p2p_problem(record["p2p"])
    code = record.get("code", 0)
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        return f"'code' must be an integer, got {code!r}"
    return None


def _wait_problem(record):
    if "open" in record and not isinstance(record["open"], bool):
        return f"'open' must be true or false, got {record['open']!r}"
    if not record.get("open"):
        return None
    if not isinstance(record.get("key"), str) or not isinstance(record.get("op"), str):
        return "an open wait needs string 'key' and 'op' fields"
    if not _count(record.get("mine")) or not _count(record.get("seq", 0)):
        return "an open wait needs integer 'seq' and 'mine' fields"
    members = record.get("members")
    if not isinstance(members, list) or not all(_count(m) for m in members):
        return f"'members' must be a list of ranks, got {members!r}"
    if "peer" in record and not _count(record["peer"]):
        return f"'peer' must be a rank, got {record['peer']!r}"
    return None


def _failure_problem(record):
    if not isinstance(record.get("summary", ""), str):
        return f"'summary' must be a string, got {record.get('summary')!r}"
    return None


_BY_KIND = {"exit": _exit_problem, "wait": _wait_problem, "failure": _failure_problem}


def record_problem(name, record):
    """None for a well-formed record called ``name`` (``exit.3.json``), else what is wrong."""
    match = _NAME.fullmatch(name or "")
    if match is None:
        return f"{name!r} is not a record name (exit|failure|wait.<rank>.json)"
    if not isinstance(record, dict):
        return f"a record must be a JSON object, got {type(record).__name__}"
    rank = record.get("rank")
    if not _count(rank):
        return "no integer 'rank' field"
    if rank != int(match.group(2)):
        return f"its 'rank' {rank} differs from the rank in its name"
    if not _optional_step(record):
        return f"'step' must be an integer or null, got {record.get('step')!r}"
    return _BY_KIND[match.group(1)](record)


_warned = set()


def warn_dropped(name, problem, where):
    """One warning line per dropped record (``where``: how it came)."""
    key = (name, problem, where)
    if key in _warned:
        return
    _warned.add(key)
    print(f"minitorch_dist: warning: dropped a malformed record {name} ({where}): {problem}",
          file=sys.stderr, flush=True)
