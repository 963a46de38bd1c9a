"""Parallel training: data parallelism (``DistributedGradReducer``, the SINGA-style
``DistOpt``), pipeline parallelism (``pipeline``: ``PipelineCell``, schedules as data) and
the auto-parallel context."""
from .context import (ParallelMode, set_auto_parallel_context, get_auto_parallel_context,
                      reset_auto_parallel_context)
from .data_parallel.dist_opt import DistOpt, DIST_OPTIONS
from .data_parallel.grad_reducer import DistributedGradReducer
from .data_parallel.loss_scale import DynamicLossScale
from .data_parallel.weight_slicing import resident_bytes
from . import pipeline
from .pipeline import (PipelineCell, PipelineGradReducer, pipeline_data_shard,
                       merge_pipeline_checkpoints)
from . import sharding
from .sharding.checkpoint import merge_sharded_checkpoints
from .sharding.sharded_cell import ShardedCell
from .sharding.layout_api import Layout
from .shard_function import shard
from .dynamic_shape import Symbol
from .checkpoint_transform import (build_searched_strategy, rank_list_for_transform,
                                   transform_checkpoint_by_rank, transform_checkpoints)
from .distributed_load import load_distributed_checkpoint, merge_sliced_parameter
from .strategy_ckpt_pipeline import merge_pipeline_strategys
from .embedding.checkpoint import merge_row_sliced_checkpoints
from . import extension as _extension   # noqa: F401  (plugs the parallel layer into nn and train)
from .data_parallel import optimizer_parallel as _optimizer_parallel
from . import auto_parallel, nn
from .auto_parallel import AutoParallel
from .algo_parameters import get_algo_parameters, reset_algo_parameters, set_algo_parameters
from .nn import Pipeline

_optimizer_parallel.install()     # optimizers slice their states under enable_parallel_optimizer

__all__ = ["ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context", "DistOpt", "DIST_OPTIONS", "DistributedGradReducer",
           "DynamicLossScale", "resident_bytes", "pipeline", "PipelineCell", "PipelineGradReducer",
           "pipeline_data_shard", "merge_pipeline_checkpoints", "sharding", "ShardedCell",
           "merge_sharded_checkpoints", "merge_row_sliced_checkpoints", "AutoParallel",
           "Pipeline", "auto_parallel", "nn", "set_algo_parameters", "get_algo_parameters",
           "reset_algo_parameters", "Layout", "shard", "Symbol",
           "build_searched_strategy", "rank_list_for_transform", "transform_checkpoint_by_rank",
           "transform_checkpoints", "load_distributed_checkpoint", "merge_sliced_parameter",
           "merge_pipeline_strategys"]
