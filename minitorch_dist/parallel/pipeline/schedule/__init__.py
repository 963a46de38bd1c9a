"""Pipeline schedules as data (the IR), apart from the runtime that executes them.

* ``actions``: one step of one rank (forward, backward, send, receive of a micro-batch).
* ``generate``: the classic schedules (GPipe, 1F1B, ...) as per-rank action lists.
* ``validate``, ``simulate``, ``render``: check, time and draw a schedule before it runs.
"""
from .actions import Action
from .validate import ScheduleError, validate_schedule
from .simulate import SimulationResult, simulate
from .render import format_schedule, plot_schedule
from .generate import Schedule, SCHEDULE_KINDS, generate_schedule, add_communication

__all__ = ["Action", "Schedule", "ScheduleError", "SimulationResult", "generate_schedule",
           "add_communication", "validate_schedule", "simulate", "format_schedule",
           "plot_schedule", "SCHEDULE_KINDS"]
