"""Per-rank checkpoints know their rank: what a slice file records, and the check on loading.

Saving (``save_checkpoint(..., integrated_save=False)``, or any save of a row-sliced
embedding table) adds one string entry, ``__rank_identity__``: the saving rank and world
size, the parallel mode,
and per sliced entry its record: a ``TensorLayout``'s JSON with the rank whose block it
holds (``layout_json``), or ``{"row_slice": {...}}`` for an embedding table's rows.

The rank and world are this thread's world (``sharding_world``), else the process's, unless
that cannot be the job that sliced the values: none, or smaller than the communicator that
sliced a parameter (a table's row split). Then the values' own group speaks: a rank run as a
thread saves and loads its own identity even outside its ``sharding_world``, where the
process's communicator (one rank, once an earlier ``init()`` made it) would claim rank 0.

Loading (``load_param_into_net``, through ``local_value``) compares the record of each
value with the parameter it would fill and refuses, naming both sides, a slice of another
rank, another layout, or another world; a value with a slice's shape from a file that
records nothing (saved before this check existed) is refused with how to re-save it. A
whole value still loads anywhere (a sliced parameter takes its block).
"""
import json

from ... import communication
from ...train.checkpoint_identity import IDENTITY
from ..context import get_auto_parallel_context
from .scope import current_world

__all__ = ["identity_entry", "check_slice", "row_slice_json", "world_of"]


def row_slice_json(part):
    """A row-sliced table's record: which rows of which table, held by which rank."""
    return {"row_slice": {"offset": int(part.offset), "rows": int(part.rows),
                          "full_shape": [int(n) for n in part.full_shape],
                          "rank": int(part.rank), "size": int(part.size)}}


def _world():
    world = current_world()
    if world is None and communication.GlobalComm.INITED:
        world = communication.get_communicator()
    return (None, None) if world is None else (int(world.rank), int(world.size))


def world_of(value):
    """``(rank, world size)`` of the job that sliced ``value``, or None for a whole value."""
    comm = getattr(value, "sharding_comm", None)
    if comm is not None:
        return int(comm.rank), int(comm.size)
    part = getattr(value, "row_slice", None)
    if part is not None:
        return int(part.rank), int(part.size)
    return None


def _world_of_values(values):
    """This thread's (or the process's) world, unless it cannot be the job that sliced
    ``values``: smaller than their group (a thread rank outside ``sharding_world`` in a
    process whose own communicator has one rank), or none. A pipeline stage's group is
    smaller than its world, which then stays the identity (global rank, world size)."""
    rank, size = _world()
    for value in values:
        world = world_of(value)
        if world is not None:
            return world if size is None or size < world[1] else (rank, size)
    return rank, size


def identity_entry(records, values=()):
    """The ``__rank_identity__`` entry for a file holding the slices ``{name: record}``;
    ``values``: the values saved, whose own rank and world the entry records."""
    rank, size = _world_of_values(values)
    identity = {"rank": rank, "world_size": size,
                "parallel_mode": str(get_auto_parallel_context("parallel_mode")),
                "layouts": records}
    return IDENTITY, json.dumps(identity, sort_keys=True)


def _describe(record):
    if record is None:
        return "the whole value"
    if "row_slice" in record:
        part = record["row_slice"]
        return (f"rows {part['offset']}..{part['offset'] + part['rows'] - 1} of a "
                f"{part['full_shape'][0]}-row table (rank {part['rank']} of {part['size']})")
    mapped = [m for m in record.get("tensor_map", [])]
    return (f"the block of rank {record['rank']} under device matrix "
            f"{tuple(record['device_matrix'])}, tensor map {tuple(mapped)}, full shape "
            f"{tuple(record['shape'])}")


def _who(identity):
    if not identity or identity.get("rank") is None:
        return ""
    return f" (saved by rank {identity['rank']} of {identity['world_size']})"


def _here(rank, size):
    return "" if rank is None else f" (rank {rank} of {size})"


def _comparable(record):
    """The fields that decide which block a record holds (JSON lists and tuples alike)."""
    if record is None:
        return None
    return json.loads(json.dumps(record, sort_keys=True))


def check_slice(name, param, value, mine):
    """Refuse ``value`` (read from a checkpoint) for ``param`` unless its slice record
    equals ``mine`` (this process's record for ``param``, None when it holds it whole)."""
    origin = getattr(value, "checkpoint_origin", None)
    if origin is None:
        return                      # a value the caller made: its shape is all we know
    saved, identity, path = origin.get("slice"), origin.get("identity"), origin["file"]
    rank, size = _world_of_values((param,))
    if saved is None:
        if mine is not None and tuple(value.shape) == tuple(param.shape) \
                and tuple(param.shape) != _full_shape(mine):
            raise ValueError(
                f"load_param_into_net: {path!r} holds {name!r} with the shape of one rank's "
                f"slice {tuple(value.shape)} but does not record whose slice it is (it was "
                "saved before checkpoints recorded their rank), so it could land on the "
                "wrong rank; re-save it with this version (save_checkpoint(...) with the "
                "default integrated_save=True writes whole tensors that load on any rank "
                "or layout), or merge the ranks' files first (merge_sharded_checkpoints)")
        return
    if _comparable(saved) != _comparable(mine):
        raise ValueError(
            f"load_param_into_net: {name!r} in {path!r} is {_describe(saved)}"
            f"{_who(identity)}, but this process{_here(rank, size)} holds "
            f"{_describe(mine)}; load each rank's own file, or save whole tensors "
            "(integrated_save=True) or merge the ranks' files (merge_sharded_checkpoints) "
            "to load on another rank or layout")
    if identity and identity.get("world_size") is not None and size is not None \
            and (identity["world_size"], identity["rank"]) != (size, rank):
        raise ValueError(
            f"load_param_into_net: {path!r} was saved by rank {identity['rank']} of a "
            f"{identity['world_size']}-rank job, but this is rank {rank} of {size}; load "
            "each rank's own file, or save whole tensors (integrated_save=True)")


def _full_shape(record):
    if "row_slice" in record:
        return tuple(record["row_slice"]["full_shape"])
    return tuple(record["shape"])
