"""Optimizer parallel at ``optimizer_level="level3"`` (ZeRO-3): weights too are kept sliced
between steps, gathered at their first use and cut back after the optimizer step. Adam on 8
thread ranks keeps about an eighth of parameters + states and equals one process."""
import os

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.data_parallel import weight_slicing
from minitorch_dist.parallel.sharding.scope import sharding_world

RNG = np.random.default_rng(1)
X = RNG.standard_normal((16, 32)).astype(np.float32)
Y = RNG.standard_normal((16, 8)).astype(np.float32)
ms.set_seed(5)
_INITIAL = [p.asnumpy().copy() for p in
            nn.SequentialCell([nn.Dense(32, 64), nn.ReLU(), nn.Dense(64, 8)]).trainable_params()]
LEVEL3 = {"parallel_optimizer_threshold": 0, "optimizer_level": "level3"}


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_auto_parallel_context()


def _network():
    net = nn.SequentialCell([nn.Dense(32, 64), nn.ReLU(), nn.Dense(64, 8)])
    for param, value in zip(net.trainable_params(), _INITIAL):
        param.set_data(ms.Tensor(value.copy()))
    return net


def _step(net, opt, x, y, reducer=None):
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
    _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
    opt(grads if reducer is None else reducer(grads))


def _resident(opt):
    """Bytes this rank keeps between steps: parameters (slices where sliced) + states."""
    state = sum(s.data.nbytes for p in opt.parameters for s in opt.states_of(p))
    return state + sum(weight_slicing.resident_bytes(p) for p in opt.parameters)


def _one_process(steps):
    net = _network()
    opt = nn.Adam(net.trainable_params(), 0.01)
    for _ in range(steps):
        _step(net, opt, X, Y)
    return [p.asnumpy() for p in net.trainable_params()], _resident(opt)


def test_adam_level3_on_8_ranks_keeps_an_eighth_and_equals_one_process(tmp_path):
    expected, whole = _one_process(3)
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True, parallel_optimizer_config=LEVEL3)

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = nn.Adam(net.trainable_params(), 0.01)
            reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
            part = slice(comm.rank * 2, comm.rank * 2 + 2)
            for _ in range(3):
                _step(net, opt, X[part], Y[part], reducer)
                sliced = [weight_slicing.is_sliced(p) for p in opt.parameters]
            resident = _resident(opt)
            # a checkpoint of a sliced network holds whole values (gathered on every rank)
            path = os.path.join(tmp_path, f"rank{comm.rank}.ckpt")
            ms.save_checkpoint(net, path)
            saved = {k: v.asnumpy() for k, v in ms.load_checkpoint(path).items()
                     if not k.startswith("__")}
            return [p.asnumpy() for p in net.trainable_params()], resident, sliced, saved
    for params, resident, sliced, saved in run_ranks(8, rank, timeout=120):
        assert sliced == [True] * 4                  # between steps no whole weight is kept
        # 1/8 of parameters + Adam's two moments, plus at most 3 padded elements x 4 bytes
        # per tensor (12 tensors) and the global step counter
        assert resident <= whole / 8 + 12 * 12 + 8, (resident, whole)
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        names = [p.name for p in _network().trainable_params()]
        for name, want in zip(names, expected):
            assert saved[name].shape == want.shape
            np.testing.assert_allclose(saved[name], want, atol=1e-5)


@pytest.mark.parametrize("mode", ["semi_auto_parallel", "auto_parallel", "hybrid_parallel"])
def test_level3_outside_data_parallel_is_refused_naming_the_style(mode):
    ms.set_auto_parallel_context(parallel_mode=mode, enable_parallel_optimizer=True,
                                 parallel_optimizer_config=LEVEL3)

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = nn.Adam(net.trainable_params(), 0.01)
            try:
                _step(net, opt, X, Y)
            except NotImplementedError as err:
                return str(err)
            return None
    messages = run_ranks(2, rank, timeout=60)
    assert len(set(messages)) == 1 and messages[0] is not None
    assert "level3" in messages[0] and mode in messages[0]


def test_level3_is_accepted_by_the_context_and_hsdp():
    from minitorch_dist.parallel import AutoParallel
    ms.set_auto_parallel_context(parallel_optimizer_config={"optimizer_level": "level3"})
    assert ms.get_auto_parallel_context("parallel_optimizer_config")["optimizer_level"] == \
        "level3"
    AutoParallel(_network()).hsdp(optimizer_level="level3")      # no refusal


def test_level3_with_pipeline_stages_is_refused():
    from minitorch_dist.parallel.data_parallel import optimizer_parallel
    ms.set_auto_parallel_context(parallel_mode="data_parallel", pipeline_stages=2,
                                 parallel_optimizer_config=LEVEL3)
    with pytest.raises(NotImplementedError, match="level3.*pipeline_stages"):
        optimizer_parallel._level3_checked()


def test_level3_over_groups_of_two_and_an_opted_out_parameter_equals_one_process():
    expected, _ = _one_process(2)
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True,
                                 parallel_optimizer_config=dict(LEVEL3,
                                                                optimizer_weight_shard_size=2))

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            net.trainable_params()[0].parallel_optimizer = False
            opt = nn.Adam(net.trainable_params(), 0.01)
            reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
            part = slice(comm.rank * 4, comm.rank * 4 + 4)
            for _ in range(2):
                _step(net, opt, X[part], Y[part], reducer)
            sliced = [weight_slicing.is_sliced(p) for p in opt.parameters]
            sizes = [weight_slicing.resident_bytes(p) for p in opt.parameters]
            return sliced, sizes, [p.asnumpy() for p in net.trainable_params()]
    for sliced, sizes, params in run_ranks(4, rank, timeout=60):
        assert sliced == [False, True, True, True]
        assert sizes == [64 * 32 * 4, 32 * 4, 256 * 4, 4 * 4]     # halves of 64, 512 and 8
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_level3_weights_are_whole_only_around_each_use():
    """After a step has sliced them, each weight is gathered for the primitive that reads it
    and dropped after; backward gathers it again. A rank's peak of whole weights is one
    weight (the largest), not all of them, and the results still equal one process."""
    from minitorch_dist.parallel.data_parallel import gathered_use
    expected, _ = _one_process(3)
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True, parallel_optimizer_config=LEVEL3)

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = nn.Adam(net.trainable_params(), 0.01)
            reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
            part = slice(comm.rank * 4, comm.rank * 4 + 4)
            _step(net, opt, X[part], Y[part], reducer)
            peaks, during = [], []
            for _ in range(2):
                gathered_use.reset_gathered_peak()
                comm.reset_stats()
                loss_fn = nn.MSELoss()
                grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None,
                                            opt.parameters)
                _, grads = grad_fn(ms.Tensor(X[part]), ms.Tensor(Y[part]))
                during.append([weight_slicing.is_sliced(p) for p in opt.parameters])
                peaks.append((gathered_use.gathered_bytes(),
                              comm.comm_stats()["by_op"]["allgather"]["calls"]))
                opt(reducer(grads))
            return [p.asnumpy() for p in net.trainable_params()], peaks, during
    largest = max(a.nbytes for a in _INITIAL)
    for params, peaks, during in run_ranks(4, rank, timeout=120):
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        for (live, peak), gathers in peaks:
            assert live == 0 and peak == largest, (live, peak, largest)
            assert gathers == 2 * 4       # each of the 4 weights: forward, then backward
        assert during == [[True] * 4] * 2   # still sliced after forward and backward
