"""A dry run of a schedule: when each action starts and ends, and how much time is idle.

The model is the runtime's (and the validator's, see ``validate.dependency``):

* each rank executes its list in order and does one thing at a time;
* ``F`` takes ``forward_cost`` and ``B`` takes ``backward_cost`` time units; each may be a
  number or a callable ``cost(stage) -> number`` (unbalanced stages);
* SEND and RECV take no time: they only post a message. A message can be consumed
  ``send_cost`` after its SEND executed (the transfer time); RECV never waits;
* a WAIT completes a SEND: it ends when the message has arrived, ``send_cost`` after both
  the SEND and the matching RECV were posted (a large message leaves only once its receive
  is posted). The rank is idle until then;
* a compute starts when its rank is free *and* its input is there: ``F(s, i)`` needs stage
  ``s - 1``'s output of micro-batch ``i``, ``B(s, i)`` the gradient from stage ``s + 1``.

A compute-only schedule (the first step of generation, before ``add_communication``) can be
simulated too: a tensor crossing ranks without a SEND is taken to leave when the compute that
produced it ends.

The default costs are F = B = 1 ("one slot per compute", as PyTorch's simulator counts
steps), which makes the GPipe and 1F1B bubble exactly ``(p - 1) / (m + p - 1)``. A real
backward costs about twice a forward: pass ``backward_cost=2`` to see it.

>>> from minitorch_dist.parallel.pipeline import generate_schedule
>>> result = simulate(generate_schedule("1f1b", 4, 8))
>>> result.makespan, result.bubble_fraction == 3 / 11, result.peak_activations
(22, True, {0: 4, 1: 3, 2: 2, 3: 1})
"""
from numbers import Real

from .actions import Action, F, B, SEND_F, SEND_B
from .validate import dependency, deadlock_error

__all__ = ["SimulationResult", "simulate"]


class SimulationResult:
    """What ``simulate`` found.

    Attributes:
        schedule: the simulated ``Schedule``.
        makespan: end time of the last action on any rank.
        busy, idle: ``{rank: time}`` spent computing, and ``makespan - busy``.
        bubble_fraction: total idle time / (``num_ranks`` × ``makespan``).
        times: ``{action: (start, end)}`` for every action (SEND/RECV have start == end; a
            WAIT's span is the time its rank waited).
        peak_activations: ``{rank: n}``, the most micro-batch activations a rank holds at once
            (+1 at each ``F``, −1 at the ``B`` of the same stage and micro-batch; one stage's
            activations for one micro-batch count 1). A forward-only schedule keeps nothing
            for a backward, so its peaks are 0.
    """

    def __init__(self, schedule, times, peak_activations):
        self.schedule, self.times, self.peak_activations = schedule, times, peak_activations
        self.makespan = max((end for _, end in times.values()), default=0)
        self.busy = {}
        for rank, actions in schedule.actions.items():
            self.busy[rank] = sum((times[a][1] - times[a][0] for a in actions if a.is_compute), 0)
        self.idle = {rank: self.makespan - busy for rank, busy in self.busy.items()}
        total = schedule.num_ranks * self.makespan
        self.bubble_fraction = sum(self.idle.values()) / total if total else 0.0

    def timeline(self, rank, comm=False):
        """``[(start, end, action), ...]`` of one rank, in execution order (compute only
        unless ``comm``)."""
        return [(*self.times[a], a) for a in self.schedule.actions[rank] if comm or a.is_compute]

    def __repr__(self):
        return (f"SimulationResult(kind={self.schedule.kind!r}, makespan={self.makespan}, "
                f"bubble_fraction={self.bubble_fraction:.4f}, "
                f"peak_activations={self.peak_activations})")


def _cost_function(name, cost):
    """Turn a number or a callable into ``stage -> cost``, checking numbers are >= 0."""
    def checked(value, stage):
        if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
            where = f" for stage {stage}" if stage is not None else ""
            raise ValueError(f"simulate: {name} must be a non-negative number or a callable "
                             f"stage -> number, got {value!r}{where}")
        return value

    if callable(cost):
        return lambda stage: checked(cost(stage), stage)
    checked(cost, None)
    return lambda stage: cost


def _producer(action):
    """The compute whose output a SEND carries (``0SEND_F1`` → ``0F1``)."""
    return Action(F if action.kind == SEND_F else B, action.stage, action.microbatch)


def simulate(schedule, forward_cost=1, backward_cost=1, send_cost=0):
    """Run ``schedule`` on the clock; returns a ``SimulationResult``.

    ``forward_cost``/``backward_cost``: time of one ``F``/``B`` (number, or callable
    ``stage -> number``); ``send_cost``: transfer time of one message (number). With integer
    or ``Fraction`` costs every time is exact. Raises ``ScheduleError`` if the schedule cannot
    finish (deadlock); otherwise it trusts the schedule, so run ``validate_schedule`` first on
    hand-written ones.
    """
    cost = {F: _cost_function("forward_cost", forward_cost),
            B: _cost_function("backward_cost", backward_cost)}
    transfer = _cost_function("send_cost", send_cost)(None)
    present = {a for actions in schedule.actions.values() for a in actions}

    def need_of(sched, action):
        need = dependency(sched, action)
        if need is not None and need.is_comm and need not in present:
            need = _producer(need)          # compute-only schedule: no SEND to wait for
        return need

    ready = {}                              # action -> time its output can be consumed
    times = {}
    clock = {rank: 0 for rank in schedule.actions}
    cursor = {rank: 0 for rank in schedule.actions}
    moved = True
    while moved:                            # sweep the ranks until none can move
        moved = False
        for rank, actions in schedule.actions.items():
            k, now = cursor[rank], clock[rank]
            while k < len(actions):
                action = actions[k]
                if action.is_compute:
                    need = need_of(schedule, action)
                    if need is not None and need not in ready:
                        break               # blocked: its input is not sent yet
                    start = now
                    if need is not None:
                        arrives = ready[need]
                        if need.is_compute and schedule.rank_of(need.stage) != rank:
                            arrives += transfer     # compute-only schedule: implicit message
                        start = max(now, arrives)
                    now = start + cost[action.kind](action.stage)
                    times[action], ready[action] = (start, now), now
                elif action.is_wait:
                    recv = action.matching()
                    if recv not in ready:
                        break               # blocked: the receive is not posted yet
                    start = now
                    now = max(now, ready[action.send()], ready[recv] + transfer)
                    times[action] = (start, now)
                else:
                    times[action] = (now, now)
                    # a SEND: when its message can be consumed; a RECV: when it was posted
                    ready[action] = now + transfer if action.kind in (SEND_F, SEND_B) else now
                k += 1
            moved |= k != cursor[rank]
            cursor[rank], clock[rank] = k, now
    if any(cursor[rank] < len(actions) for rank, actions in schedule.actions.items()):
        raise deadlock_error(schedule, cursor, need_of)
    return SimulationResult(schedule, times, _peak_activations(schedule))


def _peak_activations(schedule):
    """Walk each rank's list: +1 at F, -1 at B; the running maximum per rank."""
    peaks = {}
    for rank, actions in schedule.actions.items():
        live = peak = 0
        if not schedule.forward_only:
            for action in actions:
                live += {F: 1, B: -1}.get(action.kind, 0)
                peak = max(peak, live)
        peaks[rank] = peak
    return peaks
