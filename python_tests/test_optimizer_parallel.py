"""Optimizer parallel (``enable_parallel_optimizer``): optimizer states sliced over the
data-parallel ranks, gradients reduce-scattered, updated slices all-gathered; results equal
one process. Ranks run as threads (``run_ranks``)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.sharding.scope import sharding_world

RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 32)).astype(np.float32)
Y = RNG.standard_normal((16, 8)).astype(np.float32)
ms.set_seed(3)
_INITIAL = [p.asnumpy().copy() for p in
            nn.SequentialCell([nn.Dense(32, 64), nn.ReLU(), nn.Dense(64, 8)]).trainable_params()]


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_auto_parallel_context()


def _network():
    net = nn.SequentialCell([nn.Dense(32, 64), nn.ReLU(), nn.Dense(64, 8)])
    for param, value in zip(net.trainable_params(), _INITIAL):
        param.set_data(ms.Tensor(value.copy()))
    return net


def _train(net, opt, x, y, reducer=None, steps=3):
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
    for _ in range(steps):
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
        opt(grads if reducer is None else reducer(grads))
    return [p.asnumpy() for p in net.trainable_params()]


def _state_bytes(opt):
    return sum(s.data.nbytes for p in opt.parameters for s in opt.states_of(p))


def _one_process(make_opt):
    net = _network()
    opt = make_opt(net.trainable_params())
    return _train(net, opt, X, Y), _state_bytes(opt)


def _data_parallel(size, make_opt, **config):
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True, **config)

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = make_opt(net.trainable_params())
            part = slice(comm.rank * 16 // size, (comm.rank + 1) * 16 // size)
            reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
            params = _train(net, opt, X[part], Y[part], reducer)
            return params, _state_bytes(opt), comm.comm_stats()["by_op"]
    return run_ranks(size, rank)


def test_adam_on_8_ranks_keeps_an_eighth_of_the_state_and_equals_one_process():
    def make(params):
        return nn.Adam(params, 0.01)
    expected, whole_state = _one_process(make)
    results = _data_parallel(8, make, parallel_optimizer_config={"parallel_optimizer_threshold": 0})
    param_bytes = sum(v.nbytes for v in expected)
    for params, state, by_op in results:
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        # the slices are ceil(n / 8) long: at most 4 bytes * 2 slots of padding per parameter
        assert state <= whole_state / 8 + 64
        assert (param_bytes + state) / (param_bytes + whole_state) < 0.42
        # gradients travel by reduce-scatter, updated slices come back by all-gather: the
        # four parameters fused into one call each per step (comm_fusion's "auto": 64 MB)
        assert "allreduce" not in by_op
        assert by_op["reduce_scatter"]["calls"] == by_op["allgather"]["calls"] == 3


def test_small_parameters_stay_whole_under_the_default_threshold():
    def make(params):
        return nn.Momentum(params, 0.05, 0.9)
    expected, whole_state = _one_process(make)
    for params, state, by_op in _data_parallel(2, make):
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        # every parameter is under 64 KB: nothing is sliced, one fused allreduce per step
        assert state == whole_state
        assert set(by_op) == {"allreduce"}


def test_optimizer_weight_shard_size_slices_over_groups_of_that_size():
    def make(params):
        return nn.Adam(params, 0.01)
    expected, whole_state = _one_process(make)
    config = {"parallel_optimizer_threshold": 0, "optimizer_weight_shard_size": 2}
    for params, state, _ in _data_parallel(4, make, parallel_optimizer_config=config):
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        assert whole_state / 2 <= state <= whole_state / 2 + 64


def test_parameter_parallel_optimizer_false_keeps_its_state_whole():
    ms.set_auto_parallel_context(parallel_mode="data_parallel", enable_parallel_optimizer=True,
                                 parallel_optimizer_config={"parallel_optimizer_threshold": 0})

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            net.trainable_params()[0].parallel_optimizer = False
            opt = nn.Adam(net.trainable_params(), 0.01)
            reducer = DistributedGradReducer(opt.parameters, communicator=comm)
            _train(net, opt, X, Y, reducer, steps=1)
            return [tuple(opt.states_of(p)[0].shape) for p in opt.parameters]
    shapes = run_ranks(2, rank)[0]
    assert shapes == [(64, 32), (32,), (256,), (4,)]


def test_semi_auto_parallel_slices_states_and_equals_one_process():
    def make(params):
        return nn.Adam(params, 0.01)
    expected, whole_state = _one_process(make)
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", enable_parallel_optimizer=True,
                                 parallel_optimizer_config={"parallel_optimizer_threshold": 0})

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = make(net.trainable_params())
            return _train(net, opt, X, Y), _state_bytes(opt)
    for params, state in run_ranks(4, rank):
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, atol=1e-5)
        assert state <= whole_state / 4 + 64


def test_a_shard_size_that_does_not_divide_the_group_fails_alike_on_every_rank():
    ms.set_auto_parallel_context(parallel_mode="data_parallel", enable_parallel_optimizer=True,
                                 parallel_optimizer_config={"parallel_optimizer_threshold": 0,
                                                            "optimizer_weight_shard_size": 3})

    def rank(comm):
        with sharding_world(comm):
            net = _network()
            opt = nn.SGD(net.trainable_params(), 0.1, momentum=0.9)
            try:
                _train(net, opt, X, Y, steps=1)
            except ValueError as err:
                return str(err)
            return None
    messages = run_ranks(4, rank)
    assert len(set(messages)) == 1
    assert "optimizer_weight_shard_size=3 does not divide the data-parallel group size 4" \
        in messages[0]


def test_stand_alone_job_trains_as_before():
    ms.set_auto_parallel_context(enable_parallel_optimizer=True)
    expected, whole_state = _one_process(lambda params: nn.Adam(params, 0.01))
    ms.reset_auto_parallel_context()
    got, state = _one_process(lambda params: nn.Adam(params, 0.01))
    assert state == whole_state
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("config, error, match", [
    ({"optimizer_weight_shard_size": 0}, ValueError, "optimizer_weight_shard_size"),
    ({"optimizer_weight_shard_size": True}, ValueError, "optimizer_weight_shard_size"),
    ({"parallel_optimizer_threshold": -1}, ValueError, "parallel_optimizer_threshold"),
    ({"gradient_accumulation_shard": 1}, ValueError, "gradient_accumulation_shard"),
    ({"shard_size": 2}, ValueError, "unknown keys"),
    ({"optimizer_level": "level9"}, ValueError, "optimizer_level"),
    ([("optimizer_weight_shard_size", 2)], ValueError, "must be a dict"),
])
def test_bad_parallel_optimizer_config_is_refused_and_changes_nothing(config, error, match):
    before = ms.get_auto_parallel_context("parallel_optimizer_config")
    with pytest.raises(error, match=match):
        ms.set_auto_parallel_context(parallel_optimizer_config=config)
    assert ms.get_auto_parallel_context("parallel_optimizer_config") == before


def test_config_keeps_defaults_for_missing_keys():
    ms.set_auto_parallel_context(parallel_optimizer_config={"optimizer_weight_shard_size": 2})
    config = ms.get_auto_parallel_context("parallel_optimizer_config")
    assert config == {"gradient_accumulation_shard": False, "parallel_optimizer_threshold": 64,
                      "optimizer_weight_shard_size": 2, "optimizer_level": "level1"}
