"""The differentiable collectives (``parallel/comm/collectives.py``): forward against NumPy, backward
against closed forms, central differences of the total loss and the adjoint identity, on
ranks as threads (``run_ranks``) and on real MPI ranks.

The loss differentiated is always the total over ranks, ``L = sum_r sum(w_r * op(x_r))``,
with different inputs ``x_r`` and weights ``w_r`` on every rank.
"""
import os
import sys

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import communication as C
from minitorch_dist import nn
from minitorch_dist.backend.device import Device
from minitorch_dist.communication import Communicator, LocalCommunicator, run_ranks
from minitorch_dist.parallel.comm import collectives as comm_ops
from minitorch_dist.parallel.comm.collectives import (AllGather, AllReduce, AllToAll, Broadcast,
                                              ReduceScatter)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_scripts"))
from comm_op_checks import (CASES, check_case, rank_input, rank_weight,  # noqa: E402
                            run_op, settings_for)

from mpi_jobs import SCRIPTS, launch, needs_mpi  # noqa: E402

LINEAR_CASES = [(name, s) for name, s in CASES if s.get("op") not in ("max", "min")]


def case_id(case):
    name, settings = case
    return name + "-" + "-".join(f"{k}{v}" for k, v in settings.items())


# ---- forward and backward against closed forms --------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_gradient_match_closed_forms(case, size):
    name, settings = case

    def body(comm):
        check_case(comm, name, settings, np.float64, comm, functional=False)
        check_case(comm, name, settings, np.float32, comm, functional=True)
    run_ranks(size, body, timeout=30)


def test_inputs_that_are_strided_views():
    """A transposed view goes to the communicator through a contiguous copy, and the
    gradient reaches the tensor it was a view of."""
    def body(comm):
        base = ms.Tensor(rank_input(comm.rank, (8, 4)), requires_grad=True)
        view = ms.ops.transpose(base, (1, 0))                  # (4, 8), not contiguous
        gathered = comm_ops.all_gather(view, axis=1, group=comm)
        swapped = comm_ops.all_to_all(view, split_axis=1, concat_axis=0, group=comm)
        (gathered.sum() + (swapped * 2.0).sum()).backward()
        return gathered.asnumpy(), swapped.asnumpy(), base.grad.asnumpy()
    results = run_ranks(2, body)
    views = [rank_input(r, (8, 4)).T for r in range(2)]
    for rank, (gathered, swapped, grad) in enumerate(results):
        np.testing.assert_array_equal(gathered, np.concatenate(views, axis=1))
        np.testing.assert_array_equal(swapped, np.concatenate(
            [np.split(v, 2, axis=1)[rank] for v in views], axis=0))
        # sum over ranks of d(sum)/dx is the group size; all_to_all is a permutation: 2
        np.testing.assert_array_equal(grad, np.full((8, 4), 2.0 + 2.0))


def test_max_ties_share_the_gradient():
    def body(comm):
        x = ms.Tensor([1.0, 5.0, 3.0 + comm.rank], requires_grad=True)
        y = comm_ops.all_reduce(x, group=comm, op="max")
        (y * ms.Tensor([1.0, 2.0, 3.0])).sum().backward()
        return y.asnumpy(), x.grad.asnumpy()
    results = run_ranks(2, body)
    # elements 0 and 1 tie on both ranks: each gets half of the summed weight (2 ranks)
    np.testing.assert_array_equal(results[0][0], [1.0, 5.0, 4.0])
    np.testing.assert_array_equal(results[0][1], [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(results[1][1], [1.0, 2.0, 6.0])


def test_reduce_scatter_then_all_gather_is_all_reduce():
    """The pair sharding uses for a sum: forward values and gradients both agree."""
    def body(comm):
        x = ms.Tensor(rank_input(comm.rank, (4, 3)), requires_grad=True)
        w = ms.Tensor(rank_weight(comm.rank, (4, 3)))
        split = comm_ops.all_gather(comm_ops.reduce_scatter(x, group=comm), group=comm)
        (split * w).sum().backward()
        g_split, x.grad = x.grad.asnumpy(), None
        whole = comm_ops.all_reduce(x, group=comm)
        (whole * w).sum().backward()
        return split.asnumpy(), whole.asnumpy(), g_split, x.grad.asnumpy()
    for split, whole, g_split, g_whole in run_ranks(4, body):
        np.testing.assert_allclose(split, whole, rtol=1e-12)
        np.testing.assert_allclose(g_split, g_whole, rtol=1e-12)


def test_broadcast_leaves_its_input_alone():
    def body(comm):
        data = np.full(3, float(comm.rank))
        x = ms.Tensor(data)
        y = comm_ops.broadcast(x, root=1, group=comm)
        return x.asnumpy(), y.asnumpy(), np.shares_memory(x.data, y.data)
    for rank, (x, y, shared) in enumerate(run_ranks(3, body)):
        np.testing.assert_array_equal(x, np.full(3, float(rank)))
        np.testing.assert_array_equal(y, np.ones(3))
        assert not shared


# ---- the total loss: central differences and the adjoint identity -------------------------------
def autograd_and_perturbed_losses(comm, name, settings, shape, eps):
    """This rank's autograd gradient, and its loss for every +-eps perturbation of every
    element of every rank's input (made in the same order on all ranks)."""
    xs = [rank_input(r, shape) for r in range(comm.size)]
    x = ms.Tensor(xs[comm.rank], requires_grad=True)
    y = run_op(name, settings, x, comm, functional=True)
    w = rank_weight(comm.rank, y.shape)
    (y * ms.Tensor(w)).sum().backward()
    losses = []
    for owner in range(comm.size):
        for index in range(xs[owner].size):
            for step in (eps, -eps):
                moved = xs[comm.rank].copy()
                if owner == comm.rank:
                    moved.reshape(-1)[index] += step
                # no tape: the input does not require grad (no_grad would switch it off for
                # the other threads too)
                out = run_op(name, settings, ms.Tensor(moved), comm, functional=True)
                losses.append(float((out.asnumpy() * w).sum()))
    return x.grad.asnumpy(), losses


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("case", [
    ("all_reduce", {"op": "sum"}), ("all_reduce", {"op": "mean"}),
    ("all_reduce", {"op": "max"}), ("all_reduce", {"op": "min"}),
    ("all_gather", {"axis": 1}), ("reduce_scatter", {"axis": -1, "op": "mean"}),
    ("all_to_all", {"split_axis": 0, "concat_axis": 1}), ("broadcast", {"root": -1}),
], ids=case_id)
def test_gradient_of_the_total_loss_by_central_differences(case, size):
    name, settings = case
    settings = settings_for(settings, size)
    shape, eps = (4, 4), 1e-6
    results = run_ranks(size, lambda comm: autograd_and_perturbed_losses(
        comm, name, settings, shape, eps), timeout=60)
    total = np.sum([losses for _, losses in results], axis=0).reshape(size, -1, 2)
    numeric = (total[..., 0] - total[..., 1]) / (2 * eps)
    for rank, (grad, _) in enumerate(results):
        np.testing.assert_allclose(grad.reshape(-1), numeric[rank], rtol=1e-6, atol=1e-8,
                                   err_msg=f"rank {rank}")


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("case", LINEAR_CASES, ids=case_id)
def test_backward_is_the_adjoint_of_forward(case, size):
    """sum_r <op(x)_r, y_r> == sum_r <x_r, op_backward(y)_r> for the linear collectives."""
    name, settings = case
    settings = settings_for(settings, size)

    def body(comm):
        x = ms.Tensor(rank_input(comm.rank), requires_grad=True)
        out = run_op(name, settings, x, comm, functional=False)
        y = rank_weight(comm.rank, out.shape) - 1.0     # any cotangent, signs included
        out.backward(ms.Tensor(y))
        return float((out.asnumpy() * y).sum()), float((x.asnumpy() * x.grad.asnumpy()).sum())
    pairs = np.array(run_ranks(size, body))
    forward, backward = pairs.sum(axis=0)
    assert forward == pytest.approx(backward, rel=1e-12, abs=1e-12)


# ---- devices ------------------------------------------------------------------------------------
class _DeviceOnly(Communicator):
    """Stands in for NCCL: moves device arrays only, with a host ``bootstrap`` communicator."""

    backend = "nccl-like"

    def __init__(self, host):
        super().__init__()
        self.bootstrap, self.rank, self.size = host, host.rank, host.size
        self.device_calls = 0

    def _allreduce(self, array, op, out):
        self.device_calls += 1
        return self.bootstrap.allreduce(array, op, out)

    def _allgather(self, array):
        raise AssertionError("not used")

    _allgatherv = _broadcast = _reduce_scatter = _allgather

    def _send(self, array, dest, tag):
        raise AssertionError("not used")

    def _recv(self, out, source, tag):
        raise AssertionError("not used")

    def _barrier(self):
        self.bootstrap.barrier()


@pytest.mark.host_default
def test_host_arrays_take_the_bootstrap_communicator(virtual_gpu):
    def body(comm):
        device_comm = _DeviceOnly(comm)
        host_x = ms.Tensor([1.0, 2.0], requires_grad=True)
        comm_ops.all_reduce(host_x, group=device_comm).sum().backward()
        on_host = device_comm.device_calls
        gpu_x = ms.Tensor([1.0, 2.0], device="GPU", requires_grad=True)
        comm_ops.all_reduce(gpu_x, group=device_comm).sum().backward()
        return on_host, device_comm.device_calls, host_x.grad.asnumpy(), gpu_x.grad.device.name
    for on_host, on_device, host_grad, gpu_grad_device in run_ranks(2, body):
        assert on_host == 0 and on_device == 2                    # forward + backward
        np.testing.assert_array_equal(host_grad, [2.0, 2.0])
        assert gpu_grad_device == "GPU:0"


def test_communicator_for_follows_the_grad_reducer_rule():
    host_comm = LocalCommunicator.create(1)[0]
    nccl_like = _DeviceOnly(host_comm)
    cpu, gpu = ms.get_device("CPU"), Device("GPU", 0, virtual=True)
    assert comm_ops.communicator_for(nccl_like, cpu) is host_comm
    assert comm_ops.communicator_for(nccl_like, gpu) is nccl_like
    assert comm_ops.communicator_for(host_comm, cpu) is host_comm


def test_device_tensors_stay_on_the_device(virtual_gpu):
    a = rank_input(0, (4, 2))

    def body(comm):
        x = ms.Tensor(a, device="GPU", requires_grad=True)
        y = comm_ops.all_gather(comm_ops.reduce_scatter(x, group=comm), group=comm)
        (y * y).sum().backward()
        return y.device.name, x.grad.device.name
    assert run_ranks(2, body) == [("GPU:0", "GPU:0")] * 2
    stats = ms.transfer_stats()
    assert stats["host_to_device"] == 2 * a.nbytes and stats["device_to_host"] == 0, stats


# ---- the placement report and group names -------------------------------------------------------
@pytest.mark.host_default
def test_instances_appear_in_the_placement_report():
    comm = LocalCommunicator.create(1)[0]

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gather = AllGather(axis=1, group=comm)

        def construct(self, x):
            return self.gather(x)

    ms.reset_placement_stats()
    block = Block()
    x = ms.Tensor(np.ones((2, 3)), requires_grad=True)
    block(x).sum().backward()
    comm_ops.all_reduce(x, group=comm)
    comm_ops.all_reduce(x, group=LocalCommunicator.create(1)[0])  # same shared instance
    rows = {row["name"]: row for row in ms.placement_report()}
    assert rows["gather"]["op"] == "AllGather" and rows["gather"]["calls"] == 1
    assert rows["gather"]["device"] == "CPU" and rows["gather"]["backward_ms"] > 0
    shared = [row for row in rows.values() if row["op"] == "AllReduce"]
    assert len(shared) == 1 and shared[0]["calls"] == 2
    assert repr(block.gather) == "AllGather(name=gather, ranks=1)"


@pytest.fixture
def released():
    C.release()
    yield
    C.release()


def test_groups_are_resolved_by_name(released, monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match=r"call init\(\) first"):
        AllReduce()
    C.init()
    x = ms.Tensor([1.0, 2.0], requires_grad=True)
    assert comm_ops.all_reduce(x).asnumpy().tolist() == [1.0, 2.0]   # a world of one
    assert AllGather(group=C.GlobalComm.WORLD_COMM_GROUP).communicator is C.get_communicator()
    C.create_group("solo", [0])
    y = comm_ops.all_to_all(x, group="solo")
    y.sum().backward()
    assert x.grad.asnumpy().tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="unknown group 'nope'"):
        ReduceScatter(group="nope")


# ---- bad input ----------------------------------------------------------------------------------
def _pair():
    """Rank 0 of a group of two, used from one thread: every call here must fail before it
    communicates (the short timeout ends the test if one does not)."""
    return LocalCommunicator.create(2, timeout=2.0)[0]


@pytest.mark.parametrize("call, error, pattern", [
    (lambda c: comm_ops.reduce_scatter(ms.Tensor(np.zeros((3, 2))), group=c), ValueError,
     r"ReduceScatter\S*: axis 0 of a tensor of shape \(3, 2\) has size 3, which is not "
     r"divisible by the group size 2 \(expected a multiple of 2\)"),
    (lambda c: AllToAll(1, 0, group=c)(ms.Tensor(np.zeros((2, 3)))), ValueError,
     r"AllToAll\S*: split_axis 1 .* size 3, which is not divisible by the group size 2"),
    (lambda c: AllReduce("prod", group=c), ValueError,
     r"AllReduce: unknown op 'prod'; expected one of \('sum', 'mean', 'max', 'min'\)"),
    (lambda c: comm_ops.all_reduce(ms.Tensor([1.0]), group=c, op="avg"), ValueError,
     r"all_reduce: unknown op 'avg'; expected one of"),
    (lambda c: ReduceScatter(op="max", group=c), ValueError,
     r"ReduceScatter: unknown op 'max'; expected one of \('sum', 'mean'\)"),
    (lambda c: Broadcast(root=2, group=c), ValueError,
     r"Broadcast: root must be a rank of the group, an int in \[0, 2\), got 2"),
    (lambda c: comm_ops.broadcast(ms.Tensor([1.0]), root=-1, group=c), ValueError,
     r"Broadcast\S*: root must be a rank of the group, an int in \[0, 2\), got -1"),
    (lambda c: comm_ops.broadcast(ms.Tensor([1.0]), root="0", group=c), TypeError,
     r"broadcast: root must be an int, got '0'"),
    (lambda c: AllGather(axis=2, group=c)(ms.Tensor(np.zeros((2, 2)))), ValueError,
     r"AllGather\S*: axis 2 is out of range for a tensor of shape \(2, 2\) "
     r"\(expected -2 <= axis < 2\)"),
    (lambda c: comm_ops.all_gather(ms.Tensor(1.0), group=c), ValueError,
     r"AllGather\S*: axis 0 is out of range for a tensor of shape \(\)"),
    (lambda c: AllGather(axis=1.5, group=c), TypeError, r"AllGather: axis must be an int"),
    (lambda c: AllReduce(group=3), TypeError,
     r"AllReduce: group must be a group name, None \(the world\) or a Communicator, got int"),
])
def test_bad_input_is_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(_pair())


# ---- real MPI ranks -----------------------------------------------------------------------------
@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_on_mpi_ranks(n):
    done, _ = launch(n, os.path.join(SCRIPTS, "check_comm_ops.py"), str(n))
    assert done.returncode == 0, done.stdout + done.stderr
    cases = 2 * len(CASES)
    assert sorted(done.stdout.split("\n")[:-1]) == sorted(f"OK rank {r} {cases}"
                                                         for r in range(n))
