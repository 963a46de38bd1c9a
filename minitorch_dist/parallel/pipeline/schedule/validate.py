"""Proof that a schedule is complete, consistent and cannot deadlock.

``validate_schedule`` checks a ``Schedule`` (``schedule.py``) against the contract the runtime
relies on, and raises ``ScheduleError`` with the first problem it finds, naming the rank and
the action:

1. every action is in range and on the rank that owns its stage (``stage % num_ranks``);
2. every stage has exactly one ``F`` and (unless forward-only) one ``B`` per micro-batch,
   and no action appears twice;
3. on each rank ``B(s, i)`` comes after ``F(s, i)``;
4. a tensor that crosses ranks travels as a SEND on the producer's rank and a matching RECV on
   the consumer's rank: the SEND after the compute that produced it, the RECV before the
   compute that consumes it (a gradient RECV also after the forward it belongs to, whose
   output fixes the gradient's shape); stages on the same rank exchange tensors directly,
   with no SEND/RECV;
5. a WAIT comes after the SEND it completes, on the same rank (a SEND without a WAIT is
   completed at the end of the step);
6. no deadlock, in the runtime's model of execution (``dependency`` below): each rank runs its
   list in order, SEND and RECV never block, a compute blocks until its input has been sent,
   and a WAIT blocks until the other rank has posted the matching RECV (a large message
   leaves only once its receive is posted: MPI's rendezvous protocol). Running all ranks
   until none can move must finish every list.

>>> from minitorch_dist.parallel.pipeline import Schedule
>>> bad = Schedule("gpipe", 2, 1, {0: ["0F0", "0SEND_F0", "0RECV_B0", "0B0"],
...                                1: ["1F0", "1B0", "1SEND_B0"]})
>>> try:
...     validate_schedule(bad)
... except ScheduleError as error:
...     print(error)
missing RECV: 1F0 (rank 1, position 0) needs 1RECV_F0 posted before it, and rank 1 has no \
1RECV_F0 (its SEND is 0SEND_F0 on rank 0)
"""
from .actions import Action, F, B, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_B

__all__ = ["ScheduleError", "validate_schedule", "dependency"]


class ScheduleError(ValueError):
    """A schedule breaks the contract; ``rank`` and ``action`` name where (None if global)."""

    def __init__(self, message, rank=None, action=None):
        super().__init__(message)
        self.rank, self.action = rank, action


def dependency(schedule, action):
    """What ``action`` waits for: an action that must have run (on any rank) first.

    ``F(s, i)`` needs stage ``s - 1``'s output: ``SEND_F(s - 1, i)`` when that stage lives on
    another rank, ``F(s - 1, i)`` itself when it lives on the same rank. ``B(s, i)`` needs the
    gradient from stage ``s + 1`` the same way; the last stage's ``B`` starts from the loss of
    its own ``F``. A WAIT needs the receive of its message posted on the other rank
    (``WAIT_F(s, i)`` → ``RECV_F(s + 1, i)``). ``None`` for the first stage's ``F`` and for
    SEND and RECV, which never block.
    """
    if action.is_wait:
        return action.matching()
    kind, stage, mb = action
    last = schedule.num_stages - 1
    if kind == F and stage > 0:
        if schedule.rank_of(stage - 1) == schedule.rank_of(stage):
            return Action(F, stage - 1, mb)
        return Action(SEND_F, stage - 1, mb)
    if kind == B:
        if stage == last:
            return Action(F, stage, mb)
        if schedule.rank_of(stage + 1) == schedule.rank_of(stage):
            return Action(B, stage + 1, mb)
        return Action(SEND_B, stage + 1, mb)
    return None


def validate_schedule(schedule):
    """Raise ``ScheduleError`` unless ``schedule`` is complete, consistent and deadlock-free.

    See the module docstring for the rules. Returns None.
    """
    positions = _check_actions(schedule)
    _check_complete(schedule, positions)
    for rank in range(schedule.num_ranks):
        _check_order(schedule, rank, positions[rank])
    _check_progress(schedule)


class _Where:
    """``2F0 (rank 0, position 5)`` for error messages, formatted only if one is raised."""

    __slots__ = ("action", "rank", "pos")

    def __init__(self, action, rank, pos):
        self.action, self.rank, self.pos = action, rank, pos

    def __str__(self):
        return f"{self.action} (rank {self.rank}, position {self.pos})"


def _check_actions(schedule):
    """Rules 1 and 2 per action: range, owner rank, allowed kind, no duplicates.

    Returns ``{rank: {action: position}}``.
    """
    p, m, S = schedule.num_ranks, schedule.num_microbatches, schedule.num_stages
    if sorted(schedule.actions) != list(range(p)):
        raise ScheduleError(f"the action lists must be keyed by the ranks 0..{p - 1}, got ranks "
                            f"{sorted(schedule.actions)}")
    positions = {}
    for rank in range(p):
        seen = positions[rank] = {}
        for pos, action in enumerate(schedule.actions[rank]):
            if not isinstance(action, Action):
                raise ScheduleError(f"rank {rank}, position {pos}: expected an Action, got "
                                    f"{action!r}", rank, action)
            where = _Where(action, rank, pos)
            if action.stage >= S or action.microbatch >= m:
                raise ScheduleError(f"out of range: {where}; stages are 0..{S - 1} and "
                                    f"micro-batches 0..{m - 1}", rank, action)
            owner = schedule.rank_of(action.stage)
            if owner != rank:
                raise ScheduleError(f"wrong rank: {where}, but stage {action.stage} lives on "
                                    f"rank {owner}", rank, action)
            if schedule.forward_only and action.kind in (B, SEND_B, RECV_B, WAIT_B):
                raise ScheduleError(f"backward in a forward-only schedule: {where}; a "
                                    "forward-only schedule has no B and no gradient messages",
                                    rank, action)
            if action.is_comm:
                peer = action.peer_stage
                if not 0 <= peer < S:
                    raise ScheduleError(f"no such peer: {where} talks to stage {peer}, but the "
                                        f"stages are 0..{S - 1}", rank, action)
                if schedule.rank_of(peer) == rank:
                    raise ScheduleError(f"same-rank message: {where}; stages {action.stage} and "
                                        f"{peer} both live on rank {rank}, which passes the "
                                        "tensor directly, without SEND/RECV", rank, action)
            if action in seen:
                raise ScheduleError(f"duplicate action: {action} appears twice on rank {rank} "
                                    f"(positions {seen[action]} and {pos})", rank, action)
            seen[action] = pos
    return positions


def _check_complete(schedule, positions):
    """Rule 2: one F (and one B) for every (stage, micro-batch)."""
    kinds = (F,) if schedule.forward_only else (F, B)
    for stage in range(schedule.num_stages):
        rank = schedule.rank_of(stage)
        for mb in range(schedule.num_microbatches):
            for kind in kinds:
                action = Action(kind, stage, mb)
                if action not in positions[rank]:
                    raise ScheduleError(f"missing action: rank {rank} has no {action} (stage "
                                        f"{stage} must run {kind} once for each of the "
                                        f"{schedule.num_microbatches} micro-batches)",
                                        rank, action)


def _check_order(schedule, rank, pos):
    """Rules 3 to 5 on one rank: B after F, RECV before its consumer, SEND after its producer,
    WAIT after its SEND.

    Every SEND/RECV present belongs to a compute of this rank (``_check_actions`` checked the
    stage, the kind and the peer); requiring each compute's messages therefore also proves
    that every SEND has exactly one RECV and the other way round.
    """
    last = schedule.num_stages - 1
    for action, here in pos.items():
        if action.is_wait:
            send = action.send()
            if send not in pos:
                raise ScheduleError(f"WAIT without its SEND: {_Where(action, rank, here)} "
                                    f"completes {send}, which rank {rank} never posts",
                                    rank, action)
            if pos[send] > here:
                raise ScheduleError(f"WAIT too early: {_Where(action, rank, here)} comes "
                                    f"before {send} (position {pos[send]}), the send it "
                                    "completes", rank, action)
        if not action.is_compute:
            continue
        kind, stage, mb = action
        where = _Where(action, rank, here)
        if kind == B:
            fwd = Action(F, stage, mb)
            if pos[fwd] > here:
                raise ScheduleError(f"B before its F: {where} runs before {fwd} (position "
                                    f"{pos[fwd]})", rank, action)
        # the tensor this compute consumes from a neighbour on another rank
        src = stage - 1 if kind == F else stage + 1
        if 0 <= src <= last and schedule.rank_of(src) != rank:
            recv = Action(RECV_F if kind == F else RECV_B, stage, mb)
            send = recv.matching()
            if recv not in pos:
                raise ScheduleError(f"missing RECV: {where} needs {recv} posted before it, and "
                                    f"rank {rank} has no {recv} (its SEND is {send} on rank "
                                    f"{schedule.rank_of(src)})", rank, action)
            if pos[recv] > here:
                raise ScheduleError(f"RECV too late: {recv} (position {pos[recv]}) is posted "
                                    f"after {where}, which consumes it", rank, recv)
            if kind == B and pos[recv] < pos[Action(F, stage, mb)]:
                raise ScheduleError(f"RECV too early: {recv} (position {pos[recv]}) is posted "
                                    f"before {Action(F, stage, mb)} (position "
                                    f"{pos[Action(F, stage, mb)]}), whose output gives the "
                                    "gradient its shape", rank, recv)
        # the tensor this compute produces for a neighbour on another rank
        dst = stage + 1 if kind == F else stage - 1
        if 0 <= dst <= last and schedule.rank_of(dst) != rank:
            send = Action(SEND_F if kind == F else SEND_B, stage, mb)
            if send not in pos:
                raise ScheduleError(f"missing SEND: {where} produces a tensor for stage {dst} "
                                    f"on rank {schedule.rank_of(dst)}, which posts "
                                    f"{send.matching()}, but rank {rank} has no {send}",
                                    rank, action)
            if pos[send] < here:
                raise ScheduleError(f"SEND too early: {send} (position {pos[send]}) comes "
                                    f"before {where}, the compute that produces its tensor",
                                    rank, send)


def _check_progress(schedule):
    """Rule 6: run every rank in the runtime's model until none can move; all must finish."""
    lists = schedule.actions
    cursor = {rank: 0 for rank in lists}
    done = set()
    moved = True
    while moved:
        moved = False
        for rank, actions in lists.items():
            k = cursor[rank]
            while k < len(actions):
                need = dependency(schedule, actions[k])
                if need is not None and need not in done:
                    break
                done.add(actions[k])
                k += 1
            moved |= k != cursor[rank]
            cursor[rank] = k
    if any(cursor[rank] < len(lists[rank]) for rank in lists):
        raise deadlock_error(schedule, cursor)


def deadlock_error(schedule, cursor, need_of=dependency):
    """The ``ScheduleError`` for ranks stopped at ``cursor`` (``{rank: next position}``).

    ``need_of(schedule, action)`` names what a stuck compute waits for.
    """
    lists = schedule.actions
    stuck = [rank for rank in sorted(lists) if cursor[rank] < len(lists[rank])]
    waits = []
    for rank in stuck:
        action = lists[rank][cursor[rank]]
        need = need_of(schedule, action)
        waits.append(f"rank {rank} is stuck at {action} (position {cursor[rank]}) waiting for "
                     f"{need} on rank {schedule.rank_of(need.stage)}")
    first = lists[stuck[0]][cursor[stuck[0]]]
    return ScheduleError("deadlock: " + "; ".join(waits), stuck[0], first)
