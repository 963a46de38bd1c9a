"""The ranks of a sharded network with dynamic inputs agree on every call's input shapes.

A sharded network keeps one plan per input shape: when the batch size changes, every rank
plans again for the new shape, and all plan alike. That holds only if every rank sees the
same shapes: under ``dataset_strategy="data_parallel"`` one rank with a smaller last batch
would plan another global batch than its peers, and their collectives would no longer
match. A network that declared dynamic inputs (``set_inputs`` with ``None``/``Symbol``
dimensions) therefore exchanges its input shapes before each call (a few integers) and, when
they differ, raises the same ``ShardingError`` on every rank naming the input, the
dimension and each rank's size.
"""
import numpy as np

from ...backend import get_device
from ..comm.collectives import communicator_for
from .rules import ShardingError

__all__ = ["agree_on_shapes"]


def _encode(shapes):
    flat = [len(shapes)]
    for shape in shapes:
        flat += [len(shape), *shape]
    return np.asarray(flat, np.int64)


def _decode(flat):
    shapes, i = [], 1
    for _ in range(int(flat[0])):
        n = int(flat[i])
        shapes.append(tuple(int(v) for v in flat[i + 1:i + 1 + n]))
        i += 1 + n
    return shapes


def _difference(per_rank):
    """A sentence naming the first input and dimension on which the ranks differ."""
    counts = {len(shapes) for shapes in per_rank}
    if len(counts) > 1:
        return "they pass " + ", ".join(f"{len(s)} tensor(s) on rank {r}"
                                        for r, s in enumerate(per_rank))
    for index in range(len(per_rank[0])):
        ranks = {len(shapes[index]) for shapes in per_rank}
        if len(ranks) > 1:
            return f"input {index} has " + ", ".join(
                f"{len(s[index])} dimension(s) on rank {r}" for r, s in enumerate(per_rank))
        for dim in range(len(per_rank[0][index])):
            sizes = [shapes[index][dim] for shapes in per_rank]
            if len(set(sizes)) > 1:
                return f"dimension {dim} of input {index} is " + ", ".join(
                    f"{size} on rank {r}" for r, size in enumerate(sizes))
    return "their shapes differ"


def agree_on_shapes(comm, shapes):
    """Raise ``ShardingError`` on every rank of ``comm`` unless all pass ``shapes``."""
    if comm is None or comm.size == 1:
        return
    data, counts = communicator_for(comm, get_device("CPU")).allgatherv(_encode(shapes))
    per_rank = [_decode(piece) for piece in np.split(data, np.cumsum(counts)[:-1])]
    if any(s != per_rank[0] for s in per_rank[1:]):
        raise ShardingError(
            f"sharded network: the ranks called it with different input shapes ("
            f"{_difference(per_rank)}); every rank must pass the same shapes so that all plan "
            "alike (under dataset_strategy 'data_parallel' each rank's batch is its slice of "
            "the global batch: make the batches equal, e.g. batch(..., drop_remainder=True))")
