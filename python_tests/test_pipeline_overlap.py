"""Overlap in the schedule IR: receives posted early, sends completed late (WAIT_F/WAIT_B).

The lowering pass places a WAIT for every SEND where its buffer is next needed (``WAIT_F``
right before the ``B`` of the same micro-batch) or at the end (``WAIT_B``, forward-only
schedules' ``WAIT_F``); the validator checks each WAIT against its SEND and proves that no
WAIT can deadlock (a send completes only once its receive is posted); the simulator charges
a WAIT the time its rank waits. Equality with one process under these schedules is checked
on real ranks by ``test_pipeline_mpi.py``.
"""
import pytest

from minitorch_dist.parallel.pipeline import (Action, Schedule, ScheduleError,
                                              generate_schedule, simulate, validate_schedule)

VARIANTS = [("gpipe", 1), ("1f1b", 1), ("forward", 1),
            ("interleaved_1f1b", 2), ("interleaved_1f1b", 3)]


def _without_waits(schedule):
    return Schedule(schedule.kind, schedule.num_ranks, schedule.num_microbatches,
                    {r: [a for a in acts if not a.is_wait]
                     for r, acts in schedule.actions.items()}, chunks=schedule.chunks)


# --- actions --------------------------------------------------------------------------------

def test_wait_actions_parse_and_name_their_send_and_receive():
    wait = Action.parse("0WAIT_F3")
    assert (wait.kind, wait.stage, wait.microbatch) == ("WAIT_F", 0, 3)
    assert wait.is_comm and wait.is_wait and not wait.is_compute
    assert wait.send() == Action.parse("0SEND_F3")
    assert wait.matching() == Action.parse("1RECV_F3")      # what it waits for
    assert wait.tag(8) == Action.parse("0SEND_F3").tag(8) == Action.parse("1RECV_F3").tag(8)
    back = Action.parse("2WAIT_B1")
    assert back.send() == Action.parse("2SEND_B1") and back.peer_stage == 1
    assert back.matching() == Action.parse("1RECV_B1")
    assert back.tag(4) == Action.parse("2SEND_B1").tag(4)
    assert not Action.parse("0SEND_F0").is_wait
    with pytest.raises(ValueError, match="only WAIT_F/WAIT_B complete a SEND"):
        Action.parse("0SEND_F0").send()


# --- lowering: where the WAITs go -----------------------------------------------------------

@pytest.mark.parametrize("kind,chunks", VARIANTS)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_send_is_completed_once_and_late(kind, chunks, p):
    for m in (p, 2 * p + 1):
        s = generate_schedule(kind, p, m, chunks=chunks)
        for rank, actions in s.actions.items():
            sends = [a for a in actions if a.kind in ("SEND_F", "SEND_B")]
            waits = [a for a in actions if a.is_wait]
            assert sorted(w.send() for w in waits) == sorted(sends)
            last_compute = max(j for j, a in enumerate(actions) if a.is_compute)
            for j, wait in enumerate(actions):
                if not wait.is_wait:
                    continue
                assert actions.index(wait.send()) < j
                if wait.kind == "WAIT_F" and not s.forward_only:
                    # right before the B of the same micro-batch, whose input comes back
                    assert actions[j + 1] == Action("B", wait.stage, wait.microbatch)
                else:                                       # gradients: at the very end
                    assert j > last_compute


@pytest.mark.parametrize("kind,chunks", VARIANTS)
def test_late_waits_cost_nothing_in_the_simulator(kind, chunks):
    """Completed where they are, the sends never hold a compute up, even with slow messages
    and unequal stages: every F and B runs when it would without the WAITs. (A WAIT at the
    end may wait for the last transfer, while the receiver computes.)"""
    for p in (2, 3, 4):
        s = generate_schedule(kind, p, 2 * p, chunks=chunks)
        for costs in ({}, dict(forward_cost=lambda st: 1 + st % 2, backward_cost=2,
                               send_cost=0.5)):
            with_waits, without = simulate(s, **costs), simulate(_without_waits(s), **costs)
            assert with_waits.makespan == without.makespan
            computes = {a: t for a, t in with_waits.times.items() if a.is_compute}
            assert computes == {a: t for a, t in without.times.items() if a.is_compute}
            assert any(a.is_wait for a in with_waits.times)
            if not costs:       # free messages: no WAIT ever waits
                assert all(end == start for a, (start, end) in with_waits.times.items()
                           if a.is_wait)


# --- an early WAIT: the simulator charges it, the validator proves or refutes it -----------

def _hand_written(rank0, rank1):
    return Schedule("mine", 2, 2, {0: rank0.split(), 1: rank1.split()})


def test_an_early_wait_holds_its_rank_until_the_message_arrives():
    s = _hand_written("0F0 0SEND_F0 0WAIT_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0WAIT_F1",
                      "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1 1WAIT_B0 1WAIT_B1")
    s.validate()
    result = simulate(s, send_cost=0.5)
    # the send leaves at 1 and arrives at 1.5: rank 0 waits for it instead of computing
    assert result.times[Action.parse("0WAIT_F0")] == (1, 1.5)
    assert result.times[Action.parse("0F1")] == (1.5, 2.5)
    assert result.idle[0] > simulate(_without_waits(s), send_cost=0.5).idle[0]


def test_rejects_a_wait_that_deadlocks_with_the_receivers_order():
    # rank 1 takes micro-batch 1 first; rank 0 waits for micro-batch 0's send to complete
    # before it sends micro-batch 1: its receive is posted only after 1F1, which waits for it
    rank0 = "0F0 0SEND_F0 0WAIT_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0WAIT_F1"
    rank1 = "1RECV_F1 1F1 1RECV_F0 1F0 1B0 1SEND_B0 1B1 1SEND_B1 1WAIT_B0 1WAIT_B1"
    with pytest.raises(ScheduleError) as info:
        validate_schedule(_hand_written(rank0, rank1))
    message = str(info.value)
    assert "rank 0 is stuck at 0WAIT_F0 (position 2) waiting for 1RECV_F0 on rank 1" in message
    assert "rank 1 is stuck at 1F1 (position 1) waiting for 0SEND_F1 on rank 0" in message
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(_hand_written(rank0, rank1))
    # the same orders with the WAIT at the end are fine: SENDs never block
    late = rank0.replace("0WAIT_F0 ", "") + " 0WAIT_F0"
    validate_schedule(_hand_written(late, rank1))


@pytest.mark.parametrize("edit,message", [
    (lambda l: (l[0].remove("0SEND_F1"), l[0].remove("0WAIT_F1"), l[0].insert(0, "0WAIT_F1")),
     r"WAIT without its SEND: 0WAIT_F1 \(rank 0, position 0\) completes 0SEND_F1, which "
     r"rank 0 never posts"),
    (lambda l: (l[1].remove("1WAIT_B0"), l[1].insert(0, "1WAIT_B0")),
     r"WAIT too early: 1WAIT_B0 \(rank 1, position 0\) comes before 1SEND_B0"),
    (lambda l: l[0].append("0WAIT_F1"), r"duplicate action: 0WAIT_F1"),
    (lambda l: l[1].append("1WAIT_F0"), r"no such peer: 1WAIT_F0 .* talks to stage 2"),
])
def test_rejects_misplaced_waits(edit, message):
    s = generate_schedule("1f1b", 2, 2)
    lists = {r: [str(a) for a in acts] for r, acts in s.actions.items()}
    edit(lists)
    with pytest.raises(ScheduleError, match=message):
        validate_schedule(Schedule("1f1b", 2, 2, lists))


def test_rejects_a_gradient_wait_in_a_forward_only_schedule():
    s = generate_schedule("forward", 2, 2)
    assert [str(a) for a in s.actions[0]][-2:] == ["0WAIT_F0", "0WAIT_F1"]
    lists = {r: [str(a) for a in acts] for r, acts in s.actions.items()}
    lists[1].append("1WAIT_B0")
    with pytest.raises(ScheduleError, match="backward in a forward-only schedule: 1WAIT_B0"):
        validate_schedule(Schedule("forward", 2, 2, lists))
