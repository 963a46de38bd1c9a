"""Stage replicas start equal: one broadcast of the stage's parameters before the first step.

With ``world = stages * d`` each stage has ``d`` data-parallel replicas whose gradients are
averaged; that keeps them equal only if they start equal. Processes that did not call
``ms.set_seed`` alike drew different weights, so every parameter this rank holds takes the
values of the first rank holding it: the first replica of the lowest stage using it (a
parameter shared by stages is broadcast over every replica of those stages, so the copies
on different stages start equal too).

* a parameter made under ``nn.utils.no_init_parameters`` has no values yet: as on the
  sharding path, only its random stream state travels (``comm/initial_values.py``, which
  both share), and every holder then draws the same values at first use;
* a parameter sliced by operator sharding already took its block of rank 0's values;
* optimizer state is not sent: it is zeros until the first step, on every replica.
"""
from ..comm.initial_values import broadcast_initial_values

__all__ = ["start_replicas_equal"]


def start_replicas_equal(topology, params, stages_of):
    """Broadcast every parameter in ``params`` that this rank holds from the first rank
    holding it; ``stages_of(param)`` gives the stages using it (none: every stage)."""
    for stages, group in _by_stages(topology, params, stages_of):
        ranks = [s * topology.replicas + j for s in stages for j in range(topology.replicas)]
        if len(ranks) == 1:
            continue
        comm = topology.group(ranks)      # made in the same (sorted) order on every member
        for param in group:
            broadcast_initial_values(param, comm)


def _by_stages(topology, params, stages_of):
    """``[(stages, parameters)]`` of the parameters held here, stage sets sorted, so that
    every rank walks the groups it belongs to in one global order (no deadlock)."""
    groups = {}
    for param in params:
        if param.released or getattr(param, "sharding_layout", None) is not None:
            continue
        stages = tuple(sorted(stages_of(param) or range(topology.stages)))
        groups.setdefault(stages, []).append(param)
    return sorted(groups.items())
