"""LocalCommunicator (ranks as threads), run_ranks, and the process-group API in one process.

Every rank holds different data; results are checked against NumPy references computed
from all ranks' inputs (reductions in rank order, so float16 matches bit for bit).
"""
import os
import sys
import threading
import time

import numpy as np
import pytest

from minitorch_dist import communication as C
from minitorch_dist.communication import LocalCommunicator, PeerFailedError, run_ranks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_scripts"))
from collective_checks import check_all  # noqa: E402

OPS = ("sum", "mean", "max", "min", "prod")
FLOATS = (np.float32, np.float64, np.float16)


def rank_input(rank, shape=(3, 5), dtype=np.float64):
    return np.random.default_rng(100 + rank).uniform(0.5, 2.0, shape).astype(dtype)


def reference(op, arrays):
    """Rank-order reduction in the arrays' dtype, as the communicators do it."""
    result = arrays[0].copy()
    ufunc = {"sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum,
             "prod": np.multiply}[op]
    for other in arrays[1:]:
        ufunc(result, other, out=result)
    if op == "mean":
        result /= len(arrays)
    return result


# ---- the shared closed-form checks -----------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_collective_against_closed_forms(size):
    assert run_ranks(size, check_all, timeout=20) == [
        [check.__name__ for check in __import__("collective_checks").ALL_CHECKS]] * size


# ---- allreduce --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
def test_allreduce_matches_numpy(op, dtype):
    inputs = [rank_input(r, dtype=dtype) for r in range(3)]
    results = run_ranks(3, lambda comm: comm.allreduce(inputs[comm.rank].copy(), op=op))
    want = reference(op, inputs)
    for got in results:
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    if dtype != np.float16:
        closed = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
                  "prod": np.prod}[op](np.stack(inputs).astype(np.float64), axis=0)
        np.testing.assert_allclose(results[0], closed, rtol=1e-6)


def test_allreduce_in_place_and_out():
    def body(comm):
        own = rank_input(comm.rank)
        in_place = own.copy()
        assert comm.allreduce(in_place, out=in_place) is in_place
        out = np.empty_like(own)
        assert comm.allreduce(own, op="max", out=out) is out
        np.testing.assert_array_equal(own, rank_input(comm.rank))  # input untouched
        return in_place, out
    results = run_ranks(2, body)
    inputs = [rank_input(r) for r in range(2)]
    for in_place, out in results:
        np.testing.assert_array_equal(in_place, inputs[0] + inputs[1])
        np.testing.assert_array_equal(out, np.maximum(*inputs))


def test_results_are_copies_not_aliases():
    def body(comm):
        mine = np.full(4, float(comm.rank))
        return mine, comm.allreduce(mine), comm.allgather(mine), comm.allgatherv(mine)[0]
    results = run_ranks(3, body)
    arrays = [a for row in results for a in row]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


def test_integer_allreduce_and_floor_mean():
    results = run_ranks(2, lambda comm: comm.allreduce(np.array([1, 4], np.int64) + comm.rank,
                                                       op="mean"))
    np.testing.assert_array_equal(results[0], [1, 4])  # (1+2)//2, (4+5)//2
    assert results[0].dtype == np.int64


def test_iallreduce_waited_in_reverse_order():
    def body(comm):
        a = comm.iallreduce(np.full(3, comm.rank + 1.0))
        b = comm.iallreduce(np.full(2, comm.rank + 1.0), op="prod")
        return b.wait(), a.wait(), a.wait()
    for prod, total, again in run_ranks(3, body):
        np.testing.assert_array_equal(prod, [6.0, 6.0])
        np.testing.assert_array_equal(total, [6.0, 6.0, 6.0])
        assert again is total


# ---- gathers, broadcast, reduce_scatter -------------------------------------------------------
def test_allgather_and_allgatherv():
    def body(comm):
        stacked = comm.allgather(rank_input(comm.rank, (2, 2), np.float32))
        data, counts = comm.allgatherv(np.arange(comm.rank * 2, dtype=np.int32))
        return stacked, data, counts
    for stacked, data, counts in run_ranks(3, body):
        np.testing.assert_array_equal(stacked, np.stack([rank_input(r, (2, 2), np.float32)
                                                         for r in range(3)]))
        assert counts == [0, 2, 4]
        np.testing.assert_array_equal(data, [0, 1, 0, 1, 2, 3])
        assert data.dtype == np.int32


@pytest.mark.parametrize("root", [0, 1, 2])
def test_broadcast_from_each_root(root):
    def body(comm):
        buffer = rank_input(comm.rank, dtype=np.float16)
        assert comm.broadcast(buffer, root=root) is buffer
        return buffer
    for got in run_ranks(3, body):
        np.testing.assert_array_equal(got, rank_input(root, dtype=np.float16))


@pytest.mark.parametrize("op", ["sum", "mean", "min"])
def test_reduce_scatter(op):
    inputs = [rank_input(r, (6, 2)) for r in range(3)]
    results = run_ranks(3, lambda comm: comm.reduce_scatter(inputs[comm.rank], op=op))
    want = reference(op, inputs)
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got, want[2 * rank:2 * rank + 2])


@pytest.mark.parametrize("size", [1, 2, 3])
def test_alltoall_matches_numpy(size):
    inputs = [rank_input(r, (2 * size, 3), np.float32) for r in range(size)]
    results = run_ranks(size, lambda comm: comm.alltoall(inputs[comm.rank]))
    for rank, got in enumerate(results):
        want = np.concatenate([inputs[s][2 * rank:2 * rank + 2] for s in range(size)])
        np.testing.assert_array_equal(got, want)
        assert not any(np.shares_memory(got, x) for x in inputs)


def test_alltoall_rejects_mismatched_shapes_across_ranks(monkeypatch):
    with pytest.raises(ValueError, match=r"collective mismatch.*alltoall #1 \(float64, shape "
                                         r"\(2, 1\)\) but rank 1 calls alltoall #1"):
        run_ranks(2, lambda comm: comm.alltoall(np.zeros((2 + 2 * comm.rank, 1))), timeout=5)
    monkeypatch.setenv("MINITORCH_DIST_DEBUG", "off")     # the backend's own check remains
    with pytest.raises(ValueError, match="alltoall needs the same shape"):
        run_ranks(2, lambda comm: comm.alltoall(np.zeros((2 + 2 * comm.rank, 1))), timeout=5)


# ---- point to point -----------------------------------------------------------------------------
def test_send_recv_tags_in_both_orders():
    def body(comm):
        if comm.rank == 0:
            comm.send(np.array([1.0]), 1, tag=1)
            comm.send(np.array([2.0]), 1, tag=2)
            first = comm.recv(np.empty(1), 1, tag=4)
            second = comm.recv(np.empty(1), 1, tag=3)
            return first[0], second[0]
        second = comm.recv(np.empty(1), 0, tag=2)   # later tag first
        first = comm.irecv(np.empty(1), 0, tag=1).wait()
        comm.isend(np.array([3.0]), 0, tag=3).wait()
        comm.isend(np.array([4.0]), 0, tag=4).wait()
        return first[0], second[0]
    assert run_ranks(2, body) == [(4.0, 3.0), (1.0, 2.0)]


def test_recv_into_wrong_buffer_names_shapes():
    def body(comm):
        if comm.rank == 0:
            comm.send(np.zeros((2, 3)), 1)
        else:
            comm.recv(np.empty(5), 0)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(5,\)"):
        run_ranks(2, body, timeout=5)


# ---- groups -------------------------------------------------------------------------------------
def test_split_into_groups_and_nested():
    def body(comm):
        halves = [[0, 1], [2, 3]]
        mine = halves[comm.rank // 2]
        sub = comm.split(mine, name="half")
        assert comm.split(halves[1 - comm.rank // 2]) is None
        total = sub.allreduce(np.array([comm.rank + 1.0]))
        again = comm.split(mine, name="half")  # a second, independent group
        pair = again.allgather(np.array([comm.rank]))
        solo = sub.split([sub.rank])
        return sub.rank, sub.size, total[0], pair.ravel().tolist(), solo.size
    results = run_ranks(4, body)
    assert results == [(0, 2, 3.0, [0, 1], 1), (1, 2, 3.0, [0, 1], 1),
                       (0, 2, 7.0, [2, 3], 1), (1, 2, 7.0, [2, 3], 1)]


def test_split_rejects_bad_ranks():
    comm = LocalCommunicator.create(2)[0]
    for bad in ([], [0, 0], [0, 2], [0.5]):
        with pytest.raises(ValueError, match="group ranks"):
            comm.split(bad)


# ---- counters -----------------------------------------------------------------------------------
def test_counters_follow_the_documented_rules():
    def body(comm):
        comm.reset_stats()
        x = np.zeros(6, np.float32)                          # 24 bytes
        comm.allreduce(x)
        comm.iallreduce(x).wait()
        comm.allgather(x)
        comm.allgatherv(np.zeros(comm.rank + 1, np.float16))  # 2 * (rank + 1)
        comm.broadcast(x, root=1)
        comm.reduce_scatter(np.zeros((3, 2), np.float64))     # 48 // 3 * 2 = 32
        comm.barrier()
        if comm.rank == 0:
            comm.send(x, 1)
        elif comm.rank == 1:
            comm.recv(x, 0)
        return comm.comm_stats()
    stats = run_ranks(3, body)
    by_op = stats[1]["by_op"]
    assert by_op["allreduce"] == {"calls": 2, "bytes_sent": 48}
    assert by_op["allgatherv"] == {"calls": 1, "bytes_sent": 4}
    assert by_op["broadcast"] == {"calls": 1, "bytes_sent": 24}
    assert by_op["reduce_scatter"] == {"calls": 1, "bytes_sent": 32}
    assert by_op["barrier"] == {"calls": 1, "bytes_sent": 0}
    assert by_op["recv"] == {"calls": 1, "bytes_sent": 0}
    assert stats[1]["calls"] == 8 and stats[1]["bytes_sent"] == 48 + 24 + 4 + 24 + 32
    assert stats[0]["by_op"]["broadcast"]["bytes_sent"] == 0
    assert stats[0]["by_op"]["send"] == {"calls": 1, "bytes_sent": 24}
    assert stats[2]["bytes_sent"] == 48 + 24 + 6 + 32


def test_reset_stats_zeroes_counts():
    comm = LocalCommunicator.create(1)[0]
    comm.allreduce(np.zeros(3))
    comm.reset_stats()
    assert comm.comm_stats() == {"calls": 0, "bytes_sent": 0, "by_op": {}}


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, pattern", [
    (lambda c: c.allreduce(np.zeros(2), op="avg"), ValueError, "unknown reduction 'avg'"),
    (lambda c: c.reduce_scatter(np.zeros((3, 2))), ValueError, r"axis 0 \(3\) divisible.*2"),
    (lambda c: c.alltoall(np.zeros((3, 2))), ValueError, r"alltoall.*axis 0 \(3\) divisible.*2"),
    (lambda c: c.alltoall(np.float64(1.0)), ValueError, r"alltoall.*axis 0 \(none, a scalar\)"),
    (lambda c: c.broadcast(np.zeros(2), root=2), ValueError, r"root rank.*\[0, 2\).*2"),
    (lambda c: c.send(np.zeros(2), dest=-1), ValueError, "dest rank"),
    (lambda c: c.recv(np.zeros(2), source=5), ValueError, "source rank"),
    (lambda c: c.allgatherv(np.zeros((2, 2))), ValueError, r"1-D.*\(2, 2\)"),
    (lambda c: c.allreduce(np.zeros(2), out=np.zeros(3)), ValueError, r"out.*\(2,\).*\(3,\)"),
])
def test_bad_input_raises_clear_errors(call, error, pattern):
    comm = LocalCommunicator.create(2)[0]
    with pytest.raises(error, match=pattern):
        call(comm)


def test_create_rejects_bad_world_size():
    with pytest.raises(ValueError, match="world_size"):
        LocalCommunicator.create(0)


# ---- failure handling ---------------------------------------------------------------------
def test_a_raising_rank_fails_run_ranks_promptly():
    def body(comm):
        if comm.rank == 2:
            raise KeyError("rank 2 broke")
        comm.barrier()
        return "unreachable"
    start = time.monotonic()
    with pytest.raises(KeyError, match="rank 2 broke"):
        run_ranks(4, body, timeout=30)
    assert time.monotonic() - start < 5


def test_mismatched_collectives_time_out():
    def body(comm):
        if comm.rank == 0:
            comm.allreduce(np.zeros(1))
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="timed out"):
        run_ranks(2, body, timeout=1.0)
    assert time.monotonic() - start < 5


def test_run_ranks_own_timeout_says_timed_out():
    """Regression: when run_ranks' deadline passed before the waiting rank's own one, its
    message lacked "timed out" and test_mismatched_collectives_time_out failed now and then."""
    def body(comm):
        if comm.rank == 0:
            time.sleep(1.0)   # busy, not waiting in a collective: only run_ranks can time out
    with pytest.raises(TimeoutError, match=r"run_ranks: timed out.*within 0.3 s"):
        run_ranks(2, body, timeout=0.3)


def test_aborted_peer_raises_peer_failed():
    comms = LocalCommunicator.create(2, timeout=10)
    errors = []

    def waiter():
        try:
            comms[1].barrier()
        except PeerFailedError as exc:
            errors.append(exc)
    thread = threading.Thread(target=waiter)
    thread.start()
    comms[0].abort("rank 0 gave up")
    thread.join(5)
    assert errors and "rank 0 gave up" in str(errors[0])


def test_run_ranks_returns_results_in_rank_order():
    assert run_ranks(4, lambda comm: (comm.rank, comm.size)) == [(r, 4) for r in range(4)]


# ---- the process-group API in a single process --------------------------------------------------
@pytest.fixture
def released():
    C.release()
    yield
    C.release()


def test_queries_before_init_raise(released):
    with pytest.raises(RuntimeError, match=r"call init\(\) first"):
        C.get_rank()


def test_init_single_process_is_a_world_of_one(released, monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    C.init()
    first = C.get_communicator()
    C.init()  # idempotent
    assert C.get_communicator() is first
    assert (C.get_rank(), C.get_group_size(), C.get_local_rank(), C.get_local_rank_size()) \
        == (0, 1, 0, 1)
    assert C.GlobalComm.INITED and C.GlobalComm.BACKEND == "local"
    assert C.get_rank(C.GlobalComm.WORLD_COMM_GROUP) == 0
    np.testing.assert_array_equal(first.allreduce(np.array([2.0]), op="mean"), [2.0])
    C.create_group("solo", [0])
    assert C.get_group_size("solo") == 1 and C.get_group_rank_from_world_rank(0, "solo") == 0
    with pytest.raises(ValueError, match="already exists"):
        C.create_group("solo", [0])
    C.destroy_group("solo")
    with pytest.raises(ValueError, match="unknown group 'solo'"):
        C.get_rank("solo")
    with pytest.raises(ValueError, match="world group cannot be destroyed"):
        C.destroy_group(C.GlobalComm.WORLD_COMM_GROUP)
    C.release()
    assert not C.GlobalComm.INITED



def test_a_second_init_that_names_another_world_is_refused(released, monkeypatch):
    """Regression: a process forked after its parent's ``init()`` called
    ``init(unique_id=..., rank=r, world_size=n)`` and silently stayed in the parent's world
    of one (get_group_size() == 1). Naming another world now raises; naming the same one
    (or nothing) keeps it, as before."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    C.init()
    first = C.get_communicator()
    for kwargs in ({"unique_id": C.UniqueId(), "rank": 0, "world_size": 3},
                   {"unique_id": C.UniqueId(), "rank": 0, "world_size": 1}):
        with pytest.raises(RuntimeError, match=r"already in a world \(rank 0 of 1.*release\(\)"):
            C.init(**kwargs)
    with pytest.raises(RuntimeError, match=r"rank=2 \(it is 0\), world_size=3 \(it is 1\)"):
        C.init_from_unique_id(C.UniqueId(), 2, 3)
    C.init()
    assert C.get_communicator() is first and C.get_group_size() == 1

@pytest.mark.parametrize("name", ["mccl", "gloo", "MPI"])
def test_init_accepts_host_backend_names(released, monkeypatch, name):
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE", raising=False)
    monkeypatch.delenv("PMI_SIZE", raising=False)
    C.init(name)
    assert C.get_group_size() == 1


def test_init_rejects_ascend_and_unknown_backends(released):
    with pytest.raises(ValueError, match="Ascend"):
        C.init("hccl")
    with pytest.raises(ValueError, match="unknown backend 'ucx'"):
        C.init("ucx")
    assert not C.GlobalComm.INITED


def test_init_with_unique_id_needs_rank_and_size(released):
    with pytest.raises(ValueError, match="rank and world_size"):
        C.init(unique_id=C.UniqueId())


def test_launcher_environment_is_detected(monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    if "mpi4py.MPI" not in sys.modules:
        assert C.launched_world_size() is None
    monkeypatch.setenv("PMI_SIZE", "8")
    assert C.launched_world_size() == 8


def test_non_arrays_are_a_type_error_naming_the_call():
    """Regression: a list passed to a collective raised AttributeError ('nbytes')."""
    from minitorch_dist.communication import LocalCommunicator
    (comm,) = LocalCommunicator.create(1)
    for call in (lambda: comm.allreduce([1.0, 2.0]), lambda: comm.broadcast([1.0]),
                 lambda: comm.allgatherv([1.0]), lambda: comm.send([1.0], 0)):
        with pytest.raises(TypeError, match="expects a NumPy or CuPy array, got list"):
            call()


# ---- each thread rank draws from its own random stream, as a process does -----------------
def _draw_weights(barrier):
    from minitorch_dist import nn
    barrier.wait(5)                             # both ranks draw at the same moment
    layers = [nn.Dense(64, 64) for _ in range(20)]
    return np.concatenate([layer.weight.asnumpy().ravel() for layer in layers])


def test_seeded_thread_ranks_draw_what_seeded_processes_would_whatever_the_interleaving():
    """Drawing from one shared stream, two ranks building the same network at once got
    weights that depended on how the threads interleaved (flaky 'replicas differ' tests)."""
    import minitorch_dist as ms
    ms.set_seed(7)
    want = _draw_weights(threading.Barrier(1))
    ms.set_seed(7)
    barrier = threading.Barrier(2)
    first, second = run_ranks(2, lambda comm: _draw_weights(barrier))
    assert np.array_equal(first, want) and np.array_equal(second, want)
    # the parent's stream is untouched by the ranks' draws
    assert np.array_equal(_draw_weights(threading.Barrier(1)), want)


def test_set_seed_in_a_thread_rank_seeds_that_rank_alone_and_unseeded_ranks_differ(
        monkeypatch):
    import minitorch_dist as ms
    from minitorch_dist import random as framework_random
    monkeypatch.setattr(framework_random, "_process", dict(framework_random._process))
    ms.set_seed(7)
    barrier = threading.Barrier(2)

    def body(comm):
        if comm.rank == 0:
            ms.set_seed(11)
        return _draw_weights(barrier), framework_random.get_seed()

    (w0, seed0), (w1, seed1) = run_ranks(2, body)
    assert (seed0, seed1, framework_random.get_seed()) == (11, 7, 7)
    ms.set_seed(11)
    assert np.array_equal(w0, _draw_weights(threading.Barrier(1)))
    ms.set_seed(7)
    assert np.array_equal(w1, _draw_weights(threading.Barrier(1)))
    framework_random._process.update({"seed": None, "rng": np.random.default_rng()})
    barrier = threading.Barrier(2)
    a, b = run_ranks(2, lambda comm: _draw_weights(barrier))
    assert not np.array_equal(a, b)            # never seeded: fresh entropy, as processes
