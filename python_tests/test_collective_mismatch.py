"""Collectives check their arguments. Ranks that disagree about a collective (shape,
dtype, reduction, root, kind, a skipped call) or hold different models fail on every rank
with both ranks' calls named, instead of wrong data, MPI_ERR_TRUNCATE or a hang."""
import os

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import LocalCommunicator, run_ranks
from minitorch_dist.communication.desync import (CollectiveMismatchError, debug_level, describe,
                                                 signature)
from mpi_jobs import SCRIPTS, launch, needs_mpi

MISMATCH = os.path.join(SCRIPTS, "fail_mismatch.py")


# ---- in process (threads) --------------------------------------------------------------------
@pytest.mark.parametrize("call, first, second", [
    (lambda c: c.allreduce(np.ones(4 + c.rank)), "allreduce #1 (float64, shape (4,), op sum)",
     "allreduce #1 (float64, shape (5,), op sum)"),
    (lambda c: c.allreduce(np.ones(2, [np.float32, np.float16][c.rank])),
     "(float32, shape (2,)", "(float16, shape (2,)"),
    (lambda c: c.allreduce(np.ones(2), op=["sum", "mean"][c.rank]), "op sum", "op mean"),
    (lambda c: c.broadcast(np.ones(3), root=c.rank), "root 0", "root 1"),
    (lambda c: c.broadcast(np.ones((2, 2 + c.rank))), "shape (2, 2)", "shape (2, 3)"),
    (lambda c: c.allgather(np.ones(3, [np.int64, np.int32][c.rank])), "int64", "int32"),
    (lambda c: c.reduce_scatter(np.ones(2 + 2 * c.rank)), "shape (2,)", "shape (4,)"),
    (lambda c: c.broadcast(np.ones(3)) if c.rank == 0 else c.allreduce(np.ones(3)),
     "rank 0 calls broadcast #1", "rank 1 calls allreduce #1"),
    (lambda c: c.barrier() if c.rank == 0 else c.allgather(np.ones(1)),
     "rank 0 calls barrier #1", "rank 1 calls allgather #1"),
])
def test_every_mismatch_kind_raises_on_every_rank(call, first, second):
    def body(comm):
        try:
            call(comm)
        except CollectiveMismatchError as exc:
            return str(exc)
        return "no error"
    messages = run_ranks(2, body, timeout=20)
    for message in messages:
        assert "collective mismatch" in message and first in message and second in message


def test_allgatherv_may_differ_in_length_but_not_in_dtype():
    def body(comm):
        data, counts = comm.allgatherv(np.arange(1 + comm.rank, dtype=np.float64))
        return counts
    assert run_ranks(2, body, timeout=20) == [[1, 2], [1, 2]]

    def bad(comm):
        comm.allgatherv(np.ones(2, [np.float64, np.float32][comm.rank]))
    with pytest.raises(CollectiveMismatchError, match="allgatherv #1"):
        run_ranks(2, bad, timeout=20)


def test_detail_mode_catches_a_skipped_call(monkeypatch):
    def body(comm):
        comm.allreduce(np.ones(3))
        if comm.rank == 0:
            comm.allreduce(np.ones(3))       # rank 1 skips it
        comm.broadcast(np.ones(2))
    monkeypatch.setenv("MINITORCH_DIST_DEBUG", "detail")
    with pytest.raises(CollectiveMismatchError,
                       match=r"rank 0 calls allreduce #2 .* but rank 1 calls broadcast #2"):
        run_ranks(2, body, timeout=20)


def test_first_mode_exchanges_once_per_kind_then_nothing(monkeypatch):
    """The per-step cost of the check in the default mode: no exchange after the first call
    of each kind."""
    counts = {}

    def body(comm):
        original = comm._gather_signatures
        calls = []

        def counted(vector):
            calls.append(int(vector[1]))
            return original(vector)
        comm._gather_signatures = counted
        for _ in range(20):
            comm.allreduce(np.ones(3))
            comm.broadcast(np.ones(3))
        counts[comm.rank] = len(calls)
        return comm.comm_stats()["calls"]
    assert run_ranks(2, body, timeout=20) == [40, 40]      # signatures are not counted
    assert counts == {0: 2, 1: 2}
    monkeypatch.setenv("MINITORCH_DIST_DEBUG", "detail")
    run_ranks(2, body, timeout=20)
    assert counts == {0: 40, 1: 40}
    monkeypatch.setenv("MINITORCH_DIST_DEBUG", "off")
    run_ranks(2, body, timeout=20)
    assert counts == {0: 0, 1: 0}


def test_debug_level_rejects_unknown_values():
    assert debug_level({"MINITORCH_DIST_DEBUG": "off"}) == "off"
    with pytest.raises(ValueError, match="MINITORCH_DIST_DEBUG='loud'"):
        debug_level({"MINITORCH_DIST_DEBUG": "loud"})


def test_signature_describes_itself():
    assert describe(signature("allreduce", 7, np.zeros((2, 3), np.float16), "max")) == \
        "allreduce #7 (float16, shape (2, 3), op max)"
    assert describe(signature("barrier", 2)) == "barrier #2"
    assert "not a collective signature" in describe(np.arange(14))


def test_grad_reducer_names_the_first_parameter_that_differs():
    def body(comm):
        net = nn.SequentialCell([nn.Dense(3, 4), nn.ReLU(), nn.Dense(4, 2 + comm.rank)])
        reducer = nn.DistributedGradReducer(net.trainable_params(), communicator=comm)
        grads = tuple(ms.Tensor(np.zeros(p.shape, np.float32)) for p in net.trainable_params())
        return reducer(grads)
    with pytest.raises(CollectiveMismatchError,
                       match=r"entry 2: rank 0 has '2.weight \(2, 4\) float32', rank 1 has "
                             r"'2.weight \(3, 4\) float32'"):
        run_ranks(2, body, timeout=20)

    def fewer(comm):
        layers = [nn.Dense(3, 3)] + ([nn.Dense(3, 3)] if comm.rank == 0 else [])
        params = nn.SequentialCell(layers).trainable_params()
        nn.DistributedGradReducer(params, communicator=comm).broadcast_parameters()
    with pytest.raises(CollectiveMismatchError, match="rank 0 has 4 entries, rank 1 has 2"):
        run_ranks(2, fewer, timeout=20)


def test_one_rank_world_never_exchanges():
    comm = LocalCommunicator.create(1)[0]
    comm._gather_signatures = lambda vector: pytest.fail("exchanged in a world of one")
    comm.allreduce(np.ones(2))
    comm.check_same_parameters("x", ["a"])


# ---- real MPI ranks ------------------------------------------------------------------------------
@needs_mpi
@pytest.mark.parametrize("kind, expected", [
    ("allreduce_shape", ["shape (4,)", "shape (5,)"]),
    ("allreduce_dtype", ["float32", "float64"]),
    ("allreduce_op", ["op sum", "op max"]),
    ("broadcast_shape", ["shape (2, 3)", "shape (2, 4)"]),
    ("broadcast_dtype", ["int64", "int32"]),
    ("broadcast_root", ["root 0", "root 1"]),
    ("allgather_shape", ["allgather #1 (float64, shape (2,))", "shape (3,)"]),
    ("reduce_scatter_shape", ["shape (2,)", "shape (4,)"]),
    ("alltoall_dtype", ["float32", "float16"]),
    ("different_collectives", ["rank 0 calls broadcast #1", "rank 1 calls allreduce #1"]),
    ("grad_reducer", ["'0.weight (8, 4) float32'", "'0.weight (9, 4) float32'"]),
    ("model", ["'0.weight (8, 4) float32'", "'0.weight (6, 4) float32'"]),
])
def test_mismatches_on_two_mpi_ranks(kind, expected):
    done, seconds = launch(2, MISMATCH, kind, launcher_timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CollectiveMismatchError" in done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr
    assert "no error" not in done.stdout and "MPI_ERR" not in done.stderr
    assert seconds < 45


@needs_mpi
def test_a_skipped_call_under_detail_on_mpi_ranks():
    done, _ = launch(2, MISMATCH, "skipped_call", launcher_timeout=60,
                     env={"MINITORCH_DIST_DEBUG": "detail"})
    assert done.returncode == 1
    assert "rank 0 calls broadcast #2" in done.stderr and "rank 1 calls allreduce #2" in \
        done.stderr, done.stderr
