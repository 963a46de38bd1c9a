"""The auto-parallel context: which parallel mode a training script runs in, MindSpore style.

>>> import minitorch_dist as ms
>>> ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
>>> ms.get_auto_parallel_context("parallel_mode")
'data_parallel'
>>> ms.reset_auto_parallel_context()
"""


from .. import context as execution_context
from ..thread_state import ThreadState
from .comm_fusion_options import DEFAULT_COMM_FUSION, check_comm_fusion
from .strategy_ckpt_options import DEFAULT_STRATEGY_CKPT_CONFIG, check_strategy_ckpt_config


class ParallelMode:
    """The parallel modes (MindSpore's string values)."""

    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = (STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL)


_DEFAULTS = {
    "parallel_mode": ParallelMode.STAND_ALONE,
    "gradients_mean": False,
    "device_num": None,            # None: the communicator's group size
    "global_rank": None,
    "parameter_broadcast": False,
    "pipeline_stages": 1,
    "pipeline_config": {"pipeline_scheduler": "1f1b", "pipeline_interleave": False},
    "search_mode": "sharding_propagation",
    "dataset_strategy": "data_parallel",
    "full_batch": False,
    "enable_parallel_optimizer": False,
    "parallel_optimizer_config": {"gradient_accumulation_shard": False,
                                  "parallel_optimizer_threshold": 64,
                                  "optimizer_weight_shard_size": -1,
                                  "optimizer_level": "level1"},
    "grad_accumulation_step": 1,
    "strategy_ckpt_save_file": "",
    "strategy_ckpt_load_file": "",
    "all_reduce_fusion_config": (),
    # MindSpore's default is False (AllGather + Split + Concat); AllToAll sends less, so it is
    # on here unless a script turns it off
    "enable_alltoall": True,
}
_DEFAULTS["comm_fusion"] = DEFAULT_COMM_FUSION
_DEFAULTS["strategy_ckpt_config"] = dict(DEFAULT_STRATEGY_CKPT_CONFIG)
_SEARCH_MODES = ("sharding_propagation", "dynamic_programming", "recursive_programming")
PIPELINE_SCHEDULERS = ("1f1b", "gpipe")
_context = dict(_DEFAULTS)
# ``AutoParallel`` sets options for the calls it wraps only, per thread (ranks as threads)
_scoped = ThreadState(options=None)


def _check_pipeline_config(value):
    """MindSpore's ``pipeline_config``: ``{"pipeline_scheduler": "1f1b" | "gpipe",
    "pipeline_interleave": bool}``; missing keys keep their defaults."""
    if not isinstance(value, dict):
        raise ValueError("pipeline_config must be a dict such as {'pipeline_scheduler': '1f1b', "
                         f"'pipeline_interleave': False}}, got {value!r}")
    unknown = set(value) - {"pipeline_scheduler", "pipeline_interleave"}
    if unknown:
        raise ValueError(f"pipeline_config: unknown keys {sorted(unknown)}; expected "
                         "'pipeline_scheduler' and 'pipeline_interleave'")
    scheduler = value.get("pipeline_scheduler", "1f1b")
    if not isinstance(scheduler, str) or scheduler.lower() not in PIPELINE_SCHEDULERS:
        raise ValueError(f"pipeline_config: pipeline_scheduler must be one of "
                         f"{PIPELINE_SCHEDULERS}, got {scheduler!r}")
    interleave = value.get("pipeline_interleave", False)
    if not isinstance(interleave, bool):
        raise ValueError(f"pipeline_config: pipeline_interleave must be True or False, got "
                         f"{interleave!r}")
    return {"pipeline_scheduler": scheduler.lower(), "pipeline_interleave": interleave}


_OPTIMIZER_LEVELS = ("level1", "level2", "level3")


def check_parallel_optimizer_config(value):
    """MindSpore's ``parallel_optimizer_config``: ``gradient_accumulation_shard`` (bool:
    accumulated gradients sliced, ``data_parallel/accumulation_shard.py``),
    ``parallel_optimizer_threshold`` (KB, int >= 0: smaller parameters stay whole),
    ``optimizer_weight_shard_size`` (ranks a state is sliced over, -1: the data-parallel
    group) and ``optimizer_level`` ("level1": states sliced; "level2": gradients too, which
    the reduce-scatter does either way; "level3": weights too, kept sliced between steps,
    data parallel only). Missing keys keep their defaults."""
    if not isinstance(value, dict):
        raise ValueError("parallel_optimizer_config must be a dict such as "
                         "{'optimizer_weight_shard_size': 2}, got " + repr(value))
    merged = dict(_DEFAULTS["parallel_optimizer_config"])
    unknown = set(value) - set(merged)
    if unknown:
        raise ValueError(f"parallel_optimizer_config: unknown keys {sorted(unknown)}; expected "
                         f"{sorted(merged)}")
    merged.update(value)
    if not isinstance(merged["gradient_accumulation_shard"], bool):
        raise ValueError("parallel_optimizer_config: gradient_accumulation_shard must be True "
                         f"or False, got {merged['gradient_accumulation_shard']!r}")
    threshold = merged["parallel_optimizer_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError("parallel_optimizer_config: parallel_optimizer_threshold must be an "
                         f"int >= 0 (KB), got {threshold!r}")
    size = merged["optimizer_weight_shard_size"]
    if isinstance(size, bool) or not isinstance(size, int) or (size < 1 and size != -1):
        raise ValueError("parallel_optimizer_config: optimizer_weight_shard_size must be -1 (the "
                         f"whole data-parallel group) or a positive int, got {size!r}")
    level = merged["optimizer_level"]
    if level not in _OPTIMIZER_LEVELS:
        raise ValueError(f"parallel_optimizer_config: optimizer_level must be one of "
                         f"{_OPTIMIZER_LEVELS}, got {level!r}")
    return merged


def _is_dataset_strategy(value):
    if value in ("data_parallel", "full_batch"):
        return True
    return isinstance(value, (tuple, list)) and all(
        isinstance(s, (tuple, list)) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                             for n in s) for s in value)


def _check(key, value):
    if key not in _DEFAULTS:
        raise ValueError(f"unknown auto-parallel option {key!r}; expected one of {sorted(_DEFAULTS)}")
    if key == "parallel_mode" and value not in ParallelMode.MODE_LIST:
        raise ValueError(f"parallel_mode must be one of {ParallelMode.MODE_LIST}, got {value!r}")
    if key == "search_mode" and value not in _SEARCH_MODES:
        raise ValueError(f"search_mode must be one of {_SEARCH_MODES}, got {value!r}")
    if key in ("pipeline_stages", "grad_accumulation_step") and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{key} must be a positive int, got {value!r}")
    if key in ("device_num", "global_rank") and value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{key} must be a non-negative int, got {value!r}")
    if key == "dataset_strategy" and not _is_dataset_strategy(value):
        raise ValueError("dataset_strategy must be 'data_parallel', 'full_batch' or a tuple of "
                         "per-input split tuples such as ((8, 1), (8, 1)); got " + repr(value))
    if key in ("gradients_mean", "parameter_broadcast", "full_batch", "enable_parallel_optimizer",
               "enable_alltoall") \
            and not isinstance(value, bool):
        raise ValueError(f"{key} must be True or False, got {value!r}")
    if key in ("strategy_ckpt_save_file", "strategy_ckpt_load_file") and not isinstance(value, str):
        raise ValueError(f"{key} must be a file path (str), got {value!r}")
    if key == "all_reduce_fusion_config" and (
            not isinstance(value, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in value)
            or list(value) != sorted(set(value))):
        raise ValueError("all_reduce_fusion_config must be a strictly increasing list of positive "
                         f"parameter positions, such as [20, 35]; got {value!r}")
    if key == "parallel_optimizer_config":
        check_parallel_optimizer_config(value)
    if key == "comm_fusion":
        check_comm_fusion(value)
    if key == "strategy_ckpt_config":
        check_strategy_ckpt_config(value)


def set_auto_parallel_context(**kwargs):
    """Set parallel options: ``parallel_mode``, ``gradients_mean``, ``device_num``,
    ``pipeline_stages``, ``search_mode``, ``dataset_strategy``, ``full_batch``, …"""
    for key, value in kwargs.items():
        if key != "save_graphs":
            _check(key, value)
    if "device_num" in kwargs or "global_rank" in kwargs:
        _check_against_job(kwargs)        # before anything changes: a refusal changes nothing
    if "save_graphs" in kwargs:
        # Seed 004 passes save_graphs here; it is an execution-context option (set_context).
        kwargs = dict(kwargs)
        execution_context.set_context(save_graphs=kwargs.pop("save_graphs"))
    if "parallel_optimizer_config" in kwargs:
        kwargs = dict(kwargs, parallel_optimizer_config=check_parallel_optimizer_config(
            kwargs["parallel_optimizer_config"]))
    if "comm_fusion" in kwargs:
        kwargs = dict(kwargs, comm_fusion=check_comm_fusion(kwargs["comm_fusion"]))
    if "strategy_ckpt_config" in kwargs:
        kwargs = dict(kwargs, strategy_ckpt_config=check_strategy_ckpt_config(
            kwargs["strategy_ckpt_config"]))
    if "pipeline_config" in kwargs:
        kwargs = dict(kwargs, pipeline_config=_check_pipeline_config(kwargs["pipeline_config"]))
    if "all_reduce_fusion_config" in kwargs:
        kwargs = dict(kwargs, all_reduce_fusion_config=tuple(kwargs["all_reduce_fusion_config"]))
    _context.update(kwargs)


def check_job_size(size, rank, what="set_auto_parallel_context", values=None):
    """Refuse ``device_num``/``global_rank`` values (the context's, or ``values`` about to be
    set) that contradict the job (``size`` ranks, this one ``rank``): MindSpore sizes its
    parallel plan and its gradient mean by ``device_num``, so a mismatch would silently give
    another plan or another mean."""
    values = values or {}
    device_num = values.get("device_num", get_auto_parallel_context("device_num"))
    if device_num is not None and device_num != size:
        raise ValueError(f"{what}: device_num={device_num}, but the job has {size} rank(s); set "
                         f"device_num={size} (communication.get_group_size()) or leave it unset")
    global_rank = values.get("global_rank", get_auto_parallel_context("global_rank"))
    if global_rank is not None and global_rank != rank:
        raise ValueError(f"{what}: global_rank={global_rank}, but this process is rank {rank} "
                         f"of the job; leave global_rank unset (the rank comes from the launcher)")


def _check_against_job(values):
    """``check_job_size`` of ``values`` against the initialized world, if there is one yet
    (otherwise the parallel run checks when it starts)."""
    from .. import communication
    if communication.GlobalComm.INITED:
        check_job_size(communication.get_group_size(), communication.get_rank(),
                       values=values)


def get_auto_parallel_context(key):
    if key not in _DEFAULTS:
        raise ValueError(f"unknown auto-parallel option {key!r}; expected one of {sorted(_DEFAULTS)}")
    scoped = _scoped.options
    value = scoped[key] if scoped is not None and key in scoped else _context[key]
    if isinstance(value, dict):    # a copy, nested option dicts too: callers cannot edit it
        return {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
    return value


class auto_parallel_scope:
    """``with auto_parallel_scope(parallel_mode=..., ...):`` the options hold on this thread
    inside the block, over the global context (``AutoParallel`` runs its calls so)."""

    def __init__(self, **options):
        for key, value in options.items():
            _check(key, value)
        if "pipeline_config" in options:
            options["pipeline_config"] = _check_pipeline_config(options["pipeline_config"])
        if "parallel_optimizer_config" in options:
            options["parallel_optimizer_config"] = check_parallel_optimizer_config(
                options["parallel_optimizer_config"])
        if "strategy_ckpt_config" in options:
            options["strategy_ckpt_config"] = check_strategy_ckpt_config(
                options["strategy_ckpt_config"])
        self.options = options

    def __enter__(self):
        self.previous = _scoped.options
        _scoped.options = dict(self.previous or {}, **self.options)
        return self

    def __exit__(self, *exc):
        _scoped.options = self.previous
        return False


def reset_auto_parallel_context():
    _context.clear()
    _context.update(_DEFAULTS)


_SHARDING_MODES = (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL)


def shards_operators():
    """True when network calls run operator-sharded: SEMI_AUTO_PARALLEL or AUTO_PARALLEL
    without pipeline stages (a pipelined job, which MindSpore also runs under
    SEMI_AUTO_PARALLEL, shards inside its staged cells instead). Asked on every Cell call,
    so it reads the dictionaries directly."""
    scoped = _scoped.options
    if scoped:
        mode = scoped.get("parallel_mode", _context["parallel_mode"])
        stages = scoped.get("pipeline_stages", _context["pipeline_stages"])
    else:
        mode, stages = _context["parallel_mode"], _context["pipeline_stages"]
    return mode in _SHARDING_MODES and stages == 1


def is_data_parallel():
    """True when gradients must be reduced across ranks by the training wrappers."""
    return get_auto_parallel_context("parallel_mode") in (ParallelMode.DATA_PARALLEL,
                                                          ParallelMode.HYBRID_PARALLEL)


# ``from mindspore.context import ParallelMode`` and ``context.set_auto_parallel_context``
# (MindSpore 1.x spellings, used by seed 004) reach these names through the execution
# context, which does not import this layer: it is lent them here.
execution_context.lend(ParallelMode=ParallelMode,
                       set_auto_parallel_context=set_auto_parallel_context,
                       get_auto_parallel_context=get_auto_parallel_context,
                       reset_auto_parallel_context=reset_auto_parallel_context)
