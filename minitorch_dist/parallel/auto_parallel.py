"""``AutoParallel``: MindSpore 2.6's way to run one network or training function in parallel.

``AutoParallel(net_or_fn, parallel_mode="semi_auto")`` wraps the top-level Cell or function;
its calls run with the parallel options it holds, on this thread, whatever the global
context says: ``"semi_auto"`` is ``SEMI_AUTO_PARALLEL``; ``"sharding_propagation"`` and
``"recursive_programming"`` are ``AUTO_PARALLEL`` with that search mode (both served by
sharding propagation here, with a warning for the second). Inside, every network call is
sharded (``parallel/extension.py``): a training function's ``value_and_grad`` network, a
Cell's whole forward. ``Model(AutoParallel(net), ...)`` trains, evaluates and predicts under
its options.

The methods set the rest: ``dataset_strategy(config)``, ``save_param_strategy_file(path)``
(the parameters' layouts as JSON after the first call), ``load_param_strategy_file(path)``
(checked against the plan: a parameter laid out differently is a ``ShardingError``),
``enable_gradients_mean()``, ``pipeline(stages, output_broadcast, interleave, scheduler)``
(a ``PipelineCell`` built before sets itself up for the stages at its first call),
``hsdp(shard_size, threshold, optimizer_level)`` (optimizer parallel).

Options set both here and, differently, with ``ms.set_auto_parallel_context`` conflict: the
call raises a ``ValueError`` naming both rather than letting one silently win.
"""
import logging
import os

from ..extension import extension
from ..nn.cell import Cell
from .context import (PIPELINE_SCHEDULERS, ParallelMode, _is_dataset_strategy,
                      auto_parallel_scope, check_parallel_optimizer_config,
                      get_auto_parallel_context)
from .sharding.strategy_file import check_strategy_file, write_strategy_file

logger = logging.getLogger("minitorch_dist")

__all__ = ["AutoParallel"]

_MODES = {
    "semi_auto": {"parallel_mode": ParallelMode.SEMI_AUTO_PARALLEL},
    "sharding_propagation": {"parallel_mode": ParallelMode.AUTO_PARALLEL,
                             "search_mode": "sharding_propagation"},
    "recursive_programming": {"parallel_mode": ParallelMode.AUTO_PARALLEL,
                              "search_mode": "recursive_programming"},
}


class AutoParallel(Cell):
    """Run ``network`` (a Cell or a function) in parallel; see the module docstring.

    >>> from minitorch_dist.parallel.auto_parallel import AutoParallel
    >>> AutoParallel(lambda x: x, parallel_mode="dynamic")
    Traceback (most recent call last):
    ...
    ValueError: AutoParallel: parallel_mode must be one of ['semi_auto', 'sharding_propagation', 'recursive_programming'], got 'dynamic'
    """

    _name_scope = False
    _runs_sharded = True        # its construct decides how the wrapped network runs

    def __init__(self, network, parallel_mode="semi_auto"):
        super().__init__()
        if not callable(network):
            raise TypeError("AutoParallel: network must be a Cell or a function, got "
                            f"{type(network).__name__}")
        if parallel_mode not in _MODES:
            raise ValueError(f"AutoParallel: parallel_mode must be one of {list(_MODES)}, got "
                             f"{parallel_mode!r}")
        if isinstance(network, Cell):
            self.network = network
        else:
            object.__setattr__(self, "network", network)
        object.__setattr__(self, "_options", dict(_MODES[parallel_mode]))
        object.__setattr__(self, "_save_file", None)
        object.__setattr__(self, "_load_file", None)
        object.__setattr__(self, "_checked", False)
        object.__setattr__(self, "_warned", False)

    # ---- configuration ----------------------------------------------------------------
    def dataset_strategy(self, config):
        """How the inputs are split: "data_parallel" (default), "full_batch", or one tuple
        of split counts per input."""
        if config == () or config == "":
            raise ValueError("AutoParallel.dataset_strategy: config is empty")
        if not isinstance(config, (str, tuple)) or not _is_dataset_strategy(config):
            raise ValueError("AutoParallel.dataset_strategy: config must be 'data_parallel', "
                             "'full_batch' or a tuple of per-input split tuples such as "
                             f"((8, 1), (8, 1)); got {config!r}")
        self._options["dataset_strategy"] = config
        self._options["full_batch"] = config == "full_batch"

    def enable_gradients_mean(self):
        """Average (instead of sum) the gradients of data-parallel replicas."""
        self._options["gradients_mean"] = True

    def pipeline(self, stages=1, output_broadcast=False, interleave=False, scheduler="1f1b"):
        """Pipeline settings; see the module docstring for stages > 1."""
        if isinstance(stages, bool) or not isinstance(stages, int):
            raise TypeError(f"AutoParallel.pipeline: stages must be an int, got {stages!r}")
        if stages <= 0:
            raise ValueError(f"AutoParallel.pipeline: stages must be positive, got {stages}")
        for name, value in (("output_broadcast", output_broadcast), ("interleave", interleave)):
            if not isinstance(value, bool):
                raise TypeError(f"AutoParallel.pipeline: {name} must be True or False, got "
                                f"{value!r}")
        if not isinstance(scheduler, str):
            raise TypeError(f"AutoParallel.pipeline: scheduler must be a str, got {scheduler!r}")
        if scheduler.lower() not in PIPELINE_SCHEDULERS:
            raise ValueError(f"AutoParallel.pipeline: scheduler must be one of "
                             f"{list(PIPELINE_SCHEDULERS)}, got {scheduler!r}")
        self._options["pipeline_stages"] = stages
        self._options["pipeline_config"] = {"pipeline_scheduler": scheduler.lower(),
                                            "pipeline_interleave": interleave}
        if output_broadcast:
            logger.warning("AutoParallel.pipeline: output_broadcast=True is what happens "
                           "already: every rank gets the pipelined outputs")

    def hsdp(self, shard_size=-1, threshold=64, optimizer_level="level1"):
        """Optimizer parallel for the calls of this AutoParallel (MindSpore's
        ``enable_parallel_optimizer`` with its ``parallel_optimizer_config``): optimizer
        states sliced over ``shard_size`` replicas (-1: all of the data-parallel group),
        parameters under ``threshold`` KB kept whole; ``optimizer_level`` "level1" or
        "level2" ("level3" is refused). See ``data_parallel/optimizer_parallel.py``."""
        config = check_parallel_optimizer_config({
            "optimizer_weight_shard_size": shard_size, "parallel_optimizer_threshold": threshold,
            "optimizer_level": optimizer_level})
        self._options["enable_parallel_optimizer"] = True
        self._options["parallel_optimizer_config"] = config

    def save_param_strategy_file(self, file_path):
        """Write the parameters' layouts (JSON) to ``file_path`` after the first call."""
        object.__setattr__(self, "_save_file", _path("save_param_strategy_file", file_path))

    def load_param_strategy_file(self, file_path):
        """Check the plan against the layouts saved in ``file_path`` at the first call."""
        path = _path("load_param_strategy_file", file_path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"AutoParallel.load_param_strategy_file: no file {path!r}")
        object.__setattr__(self, "_load_file", path)

    def parallel_scope(self):
        """The options of this AutoParallel, as a ``with`` block (``Model`` uses it)."""
        self._check_conflicts()
        return auto_parallel_scope(**self._options)

    def _check_conflicts(self):
        glob = {key: get_auto_parallel_context(key) for key in
                ("parallel_mode", "pipeline_stages", "dataset_strategy")}
        mine = self._options
        conflicts = []
        if glob["parallel_mode"] not in (ParallelMode.STAND_ALONE, mine["parallel_mode"]):
            conflicts.append(f"parallel_mode {glob['parallel_mode']!r} (context) vs "
                             f"{mine['parallel_mode']!r} (AutoParallel)")
        if glob["pipeline_stages"] > 1 and glob["pipeline_stages"] != mine.get("pipeline_stages",
                                                                               glob["pipeline_stages"]):
            conflicts.append(f"pipeline_stages {glob['pipeline_stages']} (context) vs "
                             f"{mine['pipeline_stages']} (AutoParallel.pipeline)")
        if "dataset_strategy" in mine and glob["dataset_strategy"] != "data_parallel" \
                and glob["dataset_strategy"] != mine["dataset_strategy"]:
            conflicts.append(f"dataset_strategy {glob['dataset_strategy']!r} (context) vs "
                             f"{mine['dataset_strategy']!r} (AutoParallel.dataset_strategy)")
        if conflicts:
            raise ValueError("AutoParallel: its settings conflict with "
                             "ms.set_auto_parallel_context: " + "; ".join(conflicts)
                             + "; set each option in one place")

    # ---- running ----------------------------------------------------------------------
    def construct(self, *args):
        with self.parallel_scope():
            if isinstance(self.network, Cell):
                out = self.network(*args)
            else:
                out = extension().call_function(self.network, args)
        if not self._checked:
            object.__setattr__(self, "_checked", True)
            self._strategy_files()
        if self._options["parallel_mode"] == ParallelMode.AUTO_PARALLEL and \
                self._options.get("search_mode") == "recursive_programming" and not self._warned:
            object.__setattr__(self, "_warned", True)
            logger.warning("AutoParallel: 'recursive_programming' is served by sharding "
                           "propagation here")
        return out

    def _strategy_files(self):
        engine = self._pipeline_engine()
        if engine is not None:      # a stage's file, as strategy_ckpt_config writes it
            from .strategy_ckpt_pipeline import (check_stage_strategy_file,
                                                 write_stage_strategy_file)
            stages_of = engine.plan.stages_of
            if self._save_file is not None:
                write_stage_strategy_file(self._save_file, engine.network, engine.topology,
                                          stages_of, only_trainable=False)
            if self._load_file is not None:
                check_stage_strategy_file(self._load_file, engine.network, engine.topology,
                                          stages_of, owner="AutoParallel")
            return
        if self._save_file is not None:
            write_strategy_file(self._save_file)
        if self._load_file is not None:
            check_strategy_file(self._load_file, "AutoParallel")

    def _pipeline_engine(self):
        """The pipeline this network runs in (pipeline_stages > 1), or None."""
        if self._options.get("pipeline_stages", 1) <= 1:
            return None
        from .pipeline.pipeline_cell import current_engine
        get = getattr(self.network, "get_parameters", None)     # a Cell, or a function
        return current_engine(list(get()) if get is not None else ())


def _path(what, file_path):
    if not isinstance(file_path, str) or not file_path:
        raise TypeError(f"AutoParallel.{what}: file_path must be a non-empty str, got "
                        f"{file_path!r}")
    return file_path
