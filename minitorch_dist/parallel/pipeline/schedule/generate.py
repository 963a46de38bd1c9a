"""Pipeline schedules as data: which rank does what, in which order.

A ``Schedule`` is a dict ``rank -> tuple of Actions`` plus the numbers that give it meaning
(ranks, micro-batches, stages per rank). It can be validated, simulated, printed and plotted
before anything runs, and the runtime simply walks its own rank's list.

``generate_schedule`` builds one in two pure steps:

1. a compute-only order per rank (``F``/``B`` only), which is where schedules differ:

   * ``"gpipe"`` (fill-drain): every forward, then every backward, micro-batches in order.
     Simple, but a rank holds the activations of all ``m`` micro-batches at once.
   * ``"1f1b"`` (PipeDream-flush): rank ``r`` runs ``min(m, p - r)`` warm-up forwards, then
     alternates one backward and one forward, then drains the remaining backwards. Same
     bubble as GPipe, but at most ``p - r`` micro-batches are alive on rank ``r``.
   * ``"interleaved_1f1b"`` (Megatron's depth-first interleaving): each rank holds ``chunks``
     stages (rank ``r`` owns stages ``r, r + p, r + 2p, ...``), each ``1 / chunks`` of the
     work, so filling and draining the pipeline costs ``1 / chunks`` as much; the price is
     ``chunks`` times more messages and a few more warm-up forwards.
   * ``"forward"``: forward only, for evaluation: every ``F``, no ``B``, no gradient messages.

2. ``add_communication``, a lowering pass that inserts the SEND/RECV/WAIT actions: receives
   posted early, sends completed late, so that messages travel while the ranks compute.

With unit costs (F = B = 1, free messages) the simulated bubble is ``(p - 1) / (m + p - 1)``
for GPipe and 1F1B, and ``(p - 1) / (m * chunks + p - 1)`` for interleaved 1F1B, for every
``m >= p`` (checked by the tests for p <= 8; Megatron's own order needs ``m % p == 0``, see
``_microbatch_groups`` for the other m). ``generate_schedule`` validates what it returns.

The m >= p rule: a pipelined training schedule (gpipe, 1f1b, interleaved_1f1b) needs at least
as many micro-batches as ranks, as MindSpore requires ("micro_size must be >= stages");
otherwise some ranks never overlap anything. ``"forward"`` accepts any ``m >= 1``.

>>> s = generate_schedule("1f1b", num_ranks=2, num_microbatches=3)
>>> print(" ".join(map(str, s.actions[0])))
0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0WAIT_F0 0B0 0RECV_B1 0F2 0SEND_F2 0RECV_B2 0WAIT_F1 0B1 \
0WAIT_F2 0B2
>>> print(" ".join(map(str, s.actions[1])))
1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1RECV_F2 1B1 1SEND_B1 1F2 1B2 1SEND_B2 1WAIT_B0 \
1WAIT_B1 1WAIT_B2
"""
from .actions import Action, F, B, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_F, WAIT_B
from .validate import validate_schedule
from .simulate import simulate
from .render import format_schedule, plot_schedule

__all__ = ["Schedule", "SCHEDULE_KINDS", "generate_schedule", "add_communication"]

SCHEDULE_KINDS = ("gpipe", "1f1b", "interleaved_1f1b", "forward")


def _check_positive_int(where, name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")


class Schedule:
    """A per-rank list of actions and the numbers that give it meaning.

    Args:
        kind: a name (``"1f1b"``, ...; any string for a hand-written schedule).
        num_ranks, num_microbatches, chunks: positive ints; ``num_stages = num_ranks * chunks``
            and stage ``s`` lives on rank ``s % num_ranks``.
        actions: ``{rank: iterable of Action}`` in execution order; strings such as ``"0F1"``
            are parsed, so a schedule can be written by hand.
        forward_only: no backward at all (default: ``kind == "forward"``).

    Building a Schedule checks nothing beyond the arguments; ``validate()`` does the rest.

    >>> s = Schedule("mine", 1, 2, {0: "0F0 0F1 0B0 0B1".split()})
    >>> s.validate().simulate().bubble_fraction
    0.0
    """

    def __init__(self, kind, num_ranks, num_microbatches, actions, chunks=1, forward_only=None):
        if not isinstance(kind, str):
            raise ValueError(f"Schedule: kind must be a string, got {kind!r}")
        for name, value in (("num_ranks", num_ranks), ("num_microbatches", num_microbatches),
                            ("chunks", chunks)):
            _check_positive_int("Schedule", name, value)
        if not isinstance(actions, dict):
            raise ValueError(f"Schedule: actions must be a dict rank -> list of actions, got "
                             f"{type(actions).__name__}")
        self.kind = kind
        self.num_ranks, self.num_microbatches, self.chunks = num_ranks, num_microbatches, chunks
        self.num_stages = num_ranks * chunks
        self.forward_only = kind == "forward" if forward_only is None else bool(forward_only)
        try:
            items = sorted(actions.items())
        except TypeError:               # odd keys: keep them for validate() to name
            items = list(actions.items())
        self.actions = {rank: tuple(Action.parse(a) for a in acts) for rank, acts in items}

    def rank_of(self, stage):
        """The rank that runs ``stage`` (round robin: ``stage % num_ranks``)."""
        return stage % self.num_ranks

    def stages_of(self, rank):
        """The stages of ``rank``, in model order: ``(rank, rank + p, rank + 2p, ...)``."""
        return tuple(range(rank, self.num_stages, self.num_ranks))

    def compute_only(self):
        """A copy without the SEND/RECV actions (what ``add_communication`` starts from)."""
        return self._replace({r: [a for a in acts if a.is_compute]
                              for r, acts in self.actions.items()})

    def _replace(self, actions):
        return Schedule(self.kind, self.num_ranks, self.num_microbatches, actions,
                        chunks=self.chunks, forward_only=self.forward_only)

    def validate(self):
        """Raise ``ScheduleError`` unless valid (see ``validate.py``); returns ``self``."""
        validate_schedule(self)
        return self

    def simulate(self, **costs):
        """``simulate(self, **costs)``: timings, bubble and peak activations."""
        return simulate(self, **costs)

    def format(self, **options):
        """``format_schedule(self, **options)``: an ASCII timetable."""
        return format_schedule(self, **options)

    def plot(self, **options):
        """``plot_schedule(self, **options)``: a matplotlib timeline; returns the figure."""
        return plot_schedule(self, **options)

    def __eq__(self, other):
        if not isinstance(other, Schedule):
            return NotImplemented
        return (self.kind, self.num_ranks, self.num_microbatches, self.chunks,
                self.forward_only, self.actions) == (other.kind, other.num_ranks,
                                                     other.num_microbatches, other.chunks,
                                                     other.forward_only, other.actions)

    __hash__ = None

    def __repr__(self):
        count = sum(len(a) for a in self.actions.values())
        return (f"Schedule(kind={self.kind!r}, num_ranks={self.num_ranks}, num_microbatches="
                f"{self.num_microbatches}, chunks={self.chunks}, actions=<{count} actions>)")


# --- step 1: compute-only orders, one function per kind -------------------------------------

def _breadth_first_forwards(stages, m):
    """Every F of the rank: stage by stage, micro-batches in order within a stage.

    With one stage per rank this is just ``F0, F1, ...``. With several it is deadlock-free
    because every rank and every message moves forward in (stage, micro-batch) order.
    """
    return [Action(F, s, i) for s in stages for i in range(m)]


def _gpipe_order(stages, m):
    """Fill-drain: all forwards, then all backwards (last stage first, micro-batches in order)."""
    backwards = [Action(B, s, i) for s in reversed(stages) for i in range(m)]
    return _breadth_first_forwards(stages, m) + backwards


def _merge_one_f_one_b(forwards, backwards, warmup):
    """``warmup`` forwards, then alternate one backward and one forward, then the rest.

    The backward comes first in each pair: the forward that would follow it is one the rank
    need not hold yet, so the number of live activations never exceeds ``warmup``.
    """
    warmup = min(warmup, len(forwards))
    order = forwards[:warmup]
    for k in range(len(forwards) - warmup):
        order += [backwards[k], forwards[warmup + k]]
    return order + backwards[len(forwards) - warmup:]


def _one_f_one_b_order(p, m, rank):
    """1F1B on stage ``rank``: the first stage warms up with p forwards, the last with 1."""
    forwards = [Action(F, rank, i) for i in range(m)]
    backwards = [Action(B, rank, i) for i in range(m)]
    return _merge_one_f_one_b(forwards, backwards, min(m, p - rank))


def _microbatch_groups(m, p):
    """Split micro-batches 0..m-1 into consecutive groups of at least p, larger ones first.

    Megatron's depth-first order assumes ``m % p == 0`` (groups of exactly p). For other m we
    use ``m // p`` groups whose sizes differ by at most one, larger first, so that the first
    group (which sets the warm-up length) is the largest and later groups never need more
    look-ahead than the warm-up provides.
    """
    count = max(1, m // p)
    base, extra = divmod(m, count)
    sizes = [base + 1] * extra + [base] * (count - extra)
    groups, start = [], 0
    for size in sizes:
        groups.append(range(start, start + size))
        start += size
    return groups


def _interleaved_order(p, m, chunks, rank, stages):
    """Depth-first interleaved 1F1B (Narayanan et al. 2021, Megatron-LM).

    Forwards go group by group; within a group, through the rank's stages in model order,
    and within a stage through the group's micro-batches. Backwards mirror that with the
    stages reversed. Rank r warms up with ``(chunks - 1) * g + 2 * (p - 1 - r) + 1``
    forwards (g = size of the first group): enough to reach its last stage with the first
    micro-batch, plus two slots per downstream rank for the gradient's round trip.
    """
    if chunks == 1:
        return _one_f_one_b_order(p, m, rank)
    groups = _microbatch_groups(m, p)
    forwards = [Action(F, s, i) for g in groups for s in stages for i in g]
    backwards = [Action(B, s, i) for g in groups for s in reversed(stages) for i in g]
    warmup = (chunks - 1) * len(groups[0]) + 2 * (p - 1 - rank) + 1
    return _merge_one_f_one_b(forwards, backwards, warmup)


def _compute_order(kind, p, m, chunks, rank, stages):
    if kind == "forward":
        return _breadth_first_forwards(stages, m)
    if kind == "gpipe":
        return _gpipe_order(stages, m)
    if kind == "1f1b":
        return _one_f_one_b_order(p, m, rank)
    return _interleaved_order(p, m, chunks, rank, stages)


# --- step 2: lowering -----------------------------------------------------------------------

def add_communication(schedule, recv_lookahead=1):
    """Insert SEND/RECV/WAIT actions into a compute-only schedule; returns a new ``Schedule``.

    For each compute whose neighbour stage lives on another rank:

    * its SEND goes right after it (``F(s, i)`` → ``SEND_F(s, i)``, ``B(s, i)`` →
      ``SEND_B(s, i)``), so the tensor leaves as soon as it exists;
    * the RECV of its input is posted ``recv_lookahead`` computes early: right after the
      compute ``recv_lookahead + 1`` places before it (at the start of the list if there is
      none), so the transfer can overlap the computes in between. A gradient RECV is never
      posted before the forward it belongs to (``RECV_B(s, i)`` after ``F(s, i)``), whose
      output gives the gradient its shape;
    * its SEND is completed late, where its buffer is next needed or at the end: the
      activations' ``WAIT_F(s, i)`` right before ``B(s, i)`` (the gradient of those
      activations has to come back before ``B`` can run anyway, so by then the receiver has
      them and the wait costs nothing; the buffers go with ``B``), a forward-only schedule's
      at the end of the list; the gradients' ``WAIT_B(s, i)`` at the end of the list, since
      the previous stage receives them only when its own ``B`` comes.

    After each compute come its SENDs, then the RECVs posted there, in the order of the
    computes that will consume them. RECVs never block, so posting them early cannot cause a
    deadlock; SENDs are placed as soon as possible, so they cannot either; a WAIT needs only
    the receive posted, which every RECV is before its consumer. Stages on the same rank
    (``num_ranks == 1``) exchange nothing.

    >>> s = Schedule("gpipe", 2, 2, {0: ["0F0", "0F1", "0B0", "0B1"],
    ...                              1: ["1F0", "1F1", "1B0", "1B1"]})
    >>> add_communication(s, recv_lookahead=0).actions[1]
    (1RECV_F0, 1F0, 1RECV_F1, 1F1, 1B0, 1SEND_B0, 1B1, 1SEND_B1, 1WAIT_B0, 1WAIT_B1)
    """
    if isinstance(recv_lookahead, bool) or not isinstance(recv_lookahead, int) \
            or recv_lookahead < 0:
        raise ValueError(f"add_communication: recv_lookahead must be an int >= 0, got "
                         f"{recv_lookahead!r}")
    last = schedule.num_stages - 1
    lowered = {}
    for rank, actions in schedule.actions.items():
        comm = [a for a in actions if a.is_comm]
        if comm:
            raise ValueError(f"add_communication: expected a compute-only schedule, but rank "
                             f"{rank} already has {comm[0]}")
        forward_at = {(a.stage, a.microbatch): j for j, a in enumerate(actions) if a.kind == F}
        posted_after = {}               # compute position (-1 = start) -> RECVs posted there
        for j, action in enumerate(actions):
            kind, stage, mb = action
            source = stage - 1 if kind == F else stage + 1
            if 0 <= source <= last and schedule.rank_of(source) != rank:
                at = j - 1 - recv_lookahead
                if kind == B:
                    at = max(at, forward_at.get((stage, mb), -1))
                recv = Action(RECV_F if kind == F else RECV_B, stage, mb)
                posted_after.setdefault(max(at, -1), []).append(recv)
        out = list(posted_after.get(-1, ()))
        waits_at_end, sent_forward = [], set()
        for j, action in enumerate(actions):
            kind, stage, mb = action
            if kind == B and (stage, mb) in sent_forward:
                out.append(Action(WAIT_F, stage, mb))   # the activations' buffers go with B
            out.append(action)
            target = stage + 1 if kind == F else stage - 1
            if 0 <= target <= last and schedule.rank_of(target) != rank:
                out.append(Action(SEND_F if kind == F else SEND_B, stage, mb))
                if kind == F:
                    sent_forward.add((stage, mb))
                if kind == B or schedule.forward_only:
                    waits_at_end.append(Action(WAIT_F if kind == F else WAIT_B, stage, mb))
            out += posted_after.get(j, ())
        lowered[rank] = out + waits_at_end
    return schedule._replace(lowered)


# --- the generator --------------------------------------------------------------------------

def generate_schedule(kind, num_ranks, num_microbatches, chunks=1):
    """A validated ``Schedule`` of ``kind`` (one of ``SCHEDULE_KINDS``), with communication.

    ``chunks`` is the number of stages per rank (``num_stages = num_ranks * chunks``).
    ``"interleaved_1f1b"`` with ``chunks=1`` is exactly ``"1f1b"``; ``"1f1b"`` itself runs
    one stage per rank; ``"gpipe"`` and ``"forward"`` accept any ``chunks`` (stage by stage).

    >>> s = generate_schedule("interleaved_1f1b", num_ranks=2, num_microbatches=4, chunks=2)
    >>> s.stages_of(0), s.num_stages
    ((0, 2), 4)
    >>> s.simulate().bubble_fraction < generate_schedule("1f1b", 2, 4).simulate().bubble_fraction
    True
    """
    if not isinstance(kind, str) or kind.lower() not in SCHEDULE_KINDS:
        raise ValueError(f"generate_schedule: unknown kind {kind!r}; expected one of "
                         f"{', '.join(SCHEDULE_KINDS)}")
    kind = kind.lower()
    for name, value in (("num_ranks", num_ranks), ("num_microbatches", num_microbatches),
                        ("chunks", chunks)):
        _check_positive_int("generate_schedule", name, value)
    if kind != "forward" and num_microbatches < num_ranks:
        raise ValueError(f"generate_schedule: num_microbatches must be >= num_ranks for "
                         f"{kind!r} (micro_size must be >= stages), got num_microbatches="
                         f"{num_microbatches} with num_ranks={num_ranks}")
    if kind == "1f1b" and chunks != 1:
        raise ValueError(f"generate_schedule: '1f1b' runs one stage per rank, so chunks must be "
                         f"1, got chunks={chunks}; use 'interleaved_1f1b' for several stages "
                         "per rank")
    compute = Schedule(kind, num_ranks, num_microbatches, {}, chunks=chunks)
    compute = compute._replace({
        rank: _compute_order(kind, num_ranks, num_microbatches, chunks, rank,
                             compute.stages_of(rank))
        for rank in range(num_ranks)})
    return add_communication(compute).validate()
