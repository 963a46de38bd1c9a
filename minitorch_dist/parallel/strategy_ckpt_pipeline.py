"""Strategy files of a pipelined job: one per stage, merged into one (MindSpore's per-rank
``strategy_ckpt_config={"save_file": ...}`` files of a pipelined run and
``merge_pipeline_strategys``).

Every rank of a pipelined job holds only its stage's parameters, so its strategy file lists
those, each with its layout over the stage's ranks (a replicated one for an unsliced
parameter) and a ``"pipeline"`` record: the number of stages, the stage and the stage's
ranks (``{"stages": 2, "held_by": [[1, [2, 3]]], "merged": false}``: stage 1 of 2, on ranks 2
and 3). The layouts cover the stage's ranks only, as MindSpore's do; the record says which
ranks those are, so that a transform knows where each block lives.

``merge_pipeline_strategys(src_strategy_dirs, dst_strategy_file)`` reads every stage's file
from one folder and writes one file covering all parameters (``"merged": true``; a parameter
used by several stages lists each). ``checkpoint_transform`` reads it as ``PlacedLayout``\\ s.
A per-stage file is refused there: it knows one stage only.
"""
import glob
import math
import os

from .sharding.checkpoint import layout_from_json, layout_json
from .sharding.strategy_file import read_strategy_file, write_layouts

__all__ = ["PIPELINE_KEY", "PlacedLayout", "stage_entries", "write_stage_strategy_file",
           "check_stage_strategy_file", "merge_pipeline_strategys", "read_placed_strategy"]

PIPELINE_KEY = "pipeline"


# ---- a layout over the ranks that hold it -------------------------------------------------
class PlacedLayout:
    """A parameter's ``TensorLayout`` over one stage's ranks, placed on the world ranks of
    every stage that holds it (``groups``: one rank list per holding stage); ``world``: the
    job's ranks. A rank outside the groups holds nothing of it. A plain (unpipelined) layout
    is the one group ``0 .. n-1``."""

    def __init__(self, layout, groups, world):
        self.layout = layout
        self.groups = tuple(tuple(g) for g in groups)
        self.world = world
        self._local = {rank: i for group in self.groups for i, rank in enumerate(group)}

    @classmethod
    def plain(cls, layout):
        return cls(layout, [range(layout.num_devices)], layout.num_devices)

    @property
    def shape(self):
        return self.layout.shape

    @property
    def row_blocks(self):
        return self.layout.row_blocks

    def holds(self, rank):
        return rank in self._local

    def local_rank(self, rank):
        """``rank``'s index in its stage's group: the block of the layout it holds."""
        return self._local[rank]

    def slice_for(self, rank):
        return self.layout.slice_for(self._local[rank])

    def local_shape(self, rank):
        return self.layout.local_shape(self._local[rank])

    def _key(self):
        return self.layout, self.groups, self.world

    def __eq__(self, other):
        return isinstance(other, PlacedLayout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        if self.groups == (tuple(range(self.world)),):
            return str(self.layout)
        return f"{self.layout} on ranks {[list(g) for g in self.groups]}"


# ---- writing a stage's file ---------------------------------------------------------------
def _stage_spec(param, devices, stages, stage):
    """``param``'s entry in stage ``stage``'s file: its layout over the stage's ranks."""
    if getattr(param, "row_slice", None) is not None:
        raise ValueError(f"strategy_ckpt_config save_file: {param.name!r} is a row-sliced "
                         "embedding table, which a pipelined strategy file cannot describe; "
                         "unset save_file for this job")
    if getattr(param, "sharding_layout", None) is not None:
        spec = layout_json(param)
        if spec["device_matrix"] and math.prod(spec["device_matrix"]) != len(devices):
            raise ValueError(f"strategy_ckpt_config save_file: {param.name!r} is sliced over "
                             f"{math.prod(spec['device_matrix'])} ranks, but its stage {stage} has "
                             f"{len(devices)} ({devices}); a stage's layouts cover its ranks")
    else:
        spec = {"device_matrix": [len(devices)], "tensor_map": [-1] * len(param.shape),
                "shape": list(param.shape), "rank": 0}
    spec[PIPELINE_KEY] = {"stages": stages, "held_by": [[stage, list(devices)]], "merged": False}
    return spec


def stage_entries(network, topology, stages_of, only_trainable=True):
    """``{name: layout dict with its pipeline record}`` of every parameter of ``network`` that
    this rank's stage holds (``stages_of(param)``: the stages using it; none means every
    stage), trainable ones only with ``only_trainable`` (MindSpore's
    ``only_trainable_params``)."""
    stage, stages = topology.stage, topology.stages
    devices = topology.data_parallel_ranks
    entries = {}
    for param in network.get_parameters():
        used = stages_of(param) or set(range(stages))
        if stage not in used or (only_trainable and not param.requires_grad):
            continue
        entries[param.name] = _stage_spec(param, devices, stages, stage)
    return entries


def write_stage_strategy_file(path, network, topology, stages_of, only_trainable=True):
    """Write this rank's stage file (``stage_entries``) to ``path``."""
    write_layouts(path, stage_entries(network, topology, stages_of, only_trainable))


def check_stage_strategy_file(path, network, topology, stages_of, owner="strategy_ckpt_config "
                              "load_file"):
    """Refuse a plan of this rank's stage that differs from strategy file ``path`` (a stage
    file of the same job shape, or the merged file): a parameter laid out otherwise, a file
    of a job with another stage count, or a file none of whose parameters this stage holds.
    Like an unpipelined ``load_file``, the file is checked against, it sets nothing."""
    specs, records = read_pipeline_records(path, owner)
    if not records:
        raise ValueError(f"{owner}: {path!r} is the strategy file of a job without pipeline "
                         f"stages; this job has {topology.stages}, whose layouts cover one "
                         "stage's ranks: save the file from a pipelined run")
    stages = next(iter(records.values()))["stages"]
    if stages != topology.stages:
        raise ValueError(f"{owner}: {path!r} is the strategy file of a {stages}-stage job, "
                         f"but this job has pipeline_stages={topology.stages}")
    now = stage_entries(network, topology, stages_of, only_trainable=False)
    common = sorted(set(now) & set(specs))
    if not common:
        raise ValueError(f"{owner}: {path!r} lays out {sorted(specs)}, none of which stage "
                         f"{topology.stage} holds ({sorted(now)}): it is the file of another "
                         "network or of another stage")
    wrong = [name for name in common if _layout_only(now[name]) != _layout_only(specs[name])]
    if wrong:
        raise ValueError(f"{owner}: stage {topology.stage} lays out {wrong} differently from "
                         f"{path!r}: their strategies changed since it was saved")


# ---- reading ------------------------------------------------------------------------------
def _record_problem(record):
    if not isinstance(record, dict):
        return "not a JSON object"
    stages = record.get("stages")
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        return "'stages' must be a positive int"
    held = record.get("held_by")
    if not isinstance(held, list) or not held or not all(
            isinstance(h, list) and len(h) == 2 and isinstance(h[0], int) and 0 <= h[0] < stages
            and isinstance(h[1], list) and h[1] and all(isinstance(r, int) and r >= 0 for r in h[1])
            for h in held):
        return "'held_by' must list [stage, [ranks]] pairs of stages below 'stages'"
    if not isinstance(record.get("merged"), bool):
        return "'merged' must be true or false"
    return None


def read_pipeline_records(path, owner):
    """``(specs, records)`` of a strategy file: its ``{name: layout dict}`` and each entry's
    pipeline record (``{}`` for a plain file). Files mixing both are refused."""
    specs = read_strategy_file(path, owner)
    records = {name: spec[PIPELINE_KEY] for name, spec in specs.items() if PIPELINE_KEY in spec}
    if records and len(records) != len(specs):
        plain = sorted(set(specs) - set(records))
        raise ValueError(f"{owner}: the strategy file {path!r} gives pipeline stages to some "
                         f"parameters but not to {plain}; it was not written by one job")
    for name, record in records.items():
        problem = _record_problem(record)
        if problem is not None:
            raise ValueError(f"{owner}: the strategy file {path!r} has a bad pipeline record for "
                             f"{name!r}: {problem} (got {record!r})")
    return specs, records


def read_placed_strategy(path, owner, what="strategy file"):
    """``{name: PlacedLayout}`` of a plain or merged strategy file. A single stage's file of a
    pipelined job is refused: it holds one stage's parameters and ranks only."""
    specs, records = read_pipeline_records(path, owner)
    if not records:
        return {name: PlacedLayout.plain(layout_from_json(dict(spec, rank=0))[0])
                for name, spec in specs.items()}
    unmerged = {r["held_by"][0][0] for r in records.values() if not r["merged"]}
    if unmerged:
        stages = next(iter(records.values()))["stages"]
        raise ValueError(f"{owner}: the {what} {path!r} is the strategy file of stage "
                         f"{sorted(unmerged)[0]} of a {stages}-stage pipelined job, which knows "
                         "that stage's parameters only; merge the stages' files first: "
                         "merge_pipeline_strategys(<folder of every stage's file>, "
                         "<merged file>), and pass the merged file")
    out = {}
    for name, spec in specs.items():
        record = records[name]
        groups = [ranks for _, ranks in sorted(record["held_by"])]
        world = record["stages"] * len(groups[0])
        out[name] = PlacedLayout(layout_from_json(dict(spec, rank=0))[0], groups, world)
    return out


# ---- merging ------------------------------------------------------------------------------
def _layout_only(spec):
    return {k: v for k, v in spec.items() if k not in ("rank", PIPELINE_KEY)}


def _stage_files(src_strategy_dirs, dst_strategy_file, owner):
    if not isinstance(src_strategy_dirs, str):
        raise TypeError(f"{owner}: src_strategy_dirs must be a str (a folder), got "
                        f"{type(src_strategy_dirs).__name__}")
    if not isinstance(dst_strategy_file, str) or not dst_strategy_file:
        raise TypeError(f"{owner}: dst_strategy_file must be a file path (str), got "
                        f"{dst_strategy_file!r}")
    if not os.path.isdir(src_strategy_dirs):
        raise NotADirectoryError(f"{owner}: src_strategy_dirs {src_strategy_dirs!r} is not a "
                                 "directory")
    dst = os.path.abspath(dst_strategy_file)
    files = sorted(p for ext in ("*.ckpt", "*.json")
                   for p in glob.glob(os.path.join(src_strategy_dirs, ext))
                   if os.path.abspath(p) != dst)
    if not files:
        raise ValueError(f"{owner}: {src_strategy_dirs!r} holds no strategy file (*.ckpt or "
                         "*.json); it must hold the file of every pipeline stage")
    return files


def _read_stage_file(path, owner):
    """``(stages, stage, ranks, {name: layout dict})`` of one stage's file."""
    specs, records = read_pipeline_records(path, owner)
    if not records:
        raise ValueError(f"{owner}: {path!r} is not the strategy file of a pipeline stage (its "
                         "parameters carry no stage); it was written by a job without "
                         "pipeline_stages")
    kinds = {(r["stages"], r["held_by"][0][0], tuple(r["held_by"][0][1]), r["merged"])
             for r in records.values()}
    if len(kinds) != 1 or next(iter(kinds))[3]:
        raise ValueError(f"{owner}: {path!r} is not one stage's strategy file (it is a merged "
                         "file, or its parameters name different stages)")
    stages, stage, ranks, _ = kinds.pop()
    return stages, stage, list(ranks), {name: _layout_only(spec) for name, spec in specs.items()}


def _check_stage_ranks(by_stage, stages, owner, src):
    sizes = {len(ranks) for ranks, _, _ in by_stage.values()}
    union = sorted(r for ranks, _, _ in by_stage.values() for r in ranks)
    if len(sizes) != 1 or union != list(range(stages * sizes.pop())):
        listing = {s: by_stage[s][0] for s in sorted(by_stage)}
        raise ValueError(f"{owner}: the stages' ranks in {src!r} ({listing}) do not split one "
                         "job's ranks into equal stages; the files come from different jobs")


def _merged_entries(by_stage, stages, owner):
    merged, where = {}, {}
    for stage in sorted(by_stage):
        ranks, specs, path = by_stage[stage]
        for name, spec in specs.items():
            if name in merged:
                first_path, first_stage = where[name]
                if _layout_only(merged[name]) != spec:
                    raise ValueError(
                        f"{owner}: {name!r} is laid out as {spec} by stage {stage} ({path!r}) "
                        f"but as {_layout_only(merged[name])} by stage {first_stage} "
                        f"({first_path!r}); a parameter shared by stages needs one layout")
                merged[name][PIPELINE_KEY]["held_by"].append([stage, ranks])
                continue
            where[name] = (path, stage)
            merged[name] = dict(spec, **{PIPELINE_KEY: {"stages": stages, "merged": True,
                                                        "held_by": [[stage, ranks]]}})
    return merged


def merge_pipeline_strategys(src_strategy_dirs, dst_strategy_file):
    """Merge the strategy files of every pipeline stage in folder ``src_strategy_dirs`` (one
    per rank, as ``strategy_ckpt_config={"save_file": ...}`` wrote them in a pipelined job)
    into ``dst_strategy_file``, which ``transform_checkpoints``,
    ``transform_checkpoint_by_rank``, ``rank_list_for_transform`` and
    ``load_distributed_checkpoint`` read (MindSpore's function, same arguments).

    A missing stage, files of jobs with other stage counts or ranks, and files that lay a
    parameter out differently are refused, naming the files; nothing is written then."""
    owner = "merge_pipeline_strategys"
    files = _stage_files(src_strategy_dirs, dst_strategy_file, owner)
    by_stage, first = {}, None
    for path in files:
        stages, stage, ranks, specs = _read_stage_file(path, owner)
        if first is None:
            first = (stages, path)
        elif stages != first[0]:
            raise ValueError(f"{owner}: {path!r} is the file of a {stages}-stage job, but "
                             f"{first[1]!r} of a {first[0]}-stage one; the folder must hold the "
                             "files of one job")
        if stage not in by_stage:
            by_stage[stage] = (ranks, specs, path)
            continue
        kept_ranks, kept, kept_path = by_stage[stage]
        if kept_ranks != ranks or kept != specs:
            what = "ranks" if kept_ranks != ranks else "parameters or layouts"
            raise ValueError(f"{owner}: {path!r} and {kept_path!r} are both stage {stage}'s "
                             f"files but give it different {what}; the files come from "
                             "different jobs or plans")
    missing = sorted(set(range(first[0])) - set(by_stage))
    if missing:
        raise ValueError(f"{owner}: no strategy file of stage(s) {missing} of the {first[0]}-"
                         f"stage job in {src_strategy_dirs!r} (read: "
                         f"{[os.path.basename(p) for p in files]}); every stage's file is needed")
    _check_stage_ranks(by_stage, first[0], owner, src_strategy_dirs)
    write_layouts(dst_strategy_file, _merged_entries(by_stage, first[0], owner))
