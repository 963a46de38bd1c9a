"""Checkpoints of a sharded network: whole tensors, or each rank's slices with their layout.

``save_checkpoint``'s default (``integrated_save=True``, as in MindSpore) gathers every
sliced parameter over the ranks that share it (``integrated_entries``: a collective, so every
rank of the sharded group must save) and writes the whole tensor; a STAND_ALONE network
loads the file as it is, and a sharded one takes its block on loading (``local_value``).
With ``integrated_save=False`` each rank saves its slices with their layout; one call
merges the ranks' files into the full checkpoint.

A sliced parameter carries ``sharding_layout`` (a ``TensorLayout``) and ``sharding_rank``;
``save_checkpoint`` then adds, per sliced parameter ``name``, a string entry
``sharding_layout.<name>`` (JSON: device matrix, tensor map, full shape, rank).
``merge_sharded_checkpoints(files, out)`` puts every rank's block in place
(``assemble_array``, which also checks that the copies of a block agree) and keeps the
unsliced entries, which must be equal in every file.

A file of slices also carries ``__rank_identity__`` (``slice_identity``): loading checks
each slice against the parameter it would fill (``local_value``) and refuses another
rank's, layout's or world's slices, naming both sides. A row-sliced embedding table
(``row_slice``) is recorded the same way, and takes its rows of a whole table on loading.
"""
import json

import numpy as np

from ...train.checkpoint_identity import is_identity_entry
from .layout import TensorLayout, assemble_array
from .slice_identity import check_slice, identity_entry, row_slice_json

__all__ = ["LAYOUT_PREFIX", "layout_entries", "layout_json", "layout_from_json",
           "merge_sharded_checkpoints", "integrated_entries", "local_value"]

LAYOUT_PREFIX = "sharding_layout."


def layout_json(param):
    """A sliced parameter's layout as a JSON-ready dict (device matrix, tensor map, full
    shape, the rank whose block it holds)."""
    layout = param.sharding_layout
    spec = {"device_matrix": list(layout.device_matrix),
            "tensor_map": [list(m) if isinstance(m, tuple) else m for m in layout.tensor_map],
            "shape": list(layout.shape), "rank": int(param.sharding_rank)}
    if layout.row_blocks:
        spec["row_blocks"] = list(layout.row_blocks)
    return spec


def layout_from_json(spec):
    """``(TensorLayout, rank)`` from ``layout_json``'s dict."""
    tensor_map = tuple(tuple(m) if isinstance(m, list) else m for m in spec["tensor_map"])
    return TensorLayout(tuple(spec["device_matrix"]), tensor_map, tuple(spec["shape"]),
                        row_blocks=tuple(spec.get("row_blocks", ()))), spec["rank"]


def slice_record(value):
    """What slice of a whole tensor ``value`` holds in this process (``slice_identity``), or
    None when it holds the whole tensor."""
    if getattr(value, "sharding_layout", None) is not None:
        return layout_json(value)
    if getattr(value, "row_slice", None) is not None:
        return row_slice_json(value.row_slice)
    return None


def layout_entries(entries):
    """The string entries describing the sliced values among ``(name, value)``: a
    checkpoint of a sharded rank holds each parameter's slice, and says so here (one
    ``sharding_layout.<name>`` per operator-sharded value, read by the merge, and the
    file's ``__rank_identity__``, checked on loading)."""
    out = [(LAYOUT_PREFIX + name, json.dumps(layout_json(value)))
           for name, value in entries if getattr(value, "sharding_layout", None) is not None]
    records = {name: slice_record(value) for name, value in entries
               if not isinstance(value, str) and slice_record(value) is not None}
    if records:
        out.append(identity_entry(records, [value for _, value in entries]))
    return out


def _gathered(value):
    """A sliced ``value``'s whole tensor, gathered over its ``sharding_comm``."""
    from ...backend import get_device
    from ...tensor import Tensor
    from ..comm.collectives import communicator_for
    layout = value.sharding_layout
    local = np.ascontiguousarray(value.asnumpy())
    data, counts = communicator_for(value.sharding_comm, get_device("CPU")).allgatherv(
        local.reshape(-1))
    pieces = np.split(data, np.cumsum(counts)[:-1])
    blocks = [piece.reshape(layout.local_shape(r)) for r, piece in enumerate(pieces)]
    return Tensor(assemble_array(blocks, layout).astype(local.dtype, copy=False))


def _sliced(value):
    return (getattr(value, "sharding_layout", None) is not None
            and getattr(value, "sharding_comm", None) is not None)


def integrated_entries(entries):
    """``(name, value)`` entries with each sliced value replaced by the whole tensor,
    gathered over its ``sharding_comm`` in entry order (the same on every rank: the same
    network). The copies held by several ranks are checked to agree."""
    for name, value in entries:        # every check before the first collective
        if not _sliced(value):
            continue
        layout, comm = value.sharding_layout, value.sharding_comm
        if comm.size != layout.num_devices or comm.rank != value.sharding_rank:
            raise ValueError(f"save_checkpoint: {name!r} is sliced over {layout.num_devices} "
                             f"ranks, but its group has {comm.size} (rank {comm.rank}, slice of "
                             f"rank {value.sharding_rank}); save with integrated_save=False")
    return [(name, _gathered(value) if _sliced(value) else value) for name, value in entries]


def local_value(param, value, name=None):
    """``param``'s block of a whole checkpoint ``value`` when ``param`` is sliced and
    ``value`` has the full shape; else ``value`` unchanged. A slice read from a per-rank
    file must be this rank's own (``slice_identity.check_slice``)."""
    check_slice(name or param.name, param, value, slice_record(param))
    part = getattr(param, "row_slice", None)
    if part is not None and tuple(value.shape) == tuple(part.full_shape) \
            and tuple(param.shape) != tuple(part.full_shape):
        from ...tensor import Tensor
        return Tensor(np.ascontiguousarray(value.asnumpy()[part.offset:part.offset + part.rows]))
    layout = getattr(param, "sharding_layout", None)
    if layout is None or tuple(value.shape) != tuple(layout.shape) \
            or tuple(param.shape) == tuple(layout.shape):
        return value
    from ...tensor import Tensor
    block = value.asnumpy()[layout.slice_for(param.sharding_rank)]
    return Tensor(np.ascontiguousarray(block))


def _layout(text):
    return layout_from_json(json.loads(text))


def merge_sharded_checkpoints(rank_files, output_file):
    """Write the full checkpoint of the ranks' ``rank_files`` (one per rank, any order) to
    ``output_file``; returns ``{name: Tensor}``."""
    from ...tensor import Tensor
    from ...train.checkpoint import load_checkpoint, save_checkpoint
    loaded = [load_checkpoint(path) for path in rank_files]
    if not loaded:
        raise ValueError("merge_sharded_checkpoints: no checkpoint files given")
    blocks, layouts, merged = {}, {}, {}
    for path, entries in zip(rank_files, loaded):
        for key, value in entries.items():
            if not key.startswith(LAYOUT_PREFIX):
                continue
            name = key[len(LAYOUT_PREFIX):]
            layout, rank = _layout(value)
            if layouts.setdefault(name, layout) != layout:
                raise ValueError(f"merge_sharded_checkpoints: {name!r} has layout {layout} in "
                                 f"{path} but {layouts[name]} in another file")
            blocks.setdefault(name, {})[rank] = entries[name].asnumpy()
    for name, layout in layouts.items():
        have = blocks[name]
        if sorted(have) != list(range(layout.num_devices)):
            raise ValueError(f"merge_sharded_checkpoints: {name!r} needs the files of ranks "
                             f"0..{layout.num_devices - 1}, got ranks {sorted(have)}")
        merged[name] = Tensor(assemble_array([have[r] for r in range(layout.num_devices)], layout))
    for path, entries in zip(rank_files, loaded):
        for key, value in entries.items():
            if is_identity_entry(key) or key in layouts:
                continue            # the merged file holds whole values: no rank's slices
            if key not in merged:
                merged[key] = value
            elif isinstance(value, Tensor) and not np.array_equal(merged[key].asnumpy(), value.asnumpy()):
                raise ValueError(f"merge_sharded_checkpoints: unsliced entry {key!r} differs "
                                 f"between the ranks' files ({path})")
    save_checkpoint(merged, output_file)
    return merged
