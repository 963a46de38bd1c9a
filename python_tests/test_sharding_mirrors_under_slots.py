"""A sharded (AUTO_PARALLEL) network's mirror reductions under the launcher's compute slots.

Under ``--compute-slots`` (``communication.hooks.overlap_allowed()`` is False) a rank must
not wait for its peers in the middle of its backward, holding its activations off its slot:
the mirrors' gradient reductions go after backward, as the data-parallel buckets do. The
results are the same bits as without slots (4 thread ranks: their reductions add the ranks
in rank order, so fusing the gradients into one allreduce changes no bit; over MPI the
library's algorithm for a larger message may add them in another order, so there only the
replicas' agreement is bitwise).
"""
import contextlib

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import LocalCommunicator, hooks, run_ranks
from minitorch_dist.parallel.sharding.scope import sharding_world

RANKS, LOCAL_BATCH, STEPS = 4, 2, 2


class _NoSlots:
    """A wait guard that holds no slot: ``overlap_allowed()`` turns False, nothing else."""

    def released(self):
        return contextlib.nullcontext()


@pytest.fixture(autouse=True)
def _auto_parallel():
    ms.set_auto_parallel_context(parallel_mode="auto_parallel",
                                 search_mode="sharding_propagation", gradients_mean=True)
    yield
    hooks.set_wait_guard(None)
    ms.reset_auto_parallel_context()


class ConvNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, pad_mode="same")
        self.bn = nn.BatchNorm2d(6)
        self.relu = ops.ReLU()
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(6, 4)

    def construct(self, x):
        return self.fc(self.mean(self.relu(self.bn(self.conv(x))), (2, 3)))


def _data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((RANKS * LOCAL_BATCH * STEPS, 3, 6, 6)).astype(np.float32)
    return x, rng.integers(0, 4, len(x)).astype(np.int32)


def _train(slots):
    """Per rank: (its trainable parameters after STEPS steps, its other parameters (BN's
    moving statistics, from its own rows), its allreduce calls)."""
    ms.set_seed(0)
    start = [p.asnumpy().copy() for p in ConvNet().trainable_params()]
    x, y = _data()
    hooks.set_wait_guard(_NoSlots() if slots else None)

    def rank(comm):
        net = ConvNet()
        for p, w in zip(net.trainable_params(), start):
            p.set_data(ms.Tensor(w.copy()))
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        model = ms.Model(net, loss, nn.Momentum(net.trainable_params(), 0.1, 0.9))
        data = ms.dataset.NumpySlicesDataset((x, y), shuffle=False, num_shards=RANKS,
                                             shard_id=comm.rank).batch(LOCAL_BATCH)
        with sharding_world(comm):
            comm.reset_stats()
            model.train(1, data, dataset_sink_mode=False)
            calls = comm.comm_stats()["by_op"].get("allreduce", {}).get("calls", 0)
        return [p.asnumpy() for p in net.trainable_params()], \
            [p.asnumpy() for p in net.get_parameters() if not p.requires_grad], calls

    try:
        return run_ranks(RANKS, rank)
    finally:
        hooks.set_wait_guard(None)


def test_slots_give_the_same_bits_and_equal_replicas():
    free, slotted = _train(False), _train(True)
    for trained, _, _ in slotted:
        for a, b in zip(trained, slotted[0][0]):
            assert np.array_equal(a, b)                  # the replicas agree bit for bit
    for got, want in zip(slotted, free):
        assert len(got[0]) == len(want[0]) > 4 and len(got[1]) == len(want[1]) > 0
        for a, b in zip(got[0] + got[1], want[0] + want[1]):
            assert np.array_equal(a, b)                  # and equal the run without slots
    assert not np.array_equal(slotted[0][0][0], _start_conv_weight())


def _start_conv_weight():
    ms.set_seed(0)
    return ConvNet().trainable_params()[0].asnumpy()


def test_slots_defer_the_mirrors_to_one_reduction_after_backward(monkeypatch):
    """Without slots each of the 5 parameters' mirrors reduces alone, as backward reaches
    it; under slots they are reduced after backward, in one allreduce (default group)."""
    calls, allreduce = [], LocalCommunicator.allreduce

    def counted(self, *args, **kwargs):
        calls.append(1)
        return allreduce(self, *args, **kwargs)

    monkeypatch.setattr(LocalCommunicator, "allreduce", counted)
    free = _train(False)
    free_calls, calls[:] = len(calls), []
    slotted = _train(True)
    # per rank and step: 5 mirrors + 2 others alone; 1 fused + the same 2 under slots
    assert (free_calls, len(calls)) == (RANKS * STEPS * 7, RANKS * STEPS * 3)
    for got, want in zip(slotted, free):
        for a, b in zip(got[0] + got[1], want[0] + want[1]):
            assert np.array_equal(a, b)


def test_slots_leave_the_loss_reduction_until_after_backward(monkeypatch):
    """The loss, averaged over the global batch, ends forward with an all-reduce. Under
    slots it waits until after backward (``comm/final_reduction.py``): a rank's first
    collective of a step is the gradients' (size 202), then the loss and the check of its
    seed; without slots the loss (size 1) goes first, while the activations are held. The
    losses returned are the same bits."""
    import threading
    from minitorch_dist import gradients
    sizes, losses = {}, {}
    allreduce, detached = LocalCommunicator.allreduce, gradients._detached

    def recorded(self, x, *args, **kwargs):
        sizes.setdefault(threading.current_thread().name, []).append(int(x.size))
        return allreduce(self, x, *args, **kwargs)

    def returned(out):
        losses.setdefault(threading.current_thread().name, []).append(out.asnumpy().copy())
        return detached(out)

    monkeypatch.setattr(LocalCommunicator, "allreduce", recorded)
    monkeypatch.setattr(gradients, "_detached", returned)
    _train(False)
    free_sizes, free_losses = dict(sizes), dict(losses)
    sizes.clear(), losses.clear()
    _train(True)
    assert len(sizes) == RANKS
    for name, seq in sizes.items():
        assert seq == [202, 1, 1] * STEPS
        assert free_sizes[name][:2] == [1, 1] and len(free_sizes[name]) == 7 * STEPS
    for name, values in losses.items():
        assert len(values) == STEPS
        assert all(np.array_equal(a, b) for a, b in zip(values, free_losses[name]))
        assert np.array_equal(values[0], losses["local-rank-0"][0])
