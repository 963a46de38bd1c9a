"""Collective desync detection: ranks compare what they are about to do before they do it.

MPI (and NCCL) trust the caller: ranks that pass different shapes or dtypes to a broadcast
or an allreduce get silently wrong data, ``MPI_ERR_TRUNCATE`` or garbage, and ranks that call
different collectives hang. PyTorch's answer (``TORCH_DISTRIBUTED_DEBUG=DETAIL``) is to
exchange a small signature first; so does this module.

A signature is a fixed-size int64 vector: (magic, op, sequence number, dtype, ndim, shape
(up to 8 dimensions, folded beyond), reduction op or root). Before the first call of each
kind of collective on a communicator, and before every call when the environment variable
``MINITORCH_DIST_DEBUG=detail`` is set, each rank allgathers its signature. If any differs,
every rank raises ``CollectiveMismatchError`` naming both ranks' calls, e.g.::

    collective mismatch on MPICommunicator(rank=0, size=2): rank 0 calls
    allreduce #3 (float32, shape (4,), op sum) but rank 1 calls allreduce #3 (float32,
    shape (5,), op sum)

Different collectives on different ranks are caught the same way when both are the first
of their kind (the signature exchange is itself an allgather of equal-sized vectors, so it
always pairs up). ``MINITORCH_DIST_DEBUG=off`` disables the check. The cost is one small
allgather per kind of collective (a handful per job); ``detail`` adds one per call.

``allgatherv`` signatures ignore axis 0 (its length may differ by design).
"""
import os

import numpy as np

from ..backend.dtypes import UNKNOWN_CODE, dtype_code, dtype_from_code

__all__ = ["CollectiveMismatchError", "debug_level", "signature", "describe",
           "check_collective", "OPS"]

OPS = ("allreduce", "iallreduce", "allgather", "allgatherv", "broadcast", "reduce_scatter",
       "alltoall", "barrier", "params")
_REDUCE = ("sum", "mean", "max", "min", "prod")
_MAGIC = 0x6D74645F          # "mtd_": a vector that is not a signature shows up as garbage
_MAX_DIMS = 8
LENGTH = 5 + _MAX_DIMS + 1    # magic, op, seq, dtype, ndim, dims..., extra


class CollectiveMismatchError(ValueError):
    """Ranks called different collectives, or the same one with different arguments."""


def debug_level(env=None):
    """``MINITORCH_DIST_DEBUG``: "off", "detail" or the default "first" (first call of a kind).

    >>> debug_level({"MINITORCH_DIST_DEBUG": "DETAIL"}), debug_level({})
    ('detail', 'first')
    """
    env = os.environ if env is None else env
    value = str(env.get("MINITORCH_DIST_DEBUG", "first")).strip().lower()
    if value in ("detail", "off"):
        return value
    if value in ("", "first", "info", "on", "1"):
        return "first"
    if value in ("0", "none", "false"):
        return "off"
    raise ValueError(f"MINITORCH_DIST_DEBUG={value!r}: expected 'off', 'first' or 'detail'")


def signature(op, seq, array=None, extra=None):
    """The int64 signature vector of collective ``op`` number ``seq`` on ``array``.

    ``extra`` is the reduction op (a name) or the root rank (an int).

    >>> signature("allreduce", 1, np.zeros((2, 3), np.float32), "sum")[:8].tolist()
    [1836344415, 0, 1, 10, 2, 2, 3, 0]
    """
    vector = np.zeros(LENGTH, np.int64)
    vector[0], vector[1], vector[2] = _MAGIC, OPS.index(op), seq
    if array is not None:
        shape = tuple(int(d) for d in array.shape)
        if op == "allgatherv" and shape:
            shape = (-1,) + shape[1:]
        vector[3] = -1 if array.dtype is None else dtype_code(array.dtype, UNKNOWN_CODE)
        vector[4] = len(shape)
        if len(shape) > _MAX_DIMS:
            shape = shape[:_MAX_DIMS - 1] + (int(np.prod(shape[_MAX_DIMS - 1:])),)
        vector[5:5 + len(shape)] = shape
    else:
        vector[3] = -1
    if isinstance(extra, str):
        vector[-1] = _REDUCE.index(extra) if extra in _REDUCE else 99
    elif extra is not None:
        vector[-1] = int(extra)
    return vector


def describe(vector):
    """A readable form of a signature vector (what a mismatch message prints).

    >>> describe(signature("broadcast", 2, np.zeros(3, np.int64), 0))
    'broadcast #2 (int64, shape (3,), root 0)'
    """
    vector = [int(v) for v in vector]
    if len(vector) != LENGTH or vector[0] != _MAGIC or not 0 <= vector[1] < len(OPS):
        return f"something that is not a collective signature {vector}"
    op, seq = OPS[vector[1]], vector[2]
    if vector[3] == -1:
        text = f"{op} #{seq}"
    else:
        ndim = vector[4]
        shape = tuple(vector[5:5 + min(ndim, _MAX_DIMS)])
        shape_text = "(" + ", ".join("*" if d == -1 else str(d) for d in shape) + \
            ("," if len(shape) == 1 else "") + ")"
        dtype = dtype_from_code(vector[3], default="other dtype")
        text = f"{op} #{seq} ({dtype}, shape {shape_text}"
        if op in ("allreduce", "iallreduce", "reduce_scatter"):
            text += f", op {_REDUCE[vector[-1]] if 0 <= vector[-1] < len(_REDUCE) else '?'}"
        elif op == "broadcast":
            text += f", root {vector[-1]}"
        elif op == "params":
            text += f", parameter-list hash {vector[-1]}"
        text += ")"
    return text


def _comparable(vector):
    """iallreduce and allreduce pair up in MPI: compare them as one kind."""
    vector = vector.copy()
    if vector[1] == OPS.index("iallreduce"):
        vector[1] = OPS.index("allreduce")
    return vector


def check_collective(comm, op, array=None, extra=None):
    """Exchange ``op``'s signature on ``comm`` when the debug level asks for it; raise
    ``CollectiveMismatchError`` on every rank if the ranks disagree.

    Called by ``Communicator``'s public collectives after they counted the call
    (``comm._call_seq``). A world of one never exchanges anything.
    """
    if comm.size <= 1:
        return
    level = comm._debug_level
    kind = "allreduce" if op == "iallreduce" else op
    if level == "off" or (level == "first" and kind in comm._checked_kinds):
        return
    comm._checked_kinds.add(kind)
    mine = signature(op, comm._call_seq, array, extra)
    everyone = np.asarray(comm._gather_signatures(mine)).reshape(comm.size, LENGTH)
    compare = [_comparable(v) for v in everyone]
    for rank in range(comm.size):
        if not np.array_equal(compare[rank], compare[comm.rank]):
            other = rank
            first = min(comm.rank, other)
            second = max(comm.rank, other)
            raise CollectiveMismatchError(
                f"collective mismatch on {comm!r}: rank {first} calls "
                f"{describe(everyone[first])} but rank {second} calls "
                f"{describe(everyone[second])}. Every rank must make the same collective "
                f"calls in the same order with the same shapes and dtypes (set "
                f"MINITORCH_DIST_DEBUG=detail to check every call, not only the first of "
                f"each kind)")


def check_same_list(comm, what, entries):
    """Raise ``CollectiveMismatchError`` on every rank unless all ranks hold the same
    ``entries`` (a list of strings, e.g. "name shape dtype" per parameter).

    One allgather of a hash; on a mismatch, an allgatherv of the lists names the first
    entry that differs.
    """
    if comm.size <= 1:
        return
    import hashlib
    text = "\n".join(entries)
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "little")
    mine = signature("params", 0, np.zeros(len(entries), np.uint8), digest)
    everyone = np.asarray(comm._gather_signatures(mine)).reshape(comm.size, LENGTH)
    bad = [r for r in range(comm.size) if not np.array_equal(everyone[r], everyone[0])]
    if not bad:
        return
    other = bad[0]
    # Every rank learns the same thing: compare rank 0's list with the first other rank's.
    encoded = np.frombuffer(text.encode(), np.uint8).copy()
    data, counts = comm._allgatherv_host(encoded)
    starts = np.concatenate([[0], np.cumsum(counts)])
    lists = [bytes(data[starts[r]:starts[r + 1]]).decode().split("\n") for r in (0, other)]
    detail = f"rank 0 has {len(lists[0])} entries, rank {other} has {len(lists[1])}"
    for index, (a, b) in enumerate(zip(lists[0], lists[1])):
        if a != b:
            detail = f"entry {index}: rank 0 has '{a}', rank {other} has '{b}'"
            break
    raise CollectiveMismatchError(
        f"{what}: the ranks hold different parameter lists ({detail}). Every rank must "
        f"build the same model (same layers, shapes and dtypes, in the same order)")
