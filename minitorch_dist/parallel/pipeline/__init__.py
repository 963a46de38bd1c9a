"""Pipeline parallelism: schedules as data.

A schedule says, for every rank, which actions to run in which order: forwards (``F``) and
backwards (``B``) of micro-batches through stages, and the SEND/RECV actions that move
activations and gradients between ranks (``actions.py``). It is plain data, so it can be
checked (``validate.py``), timed (``simulate.py``) and drawn (``render.py``) before anything
runs; the runtime executes one rank's list. ``schedule.py`` generates the classic ones.

>>> from minitorch_dist.parallel.pipeline import generate_schedule
>>> s = generate_schedule("gpipe", num_ranks=4, num_microbatches=8)
>>> s.simulate().bubble_fraction == 3 / 11
True
"""
from .actions import Action
from .validate import ScheduleError, validate_schedule
from .simulate import SimulationResult, simulate
from .render import format_schedule, plot_schedule
from .schedule import (Schedule, SCHEDULE_KINDS, generate_schedule, add_communication)

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
