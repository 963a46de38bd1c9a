"""One report for a failed job, from the ranks' failure records (see ``watchdog``).

The launcher prints, once::

    minitorch_dist.run: the job failed (exit code 1). Rank 1 failed first:
      ValueError: DATA_PATH '/data/x' does not exist
        File "train.py", line 12, in <module>
          dataset = load(args.data_path)
        ...
      ranks 0, 2-3: the same error
      full logs of every rank: /tmp/minitorch_dist-job-abcd/ (rank.<N>.log)

instead of every rank's traceback and MPI's abort banner.
"""
import json
import os
import re

from .record_check import record_problem

__all__ = ["read_records", "format_report", "left_early_text", "rank_ranges", "rank_hint",
           "TRACEBACK_LINES"]

TRACEBACK_LINES = 8


def read_records(job_dir):
    """The records in ``job_dir``: failure records (oldest first), then exit records (by
    rank, with ``kind`` "exit")."""
    failures, exits = [], []
    try:
        names = os.listdir(job_dir)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(job_dir, name)) as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        if record_problem(name, record) is not None:    # a malformed file: no report from it
            continue
        if name.startswith("failure."):
            failures.append(record)
        elif name.startswith("exit."):
            record["kind"] = "exit"
            exits.append(record)
    failures.sort(key=lambda r: r.get("time", 0))
    return failures + sorted(exits, key=lambda r: r.get("rank", 0))


def rank_ranges(ranks):
    """"0, 2-4, 7" for [0, 2, 3, 4, 7].

    >>> rank_ranges([7, 0, 2, 3, 4])
    '0, 2-4, 7'
    """
    ranks = sorted(set(ranks))
    parts, start = [], None
    for index, rank in enumerate(ranks):
        if start is None:
            start = rank
        if index + 1 == len(ranks) or ranks[index + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}-{rank}")
            start = None
    return ", ".join(parts)


# (pattern, what the script needs): errors that mean "started with the wrong -n".
_RANK_HINTS = (
    (re.compile(r"uses (\d+) devices but the world has only (\d+)"),
     lambda m: (int(m.group(1)), "at least {need} ranks (a multiple of {need} for replicas)")),
    (re.compile(r"pipeline_stages \((\d+)\) must divide the number of ranks \((\d+)\)"),
     lambda m: (int(m.group(1)), "a multiple of {need} ranks")),
)


def rank_hint(summary):
    """A one-line fix for errors that say the job has the wrong number of ranks, or None.

    >>> rank_hint("ShardingError: matmul: strategy ((2, 4), (4, 1)) uses 8 devices but the "
    ...           "world has only 2; the product of the split counts must not exceed the world")
    'hint: the script needs at least 8 ranks (a multiple of 8 for replicas); start it again with python -m minitorch_dist.run -n 8 ...'
    """
    for pattern, needs in _RANK_HINTS:
        match = pattern.search(summary or "")
        if match:
            need, text = needs(match)
            return (f"hint: the script needs {text.format(need=need)}; start it again with "
                    f"python -m minitorch_dist.run -n {need} ...")
    return None


def _fold_key(record):
    return record.get("fold") or record.get("summary") or ""


def _tail(text, lines=TRACEBACK_LINES):
    body = [line for line in (text or "").rstrip().splitlines()
            if line.strip() and not line.startswith("Traceback")]
    # the last frames, without the final exception line (printed separately)
    frames = body[:-1] if body else body
    return frames[-lines:]


def left_early_text(records, n):
    """", rank 1 had left early (exit code 0, step 3)" style text for a timeout message."""
    exits = [r for r in records if r.get("kind") == "exit"]
    if not exits or len(exits) >= n:
        return ""
    parts = [f"rank {r['rank']} (exit code {r.get('code', 0)}"
             + (f", step {r['step']}" if r.get("step") is not None else "") + ")"
             for r in exits]
    return ("; ranks that had already left while others still ran: " + ", ".join(parts))


def format_report(records, code, job_dir, mpi_text=""):
    """The launcher's report of a failed job (a string of a few lines)."""
    failures = [r for r in records if r.get("kind") != "exit"]
    lines = []
    if not failures:
        lines.append(f"minitorch_dist.run: the job failed (exit code {code}) and no rank "
                     "reported an exception (a rank was killed or crashed, or MPI failed).")
        if mpi_text.strip():
            said = mpi_text.strip().splitlines()
            # our own processes' one-line reasons (the launch agent's, say) come first: MPI's
            # banner after them is only their consequence
            own = [line for line in said[:-15] if line.startswith("minitorch_dist")]
            lines += ["  mpiexec said:"] + ["    " + line for line in own + said[-15:]]
        lines.append(f"  full logs of every rank: {job_dir}")
        return "\n".join(lines)
    first = failures[0]
    lines.append(f"minitorch_dist.run: the job failed (exit code {code}). "
                 f"Rank {first['rank']} failed first"
                 + (f" (step {first['step']})" if first.get("step") is not None else "") + ":")
    if first.get("kind") == "usage":      # the program's argparse error and its usage line
        lines += ["  " + line for line in first.get("summary", "").strip().splitlines()]
    else:
        lines.append(f"  {first.get('summary', '').strip()}")
    if first.get("kind") == "exception":
        lines += ["    " + line for line in _tail(first.get("traceback"))]
    hint = rank_hint(first.get("summary"))
    groups = {}
    for record in failures[1:]:
        groups.setdefault(_fold_key(record), []).append(record["rank"])
    for key, ranks in groups.items():
        label = "rank" if len(ranks) == 1 else "ranks"
        if key == _fold_key(first):
            lines.append(f"  {label} {rank_ranges(ranks)}: the same error")
        else:
            lines.append(f"  {label} {rank_ranges(ranks)}: {key.splitlines()[0] if key else '?'}")
    if hint:
        lines.append(f"  {hint}")
    lines.append(f"  full logs of every rank: {job_dir} (rank.<N>.log)")
    return "\n".join(lines)
