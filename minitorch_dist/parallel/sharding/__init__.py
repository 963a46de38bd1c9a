"""Operator-level sharding (MindSpore's semi-auto / auto parallel).

The foundation layer:

* ``layout``: ``TensorLayout`` (device matrix, tensor map counted from the right, shape,
  partial-sum axes): which block of a tensor every rank holds.
* ``redistribution``: ``plan_redistribution(src, dst)`` (the cheapest list of slices and
  collectives between two layouts), ``plan_cost``, ``redistribute`` (differentiable
  execution on one rank) and ``simulate_redistribution`` (all ranks in NumPy).
* ``groups``: ``GroupCache``, the sub-communicators those collectives run in.
"""
from .layout import (LayoutError, TensorLayout, assemble_array, group_ranks, rank_coordinates,
                     scatter_array, with_repeated_axis)
from .redistribution import (STEP_KINDS, Step, apply_step, plan_cost, plan_redistribution,
                             redistribute, simulate_redistribution)
from .groups import GroupCache

__all__ = ["LayoutError", "TensorLayout", "assemble_array", "group_ranks", "rank_coordinates",
           "scatter_array", "with_repeated_axis", "STEP_KINDS", "Step", "apply_step",
           "plan_cost", "plan_redistribution", "redistribute", "simulate_redistribution",
           "GroupCache"]
