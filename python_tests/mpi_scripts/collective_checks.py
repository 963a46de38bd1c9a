"""Every collective against closed forms, with different data on every rank.

Shared by the MPI scripts (run under ``python -m minitorch_dist.run``) and the TCP
multiprocessing tests. Rank r holds ``base + r + 1`` where ``base`` is a small integer
pattern, so sums are exact even in float16 and the expected values have closed forms.
"""
import traceback

import numpy as np

DTYPES = (np.float32, np.float64, np.float16, np.int64)


def rank_data(rank, shape, dtype):
    base = np.arange(int(np.prod(shape))).reshape(shape) % 5
    return (base + rank + 1).astype(dtype)


def expected_reduction(op, shape, dtype, size):
    base = (np.arange(int(np.prod(shape))).reshape(shape) % 5).astype(np.float64)
    closed = {"sum": size * base + size * (size + 1) / 2, "mean": base + (size + 1) / 2,
              "max": base + size, "min": base + 1,
              "prod": np.prod([base + r + 1 for r in range(size)], axis=0)}[op]
    if op == "mean" and np.dtype(dtype).kind == "i":
        closed = np.floor(closed)
    return closed.astype(dtype)


def same_on_every_rank(comm, array):
    rows = comm.allgather(np.ascontiguousarray(array))
    assert all(np.array_equal(rows[0], row) for row in rows), "ranks disagree"


def check_allreduce(comm):
    shape = (3, 4)
    for dtype in DTYPES:
        ops = ("sum", "mean", "max", "min") + (("prod",) if dtype == np.float64 else ())
        for op in ops:
            want = expected_reduction(op, shape, dtype, comm.size)
            got = comm.allreduce(rank_data(comm.rank, shape, dtype), op=op)
            assert got.dtype == dtype and np.array_equal(got, want), (op, dtype, got, want)
            in_place = rank_data(comm.rank, shape, dtype)
            assert comm.allreduce(in_place, op=op, out=in_place) is in_place
            assert np.array_equal(in_place, want), (op, dtype, "in place")
            out = np.empty(shape, dtype)
            source = rank_data(comm.rank, shape, dtype)
            assert comm.allreduce(source, op=op, out=out) is out
            assert np.array_equal(out, want) and np.array_equal(
                source, rank_data(comm.rank, shape, dtype)), (op, dtype, "out=")
    # float16 with values that round: close to the float64 sum, identical on every rank.
    half = (np.linspace(0.1, 0.9, 7) * (comm.rank + 1)).astype(np.float16)
    got = comm.allreduce(half)
    want = np.linspace(0.1, 0.9, 7) * comm.size * (comm.size + 1) / 2
    assert got.dtype == np.float16 and np.allclose(got, want, rtol=4e-3), (got, want)
    same_on_every_rank(comm, got)


def check_nonblocking(comm):
    first = comm.iallreduce(rank_data(comm.rank, (5,), np.float32), op="sum")
    buffer = rank_data(comm.rank, (2, 2), np.float64)
    second = comm.iallreduce(buffer, op="max", out=buffer)
    assert np.array_equal(second.wait(), expected_reduction("max", (2, 2), np.float64, comm.size))
    assert second.wait() is buffer
    assert np.array_equal(first.wait(), expected_reduction("sum", (5,), np.float32, comm.size))


def check_gathers(comm):
    for dtype in (np.float32, np.float16):
        gathered = comm.allgather(rank_data(comm.rank, (2, 3), dtype))
        assert gathered.shape == (comm.size, 2, 3) and gathered.dtype == dtype
        for r in range(comm.size):
            assert np.array_equal(gathered[r], rank_data(r, (2, 3), dtype))
        mine = np.full(comm.rank, comm.rank, dtype)  # rank 0 sends nothing
        data, counts = comm.allgatherv(mine)
        assert list(counts) == list(range(comm.size)), counts
        assert np.array_equal(data, np.repeat(np.arange(comm.size), np.arange(comm.size)))
        assert data.dtype == dtype


def check_broadcast(comm):
    root = comm.size - 1
    for dtype in (np.float32, np.float16, np.int64):
        buffer = rank_data(comm.rank, (3, 2), dtype)
        assert comm.broadcast(buffer, root=root) is buffer
        assert np.array_equal(buffer, rank_data(root, (3, 2), dtype))


def check_reduce_scatter(comm):
    rows = 2 * comm.size
    for dtype, op in ((np.float32, "sum"), (np.float64, "mean"), (np.float16, "sum"),
                      (np.float32, "max")):
        got = comm.reduce_scatter(rank_data(comm.rank, (rows, 3), dtype), op=op)
        want = expected_reduction(op, (rows, 3), dtype, comm.size)
        assert got.shape == (2, 3) and got.dtype == dtype
        assert np.array_equal(got, want[2 * comm.rank:2 * comm.rank + 2]), (op, dtype, got)


def check_alltoall(comm):
    size, rank = comm.size, comm.rank
    for dtype in (np.float32, np.float64, np.float16, np.int64):
        # block j of rank r's input holds 10 * r + j: the result must hold 10 * s + rank in
        # block s, whatever the backend's message order
        blocks = [np.full((2, 3), 10 * rank + j, dtype) for j in range(size)]
        got = comm.alltoall(np.concatenate(blocks))
        assert got.shape == (2 * size, 3) and got.dtype == dtype, (got.shape, got.dtype)
        want = np.concatenate([np.full((2, 3), 10 * s + rank, dtype) for s in range(size)])
        assert np.array_equal(got, want), (dtype, got, want)
        # the exchange is its own inverse
        assert np.array_equal(comm.alltoall(got), np.concatenate(blocks)), dtype
    empty = comm.alltoall(np.zeros((0, 4), np.float32))
    assert empty.shape == (0, 4)


def check_point_to_point(comm):
    size, rank = comm.size, comm.rank
    after, before = (rank + 1) % size, (rank - 1) % size
    # two tagged messages around the ring, received in the opposite order
    sends = [comm.isend(np.full(3, 10.0 * rank + 1), after, tag=1),
             comm.isend(np.full((2, 2), 10.0 * rank + 2, np.float32), after, tag=2)]
    second = comm.recv(np.empty((2, 2), np.float32), before, tag=2)
    first = comm.irecv(np.empty(3), before, tag=1).wait()
    for request in sends:
        request.wait()
    assert np.all(second == 10.0 * before + 2) and np.all(first == 10.0 * before + 1)
    # a receive posted before the matching send; blocking send/recv between ranks 0 and 1
    if size == 1:
        return
    if rank == 1:
        pending = comm.irecv(np.empty(4, np.float16), 0, tag=7)
    comm.barrier()
    if rank == 0:
        comm.send(np.arange(4, dtype=np.float16), 1, tag=7)
        comm.send(np.array([42], np.int64), 1, tag=0)
    elif rank == 1:
        assert np.array_equal(pending.wait(), np.arange(4))
        assert comm.recv(np.empty(1, np.int64), 0)[0] == 42


def check_split(comm):
    evens, odds = list(range(0, comm.size, 2)), list(range(1, comm.size, 2))
    members = evens if comm.rank % 2 == 0 else odds
    sub = comm.split(members)
    assert sub.size == len(members) and sub.rank == members.index(comm.rank)
    total = sub.allreduce(np.array([comm.rank], np.int64))
    assert total[0] == sum(members), (total, members)
    outsiders = comm.split([0])
    assert (outsiders is None) == (comm.rank != 0)


def check_counters(comm):
    comm.reset_stats()
    comm.allreduce(np.zeros(10, np.float32))
    comm.allgatherv(np.zeros(comm.rank + 1, np.float64))
    comm.broadcast(np.zeros(4, np.float32), root=0)
    comm.reduce_scatter(np.zeros((comm.size, 2), np.float16))
    comm.alltoall(np.zeros((comm.size, 3), np.float32))      # 12 bytes to each other rank
    stats = comm.comm_stats()
    want = 40 + 8 * (comm.rank + 1) + (16 if comm.rank == 0 else 0) + 4 * (comm.size - 1) \
        + 12 * (comm.size - 1)
    assert stats["calls"] == 5 and stats["bytes_sent"] == want, (stats, want)
    assert stats["by_op"]["alltoall"] == {"calls": 1, "bytes_sent": 12 * (comm.size - 1)}
    assert stats["by_op"]["allgatherv"] == {"calls": 1, "bytes_sent": 8 * (comm.rank + 1)}


ALL_CHECKS = (check_allreduce, check_nonblocking, check_gathers, check_broadcast,
              check_reduce_scatter, check_alltoall, check_point_to_point, check_split,
              check_counters)


def check_all(comm):
    for check in ALL_CHECKS:
        check(comm)
        comm.barrier()
    return [check.__name__ for check in ALL_CHECKS]


def tcp_child(unique_id, rank, size, results):
    """Body of one ``multiprocessing`` rank: join with the id, run every check, report."""
    from minitorch_dist import communication as C
    try:
        C.init(unique_id=unique_id, rank=rank, world_size=size)
        assert C.get_rank() == rank and C.get_group_size() == size
        assert C.GlobalComm.BACKEND == "tcp"
        check_all(C.get_communicator())
        results.put((rank, "OK"))
    except BaseException:
        results.put((rank, traceback.format_exc()))
    finally:
        C.release()
