"""Pipeline schedules as data: generation, lowering, validation, simulation, rendering.

Everything here is pure Python (no MPI, no tensors), so it sweeps many (ranks, micro-batches,
chunks) combinations in a few seconds.
"""
import functools
from fractions import Fraction

import pytest

from minitorch_dist.parallel.pipeline import (
    Action, Schedule, ScheduleError, SCHEDULE_KINDS, add_communication, format_schedule,
    generate_schedule, plot_schedule, simulate, validate_schedule)
from minitorch_dist.parallel.pipeline.schedule.actions import KINDS

VARIANTS = [("gpipe", 1), ("1f1b", 1), ("forward", 1),
            ("interleaved_1f1b", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 3)]


# The sweeps below share schedules; a Schedule is never modified, so caching is safe.
_generate = functools.lru_cache(maxsize=None)(generate_schedule)


def _lists(schedule):
    """The action lists as lists of strings, to edit by hand."""
    return {rank: [str(a) for a in acts] for rank, acts in schedule.actions.items()}


def _rebuild(schedule, lists):
    return Schedule(schedule.kind, schedule.num_ranks, schedule.num_microbatches, lists,
                    chunks=schedule.chunks)


# --- actions --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_action_str_parse_round_trip(kind):
    for stage, mb in [(0, 0), (3, 12), (17, 4)]:
        action = Action(kind, stage, mb)
        text = str(action)
        assert text == f"{stage}{kind}{mb}"
        assert Action.parse(text) == action
        assert repr(action) == text


def test_action_examples_and_messages():
    assert str(Action("F", 2, 0)) == "2F0" and str(Action("B", 1, 3)) == "1B3"
    assert Action.parse("1RECV_B0") == ("RECV_B", 1, 0)
    assert Action.parse("0SEND_F1").matching() == Action.parse("1RECV_F1")
    assert Action.parse("2SEND_B0").matching() == Action.parse("1RECV_B0")
    for send in ["0SEND_F3", "2SEND_B1"]:
        a = Action.parse(send)
        assert a.tag(4) == a.matching().tag(4)
    # tags are unique across all the messages of a schedule
    tags = [a.tag(5) for a in generate_schedule("interleaved_1f1b", 2, 5, 3).actions[0]
            if a.kind.startswith("SEND")]
    assert len(tags) == len(set(tags))


@pytest.mark.parametrize("text", ["F0", "0X1", "0F", "-1F0", "0 F 0", "", 3])
def test_action_parse_rejects_garbage(text):
    with pytest.raises(ValueError, match="expected '<stage><kind><microbatch>'"):
        Action.parse(text)


def test_action_rejects_bad_fields():
    with pytest.raises(ValueError, match="kind must be one of"):
        Action("W", 0, 0)
    with pytest.raises(ValueError, match="stage must be a non-negative int"):
        Action("F", -1, 0)
    with pytest.raises(ValueError, match="microbatch must be a non-negative int"):
        Action("F", 0, True)
    with pytest.raises(ValueError, match="only SEND/RECV"):
        Action("F", 0, 0).peer_stage


# --- generation: every schedule validates ---------------------------------------------------

@pytest.mark.parametrize("kind,chunks", VARIANTS)
@pytest.mark.parametrize("p", range(1, 9))
def test_generated_schedules_validate(kind, chunks, p):
    for m in range(p, 4 * p + 1):
        s = _generate(kind, p, m, chunks=chunks)
        validate_schedule(s)
        assert (s.num_ranks, s.num_microbatches, s.chunks, s.num_stages) == (p, m, chunks,
                                                                               p * chunks)
        per_microbatch = 1 if kind == "forward" else 2
        for rank, actions in s.actions.items():
            computes = [a for a in actions if a.is_compute]
            assert len(computes) == per_microbatch * m * chunks
            assert {a.stage for a in computes} == set(s.stages_of(rank))
            if p == 1:                 # adjacent stages share the rank: no messages
                assert all(a.is_compute for a in actions)
            if kind == "forward":
                assert all(a.kind in ("F", "SEND_F", "RECV_F", "WAIT_F") for a in actions)
        if m in (p, 3 * p + 1):         # unbalanced costs and slow messages still finish
            s.simulate(forward_cost=lambda stage: 1 + stage % 2, backward_cost=2,
                       send_cost=0.5)


@pytest.mark.parametrize("kind", ["gpipe", "forward"])
@pytest.mark.parametrize("chunks", [2, 3])
def test_breadth_first_kinds_with_several_chunks(kind, chunks):
    for p in range(1, 6):
        for m in range(p, 2 * p + 1):
            s = generate_schedule(kind, p, m, chunks=chunks)
            validate_schedule(s)
            # every rank runs its stages in model order, micro-batches in order within each
            fwd = [a for a in s.compute_only().actions[0] if a.kind == "F"]
            assert fwd == sorted(fwd, key=lambda a: (a.stage, a.microbatch))
            result = s.simulate()
            if kind == "forward":
                assert result.makespan == m * chunks + p - 1


@pytest.mark.parametrize("kind,chunks", VARIANTS)
def test_sends_follow_producers_and_lowering_is_reproducible(kind, chunks):
    s = generate_schedule(kind, 3, 7, chunks=chunks)
    for actions in s.actions.values():
        for j, a in enumerate(actions):
            if a.kind in ("SEND_F", "SEND_B"):       # right after its compute (or its sibling)
                producer = Action(a.kind[-1], a.stage, a.microbatch)
                assert actions[j - 1] == producer
            if a.kind == "RECV_B":                   # after the forward that shapes it
                assert actions.index(Action("F", a.stage, a.microbatch)) < j
    assert add_communication(s.compute_only()) == s
    with pytest.raises(ValueError, match="expected a compute-only schedule"):
        add_communication(s)                         # already lowered


def test_recv_lookahead():
    s = generate_schedule("gpipe", 2, 3).compute_only()
    late = add_communication(s, recv_lookahead=0).actions[1]
    early = add_communication(s, recv_lookahead=2).actions[1]
    assert [str(a) for a in late[:4]] == ["1RECV_F0", "1F0", "1RECV_F1", "1F1"]
    assert [str(a) for a in early[:4]] == ["1RECV_F0", "1RECV_F1", "1RECV_F2", "1F0"]
    for lookahead in range(4):
        validate_schedule(add_communication(s, recv_lookahead=lookahead))
    with pytest.raises(ValueError, match="recv_lookahead must be an int >= 0"):
        add_communication(s, recv_lookahead=-1)


def test_one_f_one_b_shape():
    s = generate_schedule("1f1b", 4, 6)
    assert [str(a) for a in s.compute_only().actions[0]] == \
        "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5".split()
    assert [str(a) for a in s.compute_only().actions[3]] == \
        "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5".split()
    assert generate_schedule("interleaved_1f1b", 4, 6, chunks=1).actions == s.actions
    assert generate_schedule("GPipe", 2, 2).kind == "gpipe"       # case-insensitive


def test_forward_only():
    result = generate_schedule("forward", 3, 4, chunks=2).simulate()
    assert result.makespan == 4 * 2 + 3 - 1                 # m * chunks + fill
    assert result.peak_activations == {0: 0, 1: 0, 2: 0}     # nothing kept for a backward
    s = generate_schedule("forward", 3, 2, chunks=2)     # m < p is fine for evaluation
    assert s.simulate().makespan == (2 - 1) + 6          # the last one crosses 6 stages
    assert s.forward_only and not generate_schedule("gpipe", 2, 2).forward_only


# --- bad arguments --------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (("pipedream", 2, 4), "unknown kind 'pipedream'; expected one of gpipe, 1f1b, "
                          "interleaved_1f1b, forward"),
    ((None, 2, 4), "unknown kind None"),
    (("1f1b", 0, 4), "num_ranks must be a positive int, got 0"),
    (("1f1b", -2, 4), "num_ranks must be a positive int, got -2"),
    (("1f1b", True, 4), "num_ranks must be a positive int, got True"),
    (("1f1b", 2.0, 4), "num_ranks must be a positive int, got 2.0"),
    (("gpipe", 2, "4"), "num_microbatches must be a positive int, got '4'"),
    (("gpipe", 2, 0), "num_microbatches must be a positive int, got 0"),
    (("interleaved_1f1b", 2, 4, 0), "chunks must be a positive int, got 0"),
    (("interleaved_1f1b", 2, 4, False), "chunks must be a positive int, got False"),
    (("1f1b", 4, 3), "num_microbatches must be >= num_ranks .* got num_microbatches=3 with "
                     "num_ranks=4"),
    (("gpipe", 3, 2), "micro_size must be >= stages"),
    (("interleaved_1f1b", 4, 2, 2), "num_microbatches must be >= num_ranks"),
    (("1f1b", 2, 4, 2), "'1f1b' runs one stage per rank, so chunks must be 1, got chunks=2"),
])
def test_generator_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        generate_schedule(*args)


def test_schedule_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_ranks must be a positive int"):
        Schedule("x", 0, 1, {})
    with pytest.raises(ValueError, match="actions must be a dict"):
        Schedule("x", 1, 1, [["0F0"]])
    with pytest.raises(ValueError, match="expected '<stage><kind><microbatch>'"):
        Schedule("x", 1, 1, {0: ["0Q0"]})


# --- hand-broken schedules are rejected with the reason -------------------------------------

@pytest.fixture
def good():
    """A valid 2-rank, 2-micro-batch 1F1B schedule to break."""
    s = generate_schedule("1f1b", 2, 2)
    assert _lists(s) == {
        0: "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0WAIT_F0 0B0 0WAIT_F1 0B1".split(),
        1: "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1WAIT_B0 1WAIT_B1".split()}
    return s


def _broken(good, edit):
    lists = _lists(good)
    edit(lists)
    return _rebuild(good, lists)


def test_rejects_missing_recv(good):
    bad = _broken(good, lambda l: l[1].remove("1RECV_F0"))
    with pytest.raises(ScheduleError, match=r"missing RECV: 1F0 \(rank 1, position 0\) needs "
                                            r"1RECV_F0 .*its SEND is 0SEND_F0 on rank 0"):
        validate_schedule(bad)


def test_rejects_missing_send(good):
    bad = _broken(good, lambda l: l[1].remove("1SEND_B1"))
    with pytest.raises(ScheduleError, match=r"missing SEND: 1B1 .* posts 0RECV_B1, but rank 1 "
                                            r"has no 1SEND_B1"):
        validate_schedule(bad)


def test_rejects_b_before_its_f(good):
    def edit(lists):
        lists[1] = "1RECV_F0 1RECV_F1 1B0 1F0 1SEND_B0 1F1 1B1 1SEND_B1".split()
    with pytest.raises(ScheduleError, match=r"B before its F: 1B0 \(rank 1, position 2\) runs "
                                            r"before 1F0") as info:
        validate_schedule(_broken(good, edit))
    assert info.value.rank == 1 and info.value.action == Action.parse("1B0")
    alone = Schedule("x", 1, 1, {0: ["0B0", "0F0"]})
    with pytest.raises(ScheduleError, match="B before its F"):
        alone.validate()


def test_rejects_send_recv_cycle_deadlock(good):
    # rank 1 insists on micro-batch 1 first; rank 0 sends it only after B of micro-batch 0
    def edit(lists):
        lists[0] = "0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1".split()
        lists[1] = "1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F0 1F0 1B0 1SEND_B0".split()
    with pytest.raises(ScheduleError) as info:
        validate_schedule(_broken(good, edit))
    message = str(info.value)
    assert message.startswith("deadlock: ")
    assert "rank 0 is stuck at 0B0 (position 3) waiting for 1SEND_B0 on rank 1" in message
    assert "rank 1 is stuck at 1F1 (position 1) waiting for 0SEND_F1 on rank 0" in message
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(_broken(good, edit))


def test_rejects_same_rank_order_deadlock():
    s = Schedule("x", 1, 1, {0: ["1F0", "0F0", "1B0", "0B0"]}, chunks=2)
    with pytest.raises(ScheduleError, match="deadlock: rank 0 is stuck at 1F0 .* waiting for "
                                            "0F0 on rank 0"):
        s.validate()


def test_rejects_duplicated_f(good):
    bad = _broken(good, lambda l: l[0].append("0F1"))
    with pytest.raises(ScheduleError, match=r"duplicate action: 0F1 appears twice on rank 0 "
                                            r"\(positions 3 and 10\)"):
        validate_schedule(bad)


def test_rejects_wrong_rank(good):
    def edit(lists):
        lists[1].remove("1F1")
        lists[0].append("1F1")
    with pytest.raises(ScheduleError, match=r"wrong rank: 1F1 \(rank 0, position 10\), but "
                                            r"stage 1 lives on rank 1"):
        validate_schedule(_broken(good, edit))


@pytest.mark.parametrize("edit,message", [
    (lambda l: (l[0].remove("0B1"), l[0].remove("0RECV_B1"), l[0].remove("0WAIT_F1")),
     r"missing action: rank 0 has no 0B1"),
    (lambda l: l[0].append("0F2"), r"out of range: 0F2 .* micro-batches 0..1"),
    (lambda l: l[0].append("4F0"), r"out of range: 4F0 .* stages are 0..1"),
    (lambda l: l[1].append("1SEND_F0"), r"no such peer: 1SEND_F0 .* talks to stage 2"),
    (lambda l: l.pop(1), r"keyed by the ranks 0..1, got ranks \[0\]"),
    (lambda l: l[1].insert(0, l[1].pop(l[1].index("1RECV_F1"))), None),  # earlier RECV: fine
    (lambda l: (l[1].remove("1RECV_F1"), l[1].append("1RECV_F1")),
     r"RECV too late: 1RECV_F1 \(position 9\) is posted after 1F1"),
    (lambda l: (l[0].remove("0SEND_F1"), l[0].insert(0, "0SEND_F1")),
     r"SEND too early: 0SEND_F1 \(position 0\) comes before 0F1"),
    (lambda l: (l[0].remove("0RECV_B1"), l[0].insert(0, "0RECV_B1")),
     r"RECV too early: 0RECV_B1 \(position 0\) is posted before 0F1"),
])
def test_rejects_other_breakages(good, edit, message):
    bad = _broken(good, edit)
    if message is None:
        validate_schedule(bad)
    else:
        with pytest.raises(ScheduleError, match=message):
            validate_schedule(bad)


def test_rejects_backward_in_forward_only_and_same_rank_messages():
    fwd = generate_schedule("forward", 2, 2)
    lists = _lists(fwd)
    lists[1].append("1B0")
    with pytest.raises(ScheduleError, match="backward in a forward-only schedule: 1B0"):
        _rebuild(fwd, lists).validate()
    alone = Schedule("x", 1, 1, {0: ["0F0", "0SEND_F0", "1RECV_F0", "1F0", "1B0", "0B0"]},
                     chunks=2)
    with pytest.raises(ScheduleError, match="same-rank message: 0SEND_F0 .* stages 0 and 1 "
                                            "both live on rank 0"):
        alone.validate()
    assert issubclass(ScheduleError, ValueError)


def test_validator_and_simulator_agree_on_shuffled_schedules():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=60, deadline=None)
    @hypothesis.given(kind=st.sampled_from(["gpipe", "1f1b", "interleaved_1f1b"]),
                      rank=st.integers(0, 2), data=st.data())
    def check(kind, rank, data):
        s = generate_schedule(kind, 3, 4, chunks=2 if kind == "interleaved_1f1b" else 1)
        lists = _lists(s)
        lists[rank] = data.draw(st.permutations(lists[rank]))
        shuffled = _rebuild(s, lists)
        try:
            validate_schedule(shuffled)
        except ScheduleError as error:
            assert str(error)                   # a reason, never another exception type
            return
        simulate(shuffled)                      # a valid schedule always finishes

    check()


# --- simulation -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", range(1, 9))
def test_unit_cost_bubble_is_exact(kind, p):
    for m in range(p, 4 * p + 1):
        result = _generate(kind, p, m).simulate(forward_cost=1, backward_cost=1)
        assert result.bubble_fraction == pytest.approx(Fraction(p - 1, m + p - 1), abs=1e-12)
        assert result.makespan == 2 * (m + p - 1)
        exact = _generate(kind, p, m).simulate(forward_cost=Fraction(1),
                                                       backward_cost=Fraction(2))
        assert exact.bubble_fraction == Fraction(p - 1, m + p - 1)   # any F/B ratio


@pytest.mark.parametrize("p", range(1, 9))
def test_peak_activations(p):
    for m in range(p, 4 * p + 1):
        one = _generate("1f1b", p, m).simulate().peak_activations
        assert one == {r: min(m, p - r) for r in range(p)}
        assert all(one[r] <= p - r for r in range(p))
        assert _generate("gpipe", p, m).simulate().peak_activations == \
            {r: m for r in range(p)}
    if p >= 2:                                  # interleaving: Megatron's warm-up length
        v, m = 2, 2 * p
        peaks = _generate("interleaved_1f1b", p, m, chunks=v).simulate().peak_activations
        assert peaks == {r: (v - 1) * p + 2 * (p - 1 - r) + 1 for r in range(p)}


@pytest.mark.parametrize("p", range(2, 9))
def test_interleaving_shrinks_the_bubble(p):
    for m in range(p, 4 * p + 1):
        plain = _generate("1f1b", p, m).simulate().bubble_fraction
        for v in (2, 3):
            inter = _generate("interleaved_1f1b", p, m, chunks=v).simulate()
            if m % p == 0:
                assert inter.bubble_fraction < plain
            # with unit costs the fill and drain cost (p - 1) chunk slots each way, for every
            # m >= p, not only multiples of p
            assert inter.bubble_fraction == pytest.approx((p - 1) / (m * v + p - 1), abs=1e-12)


def test_simulate_costs_and_messages():
    s = add_communication(Schedule("gpipe", 2, 1, {0: ["0F0", "0B0"], 1: ["1F0", "1B0"]}))
    # F on stage 0, message, F+B on stage 1, message back, B on stage 0
    assert s.simulate(send_cost=Fraction(1, 2)).makespan == 5
    result = s.simulate(forward_cost=lambda stage: 1 + 2 * stage, backward_cost=1)
    assert result.times[Action.parse("1F0")] == (1, 4)
    assert result.times[Action.parse("0B0")] == (5, 6)
    assert result.busy == {0: 2, 1: 4} and result.idle == {0: 4, 1: 2}
    assert result.timeline(1) == [(1, 4, Action.parse("1F0")), (4, 5, Action.parse("1B0"))]
    assert "makespan=6" in repr(result)
    # a compute-only schedule simulates as if every message were sent right away
    t = generate_schedule("1f1b", 3, 5)
    for cost in (0, 1):
        assert t.compute_only().simulate(send_cost=cost).makespan == \
            t.simulate(send_cost=cost).makespan
    for bad in [dict(forward_cost=-1), dict(backward_cost="2"), dict(send_cost=True),
                dict(forward_cost=lambda stage: None)]:
        with pytest.raises(ValueError, match="must be a non-negative number"):
            s.simulate(**bad)


# --- rendering ------------------------------------------------------------------------------

def test_format_schedule():
    s = generate_schedule("1f1b", 3, 4)
    text = format_schedule(s)
    rows = [line for line in text.splitlines() if line.startswith("rank")]
    assert len(rows) == 3
    assert "0F0" in rows[0] and "1F0" in rows[1] and "2B3" in rows[2]
    assert rows[2].split()[2] == "."                       # rank 2 idles in slot 0
    assert "bubble 33.3%" in text.splitlines()[0]
    assert s.format(header=False).splitlines()[0].startswith("rank 0")
    with_comm = s.format(comm=True)
    assert "0SEND_F0" in with_comm and "1RECV_F0" in with_comm
    assert "-" in s.format(backward_cost=2)                # a 2-slot backward
    with pytest.raises(ValueError, match="whole-number times"):
        s.format(forward_cost=0.5)


def test_plot_schedule():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    s = generate_schedule("interleaved_1f1b", 2, 4, chunks=2)
    fig = plot_schedule(s)
    try:
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert "interleaved_1f1b" in ax.get_title() and "bubble" in ax.get_title()
        assert len(ax.collections) == 2 * 2 * 4 * 2        # one box per compute
        assert {t.get_text() for t in ax.texts} == {"0", "1", "2", "3"}
    finally:
        plt.close(fig)
    fig2, ax2 = plt.subplots()
    try:
        assert s.plot(ax=ax2, backward_cost=2) is fig2
    finally:
        plt.close(fig2)


def test_public_names():
    assert SCHEDULE_KINDS == ("gpipe", "1f1b", "interleaved_1f1b", "forward")
    import minitorch_dist.parallel.pipeline as pipeline
    for name in ["Action", "Schedule", "ScheduleError", "generate_schedule",
                 "add_communication", "validate_schedule", "simulate", "format_schedule",
                 "plot_schedule", "SCHEDULE_KINDS"]:
        assert hasattr(pipeline, name)
