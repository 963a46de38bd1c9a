"""Pipeline parallelism: schedules as data.

A schedule says, for every rank, which actions to run in which order: forwards (``F``) and
backwards (``B``) of micro-batches through stages, and the SEND/RECV actions that move
activations and gradients between ranks (``schedule/actions.py``). It is plain data, so it can be
checked, timed and drawn (``schedule/``) before anything
runs; the runtime executes one rank's list. ``schedule/generate.py`` makes the classic ones.

>>> from minitorch_dist.parallel.pipeline import generate_schedule
>>> s = generate_schedule("gpipe", num_ranks=4, num_microbatches=8)
>>> s.simulate().bubble_fraction == 3 / 11
True
"""
from .schedule import (Action, Schedule, ScheduleError, SimulationResult, SCHEDULE_KINDS,
                       add_communication, format_schedule, generate_schedule, plot_schedule,
                       simulate, validate_schedule)

__all__ = ["Action", "Schedule", "ScheduleError", "SimulationResult", "generate_schedule",
           "add_communication", "validate_schedule", "simulate", "format_schedule",
           "plot_schedule", "SCHEDULE_KINDS"]

# The runtime: PipelineCell runs one rank's action list (see runner.py).
from .topology import PipelineTopology, pipeline_data_shard
from .stage_plan import PipelineConfigError
from .pipeline_cell import PipelineCell, PipelineEvalCell
from .grad_reducer import PipelineGradReducer
from .data import replica_batches
from .checkpoint import merge_pipeline_checkpoints

__all__ += ["PipelineTopology", "pipeline_data_shard", "PipelineConfigError", "PipelineCell",
            "PipelineEvalCell", "PipelineGradReducer", "replica_batches",
            "merge_pipeline_checkpoints"]
