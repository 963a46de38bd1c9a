"""Per-rank checkpoints moved from one sharding strategy to another (MindSpore's
``transform_checkpoints``, ``transform_checkpoint_by_rank``, ``rank_list_for_transform``,
``build_searched_strategy``).

A job that saved its slices (``save_checkpoint(..., integrated_save=False)``) on N ranks
under one strategy resumes on M ranks under another: the strategy files of both runs
(``strategy_ckpt_config={"save_file": ...}``, or ``strategy_ckpt_save_file``) say which
block of every sliced parameter each rank holds. For a target rank, each of its blocks is cut
from the source blocks that overlap it (``rank_list_for_transform`` names the source ranks
needed), and the result is written with the target rank's identity record, so that
``load_checkpoint`` on that rank accepts it and any other rank refuses it. A strategy file
of ``None`` means "not sliced" (one process, or whole tensors).

A pipelined job's strategy is the stages' files merged (``merge_pipeline_strategys``): each
parameter's layout covers its stage's ranks only (``strategy_ckpt_pipeline.PlacedLayout``),
so its blocks are read from those ranks' files, and a pipelined destination rank receives
its own stage's entries only. A single stage's file is refused: it knows one stage.

Everything is checked before a byte is written: the strategy files must be readable, every
parameter the two files share must have the same full shape in both, and each source file
must hold the block its strategy (and its own identity record) says.

Values are copied, never computed: the round trip N -> M -> 1 is bit for bit.
"""
import json
import math
import os

import numpy as np

from ..train.checkpoint_identity import IDENTITY, is_identity_entry
from ..runtime import _once
from .context import get_auto_parallel_context
from .sharding.checkpoint import layout_from_json
from .sharding.strategy_file import read_strategy_file
from .strategy_ckpt_pipeline import read_placed_strategy

__all__ = ["build_searched_strategy", "rank_list_for_transform", "transform_checkpoint_by_rank",
           "transform_checkpoints", "strategy_world", "check_same_shapes", "block_of",
           "param_of", "transformed_entries"]


# ---- strategies ---------------------------------------------------------------------------
def build_searched_strategy(strategy_filename):
    """``{parameter name: TensorLayout}`` of a strategy file (MindSpore returns its
    protobuf layouts; here the layout object carries ``device_matrix``, ``tensor_map`` and
    the full ``shape``). A missing or malformed file is a ``ValueError`` naming it."""
    if not isinstance(strategy_filename, str):
        raise TypeError("build_searched_strategy: strategy_filename must be a str, got "
                        f"{type(strategy_filename).__name__}")
    if not os.path.isfile(strategy_filename):
        raise ValueError(f"build_searched_strategy: no strategy file {strategy_filename!r}")
    specs = read_strategy_file(strategy_filename, "build_searched_strategy")
    return {name: layout_from_json(dict(spec, rank=0))[0] for name, spec in specs.items()}


def _strategy(path, what, owner):
    """The ``PlacedLayout``\\ s of strategy file ``path`` (None: nothing sliced): a plain
    file's, or a merged pipeline file's, whose layouts live on their stages' ranks only."""
    if path is None:
        return None
    if not isinstance(path, str):
        raise TypeError(f"{owner}: {what} must be a str or None, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise ValueError(f"{owner}: {what} {path!r} does not exist")
    return read_placed_strategy(path, owner, what)


def strategy_world(layouts, what, owner):
    """The number of ranks a strategy lays its parameters over (1 for ``None``)."""
    if not layouts:
        return 1
    sizes = {layout.world for layout in layouts.values()}
    if len(sizes) != 1:
        raise ValueError(f"{owner}: the {what} lays parameters over different numbers of "
                         f"ranks {sorted(sizes)}; a strategy file comes from one job")
    return sizes.pop()


def check_same_shapes(src, dst, owner):
    """Refuse two strategies that give a parameter different full shapes (they belong to
    different networks, or a layer was resized): nothing could be transformed."""
    clash = sorted(f"{name}: {src[name].shape} in the source, {dst[name].shape} in the "
                   "destination" for name in set(src or {}) & set(dst or {})
                   if src[name].shape != dst[name].shape)
    if clash:
        raise ValueError(f"{owner}: the source and destination strategies disagree on the "
                         f"shapes of {'; '.join(clash)}; they are strategies of different "
                         "networks, so no checkpoint was transformed")


def _check_rank(rank_id, world, owner):
    if isinstance(rank_id, bool) or not isinstance(rank_id, int):
        raise TypeError(f"{owner}: rank_id must be an int, got {type(rank_id).__name__}")
    if not 0 <= rank_id < world:
        raise ValueError(f"{owner}: rank_id {rank_id} is outside the destination strategy's "
                         f"{world} rank(s) (0..{world - 1})")


# ---- which source blocks a target block needs ---------------------------------------------
def block_of(layout, rank, shape):
    """The block of a ``shape`` tensor ``rank`` holds: its slices, whole for no layout, None
    when ``rank`` holds none of it (another pipeline stage's parameter)."""
    if layout is None:
        return tuple(slice(0, n) for n in shape)
    return layout.slice_for(rank) if layout.holds(rank) else None


def _overlaps(a, b):
    return all(x.start < y.stop and y.start < x.stop for x, y in zip(a, b))


def _source_ranks(src_layout, dst_block, shape, src_world):
    """The source ranks whose blocks overlap ``dst_block``: of several ranks holding the
    same block, the lowest."""
    chosen = {}
    for rank in range(src_world):
        block = block_of(src_layout, rank, shape)
        if block is None:
            continue
        key = tuple((s.start, s.stop) for s in block)
        if key not in chosen and _overlaps(block, dst_block):
            chosen[key] = rank
    return set(chosen.values())


def _plan(src, dst, owner):
    """Both strategies checked: (src layouts, dst layouts, src world, dst world)."""
    check_same_shapes(src, dst, owner)
    return (src or {}, dst or {}, strategy_world(src, "source strategy", owner),
            strategy_world(dst, "destination strategy", owner))


def _needed_ranks(rank_id, src, dst, src_world):
    needed = {0}                     # unsliced entries are read from the first source file
    for name in set(src) | set(dst):
        layout = src.get(name) or dst[name]
        shape = layout.shape
        target = block_of(dst.get(name), rank_id, shape)
        if target is not None:          # else a parameter of another destination stage
            needed |= _source_ranks(src.get(name), target, shape, src_world)
    return sorted(needed)


def rank_list_for_transform(rank_id, src_strategy_file=None, dst_strategy_file=None):
    """The source ranks whose checkpoint files ``transform_checkpoint_by_rank`` needs to make
    ``rank_id``'s checkpoint under the destination strategy (MindSpore's function)."""
    owner = "rank_list_for_transform"
    src, dst, src_world, dst_world = _plan(
        _strategy(src_strategy_file, "src_strategy_file", owner),
        _strategy(dst_strategy_file, "dst_strategy_file", owner), owner)
    _check_rank(rank_id, dst_world, owner)
    return _needed_ranks(rank_id, src, dst, src_world)


# ---- reading source files -----------------------------------------------------------------
def param_of(name, shape, layouts):
    """The parameter whose layout a checkpoint entry follows: the entry's own name, or for
    optimizer state named ``<prefix>.<parameter>`` (moments, accumulators) of the
    parameter's full or block shape, that parameter; None for an unsliced entry."""
    if name in layouts:
        return name
    for param, layout in layouts.items():
        if name.endswith("." + param) and tuple(shape) in (layout.shape,
                                                           layout.layout.local_shape(0)):
            return param
    return None


def _source_record(entries, name, path):
    identity = entries.get(IDENTITY)
    if not isinstance(identity, str):
        return None, None
    try:
        record = json.loads(identity)
    except ValueError:
        raise ValueError(f"transform: the {IDENTITY} entry of {path!r} is corrupt") from None
    return record, record.get("layouts", {}).get(name)


def _check_source_block(name, value, layout, rank, path, entries):
    """Refuse a source value that is not the block ``layout`` gives ``rank``."""
    identity, record = _source_record(entries, name, path)
    if record is not None and "row_slice" not in record:
        saved, saved_rank = layout_from_json(record)
        if saved == layout.layout and saved_rank != layout.local_rank(rank):
            raise ValueError(f"transform: {path!r} holds rank {saved_rank}'s block of {name!r}, "
                             f"but it was given as the file of rank {rank}")
        if saved != layout.layout:
            raise ValueError(f"transform: {name!r} in {path!r} is rank {saved_rank}'s block of "
                             f"{saved}, but the source strategy gives rank {rank} the block of "
                             f"{layout}: the files and the strategy file are of different runs")
    if identity is not None and identity.get("rank") not in (None, rank):
        raise ValueError(f"transform: {path!r} was saved by rank {identity['rank']}, but it "
                         f"was given as the file of rank {rank}")
    want = layout.local_shape(rank)
    if tuple(value.shape) != want:
        raise ValueError(f"transform: {name!r} in {path!r} has shape {tuple(value.shape)}, but "
                         f"rank {rank}'s block under the source strategy has shape {want}")


def _load_sources(files, ranks, owner):
    from ..train.checkpoint import load_checkpoint
    missing = [r for r in ranks if r not in files]
    if missing:
        raise ValueError(f"{owner}: the source checkpoint files of ranks {missing} are needed "
                         f"but checkpoint_files_map has ranks {sorted(files)}")
    loaded = {}
    for rank in ranks:
        path = files[rank]
        if not isinstance(path, str) or not os.path.isfile(path):
            raise ValueError(f"{owner}: the checkpoint file of rank {rank}, {path!r}, does not "
                             "exist")
        loaded[rank] = load_checkpoint(path)
    return loaded


def _target_value(name, sources, files, src_layout, dst_layout, rank_id, first):
    """The destination rank's value of entry ``name``, cut from the source blocks (``first``:
    the lowest source rank whose file holds it)."""
    value = sources[first][name]
    if src_layout is None or tuple(value.shape) == src_layout.shape:
        if dst_layout is None or tuple(value.shape) != dst_layout.shape:
            return value.asnumpy()          # whole everywhere, or not a sliced entry at all
        return np.ascontiguousarray(value.asnumpy()[dst_layout.slice_for(rank_id)])
    shape = src_layout.shape
    target = block_of(dst_layout, rank_id, shape)
    out = np.empty(tuple(s.stop - s.start for s in target), value.asnumpy().dtype)
    for rank in sorted(_source_ranks(src_layout, target, shape, src_layout.world)):
        block = sources[rank].get(name)
        if block is None or isinstance(block, str):
            raise ValueError(f"transform: {name!r} is in {files[first]!r} but not in "
                             f"{files[rank]!r}: the ranks' files are of different networks")
        _check_source_block(name, block, src_layout, rank, files[rank], sources[rank])
        have = src_layout.slice_for(rank)
        common = tuple(slice(max(a.start, b.start), min(a.stop, b.stop))
                       for a, b in zip(have, target))
        out[tuple(slice(c.start - b.start, c.stop - b.start) for c, b in zip(common, target))] = \
            block.asnumpy()[tuple(slice(c.start - a.start, c.stop - a.start)
                                  for c, a in zip(common, have))]
    return out


def _identity_for(rank_id, layouts, dst_world, parallel_mode):
    """The ``__rank_identity__`` entry of a destination file holding ``{name: layout}``."""
    records = {}
    for name, placed in layouts.items():
        layout = placed.layout
        spec = {"device_matrix": list(layout.device_matrix),
                "tensor_map": [list(m) if isinstance(m, tuple) else m for m in layout.tensor_map],
                "shape": list(layout.shape), "rank": placed.local_rank(rank_id)}
        if layout.row_blocks:
            spec["row_blocks"] = list(layout.row_blocks)
        records[name] = spec
    return json.dumps({"rank": rank_id, "world_size": dst_world, "parallel_mode": parallel_mode,
                       "layouts": records}, sort_keys=True)


def _check_unplanned_slices(entries, path, src, owner):
    """Refuse slices the source strategy does not describe: read as whole values they would
    put one rank's block everywhere."""
    identity, _ = _source_record(entries, "", path)
    sliced = sorted(name for name, record in ((identity or {}).get("layouts") or {}).items()
                    if name in entries and param_of(name, entries[name].shape, src) is None)
    if sliced:
        raise ValueError(f"{owner}: {path!r} holds slices of {sliced}, which the source "
                         "strategy does not lay out" + ("" if src else " (no source strategy "
                         "file was given)") + "; pass the strategy file the saving run wrote "
                         "(strategy_ckpt_config={'save_file': ...})")
    odd = sorted(f"{name} {tuple(value.shape)} (of {param!r}, {layouts.shape})"
                 for name, value in entries.items() if not isinstance(value, str)
                 for param, layouts in src.items()
                 if name != param and name.endswith("." + param)
                 and param_of(name, value.shape, src) is None
                 and 0 < value.size < math.prod(layouts.shape))
    if odd:
        raise ValueError(f"{owner}: {path!r} holds {odd}: state of a parameter the source "
                         "strategy lays out, but neither its full shape nor its block (a "
                         "slice the strategy does not describe, such as optimizer parallel's "
                         "flat state slices); save those states whole, or transform the "
                         "parameters' checkpoint without them")


def _entry_names(sources):
    """Every entry name of the loaded files (rank order, then file order), identity records
    left out: a pipeline stage's file holds only that stage's entries."""
    names = {}
    for rank in sorted(sources):
        names.update((name, None) for name in sources[rank] if not is_identity_entry(name))
    return list(names)


def _check_all_found(rank_id, src, dst, names, files, owner):
    """Every parameter the source strategy lays out for this destination rank must be in
    the files read: a stage file that lost a parameter would drop it silently."""
    lost = sorted(name for name, layout in src.items()
                  if name not in names and (dst.get(name) is None or dst[name].holds(rank_id)))
    if lost:
        raise ValueError(f"{owner}: the source strategy lays out {lost}, but none of the files "
                         f"read ({sorted(set(files.values()))}) holds them; the files and the "
                         "strategy file are of different runs")


def _holder_of(name, layout, sources, files, owner):
    """The lowest source rank read whose stage holds ``layout``'s parameter and whose file
    has entry ``name``."""
    holders = [rank for rank in sorted(sources) if name in sources[rank] and layout.holds(rank)]
    if not holders:
        raise ValueError(f"{owner}: {name!r} is in {sorted({files[r] for r in sources})}, "
                         f"but in none of the files of the ranks that hold it ({layout}); the "
                         "files and the strategy file are of different runs")
    return holders[0]


def transformed_entries(rank_id, files, src, dst, src_world, dst_world, owner):
    """``{name: array or str}``: rank ``rank_id``'s checkpoint under ``dst`` (of a pipelined
    destination, only the entries of ``rank_id``'s stage)."""
    ranks = _needed_ranks(rank_id, src, dst, src_world)
    sources = _load_sources(files, ranks, owner)
    for rank in ranks:
        _check_unplanned_slices(sources[rank], files[rank], src, owner)
    names = _entry_names(sources)
    _check_all_found(rank_id, src, dst, set(names), {r: files[r] for r in ranks}, owner)
    out, dst_layouts = {}, {}
    for name in names:
        first = min(rank for rank in ranks if name in sources[rank])
        value = sources[first][name]
        if isinstance(value, str):
            out[name] = value
            continue
        param = param_of(name, value.shape, src) or param_of(name, value.shape, dst)
        dst_layout = dst.get(param)
        if dst_layout is not None and not dst_layout.holds(rank_id):
            continue                    # another destination stage's parameter
        if src.get(param) is not None and not src[param].holds(first):
            # a stage's file may hold a stale copy of another stage's state: read a holder's
            first = _holder_of(name, src[param], sources, files, owner)
            value = sources[first][name]
        out[name] = _target_value(name, sources, files, src.get(param), dst_layout,
                                  rank_id, first)
        if dst_layout is not None and out[name].shape != dst_layout.shape:
            dst_layouts[name] = dst_layout
    if dst:
        identity, _ = _source_record(sources[ranks[0]], "", files[ranks[0]])
        mode = (identity or {}).get("parallel_mode") or \
            str(get_auto_parallel_context("parallel_mode"))
        out[IDENTITY] = _identity_for(rank_id, dst_layouts, dst_world, mode)
    return out


def _write(entries, path):
    from ..tensor import Tensor
    from ..train.checkpoint import save_checkpoint
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    save_checkpoint({name: value if isinstance(value, str) else Tensor(value)
                     for name, value in entries.items()}, path)


# ---- the public transforms ----------------------------------------------------------------
def transform_checkpoint_by_rank(rank_id, checkpoint_files_map, save_checkpoint_file_name,
                                 src_strategy_file=None, dst_strategy_file=None):
    """Write rank ``rank_id``'s checkpoint under ``dst_strategy_file`` to
    ``save_checkpoint_file_name`` (must end in ".ckpt"), from ``checkpoint_files_map``
    (``{source rank: file}``, at least the ranks ``rank_list_for_transform`` names)."""
    owner = "transform_checkpoint_by_rank"
    if not isinstance(checkpoint_files_map, dict):
        raise TypeError(f"{owner}: checkpoint_files_map must be a dict {{rank: file}}, got "
                        f"{type(checkpoint_files_map).__name__}")
    if not isinstance(save_checkpoint_file_name, str):
        raise TypeError(f"{owner}: save_checkpoint_file_name must be a str, got "
                        f"{type(save_checkpoint_file_name).__name__}")
    if not save_checkpoint_file_name.endswith(".ckpt"):
        raise ValueError(f"{owner}: save_checkpoint_file_name must end with '.ckpt', got "
                         f"{save_checkpoint_file_name!r}")
    src, dst, src_world, dst_world = _plan(
        _strategy(src_strategy_file, "src_strategy_file", owner),
        _strategy(dst_strategy_file, "dst_strategy_file", owner), owner)
    _check_rank(rank_id, dst_world, owner)
    entries = transformed_entries(rank_id, checkpoint_files_map, src, dst, src_world,
                                  dst_world, owner)
    _write(entries, save_checkpoint_file_name)


def _rank_files(src_checkpoints_dir, src_world, owner):
    """``{rank: file}`` from ``<dir>/rank_<r>/``: of several files, the last by name."""
    files = {}
    for rank in range(src_world):
        folder = os.path.join(src_checkpoints_dir, f"rank_{rank}")
        names = sorted(n for n in os.listdir(folder) if n.endswith(".ckpt")) \
            if os.path.isdir(folder) else []
        if not names:
            raise ValueError(f"{owner}: {folder!r} holds no .ckpt file; the source directory "
                             f"must hold rank_0 .. rank_{src_world - 1}, one checkpoint each")
        files[rank] = os.path.join(folder, names[-1])
    return files


def _unsliced_destination_world(path, owner):
    """The ranks a destination strategy file that slices nothing is for. Such a file lists
    no parameter (MindSpore's lists every one, with its device count), so it cannot say:
    the ranks of the job that calls are taken, each given the whole checkpoint, and a note
    says so (one process: one file)."""
    from .sharding.scope import current_world
    world = current_world()
    if world is None or world.size == 1:
        return 1
    _once(f"transform_checkpoints.unsliced.{path}", f"{owner}: the destination strategy file "
          f"{path!r} slices no parameter, so it does not say how many ranks it is for; the "
          f"whole checkpoint is written for each of this job's {world.size} ranks")
    return world.size


def transform_checkpoints(src_checkpoints_dir, dst_checkpoints_dir, ckpt_prefix,
                          src_strategy_file=None, dst_strategy_file=None, process_num=1,
                          output_format="ckpt"):
    """Every destination rank's checkpoint, written to
    ``<dst_checkpoints_dir>/rank_<r>/<ckpt_prefix><r>.ckpt`` from the files in
    ``<src_checkpoints_dir>/rank_<r>/`` (MindSpore's layout). All ranks are computed and
    checked before the first file is written."""
    owner = "transform_checkpoints"
    for what, value in (("src_checkpoints_dir", src_checkpoints_dir),
                        ("dst_checkpoints_dir", dst_checkpoints_dir), ("ckpt_prefix", ckpt_prefix)):
        if not isinstance(value, str):
            raise TypeError(f"{owner}: {what} must be a str, got {type(value).__name__}")
    if not os.path.isdir(src_checkpoints_dir):
        raise ValueError(f"{owner}: src_checkpoints_dir {src_checkpoints_dir!r} is not a folder")
    if isinstance(process_num, bool) or not isinstance(process_num, int) or process_num < 1:
        raise ValueError(f"{owner}: process_num must be a positive int, got {process_num!r}")
    if output_format != "ckpt":
        raise ValueError(f"{owner}: output_format must be 'ckpt' (safetensors output is not "
                         f"supported here), got {output_format!r}")
    dst_layouts = _strategy(dst_strategy_file, "dst_strategy_file", owner)
    src, dst, src_world, dst_world = _plan(
        _strategy(src_strategy_file, "src_strategy_file", owner), dst_layouts, owner)
    if dst_layouts == {}:
        dst_world = _unsliced_destination_world(dst_strategy_file, owner)
    files = _rank_files(src_checkpoints_dir, src_world, owner)
    if process_num > 1:     # it would only split this loop across processes: same files
        _once("transform_checkpoints.process_num", f"transform_checkpoints: process_num="
              f"{process_num} is served by one process (the files written are the same)")
    results = [transformed_entries(r, files, src, dst, src_world, dst_world, owner)
               for r in range(dst_world)]
    for rank, entries in enumerate(results):
        _write(entries, os.path.join(dst_checkpoints_dir, f"rank_{rank}",
                                     f"{ckpt_prefix}{rank}.ckpt"))
