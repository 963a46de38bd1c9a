"""``parallel_optimizer_config={"gradient_accumulation_shard": True}``: under gradient
accumulation with optimizer parallel, each micro-batch's gradients are reduce-scattered and
only this rank's slice is accumulated. Training equals one process; the accumulated bytes
per rank fall to about 1/k. Ranks run as threads (``run_ranks``)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.nn import GradAccumulation
from minitorch_dist.parallel.sharding.scope import sharding_world

RNG = np.random.default_rng(4)
X = RNG.standard_normal((16, 12)).astype(np.float32)
Y = RNG.standard_normal((16, 3)).astype(np.float32)
ms.set_seed(9)
_INITIAL = [p.asnumpy().copy() for p in
            nn.SequentialCell([nn.Dense(12, 24), nn.ReLU(), nn.Dense(24, 3)]).trainable_params()]
RANKS, MICRO = 4, 2


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_auto_parallel_context()


def _loss_network():
    net = nn.SequentialCell([nn.Dense(12, 24), nn.ReLU(), nn.Dense(24, 3)])
    for param, value in zip(net.trainable_params(), _INITIAL):
        param.set_data(ms.Tensor(value.copy()))
    return nn.WithLossCell(net, nn.MSELoss(reduction="sum"))


def _train(network, x, y, reducer=None, steps=3):
    params = network.trainable_params()
    opt = nn.Adam(params, 0.01)
    grad_fn = ms.value_and_grad(network, None, params)
    for _ in range(steps):
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
        opt(grads if reducer is None else reducer(grads))
    return [p.asnumpy() for p in params]


def _data_parallel(shard):
    ms.set_auto_parallel_context(
        parallel_mode="data_parallel", enable_parallel_optimizer=True,
        parallel_optimizer_config={"gradient_accumulation_shard": shard,
                                   "parallel_optimizer_threshold": 0})

    def rank(comm):
        with sharding_world(comm):
            network = GradAccumulation(_loss_network(), MICRO)
            part = slice(comm.rank * 4, (comm.rank + 1) * 4)
            reducer = DistributedGradReducer(network.trainable_params(), mean=False,
                                             communicator=comm)
            params = _train(network, X[part], Y[part], reducer)
            comm.reset_stats()
            _train(network, X[part], Y[part], reducer, steps=1)
            return params, network.accumulated_bytes, comm.comm_stats()["by_op"]
    return run_ranks(RANKS, rank)


def test_sliced_accumulation_equals_one_process_and_holds_a_quarter_of_the_sums():
    expected = _train(_loss_network(), X, Y)
    whole_bytes = sum(a.nbytes for a in _INITIAL)
    for params, held, by_op in _data_parallel(True):
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        # every parameter sliced over 4 ranks: a quarter of the sums (up to padding)
        assert held <= whole_bytes / RANKS + 4 * 4
        # one fused reduce-scatter per micro-batch, none in the reducer, one all-gather
        assert by_op["reduce_scatter"]["calls"] == MICRO
        assert by_op["allgather"]["calls"] == 1 and "allreduce" not in by_op


def test_without_the_option_sums_stay_whole_and_reduce_once():
    for params, held, by_op in _data_parallel(False):
        assert held == sum(a.nbytes for a in _INITIAL)
        assert by_op["reduce_scatter"]["calls"] == 1


def test_outside_data_parallel_the_option_is_refused_by_name():
    ms.set_auto_parallel_context(
        parallel_mode="semi_auto_parallel", enable_parallel_optimizer=True,
        parallel_optimizer_config={"gradient_accumulation_shard": True})

    def rank(comm):
        with sharding_world(comm):
            network = GradAccumulation(_loss_network(), MICRO)
            grad_fn = ms.value_and_grad(network, None, network.trainable_params())
            with pytest.raises(NotImplementedError, match="gradient_accumulation_shard"):
                grad_fn(ms.Tensor(X[:4]), ms.Tensor(Y[:4]))
            return True
    assert run_ranks(2, rank) == [True, True]


def test_without_accumulation_the_option_is_noted_once(caplog):
    from minitorch_dist import runtime
    runtime._said.discard("gradient_accumulation_shard.unused")
    ms.set_auto_parallel_context(
        parallel_mode="data_parallel", enable_parallel_optimizer=True,
        parallel_optimizer_config={"gradient_accumulation_shard": True,
                                   "parallel_optimizer_threshold": 0})

    def rank(comm):
        with sharding_world(comm):
            network = _loss_network()
            reducer = DistributedGradReducer(network.trainable_params(), mean=False,
                                             communicator=comm)
            return _train(network, X[:8], Y[:8], reducer, steps=2)
    with caplog.at_level("WARNING", logger="minitorch_dist"):
        run_ranks(2, rank)
    notes = [r for r in caplog.records if "gradient_accumulation_shard=True acts under"
             in r.getMessage()]
    assert len(notes) == 1


def test_a_pipeline_refuses_sliced_accumulation_by_name():
    """``PipelineCell`` calls this before a training step: its micro-batch sums stay whole."""
    from minitorch_dist.parallel.data_parallel.accumulation_shard import refuse_in_pipeline
    ms.set_auto_parallel_context(
        parallel_mode="semi_auto_parallel", enable_parallel_optimizer=True,
        parallel_optimizer_config={"gradient_accumulation_shard": True})

    def rank(comm, refused):
        with sharding_world(comm):
            if refused:
                with pytest.raises(NotImplementedError, match="gradient_accumulation_shard"):
                    refuse_in_pipeline()
            else:
                refuse_in_pipeline()          # off: nothing to refuse
            return True
    assert run_ranks(2, lambda comm: rank(comm, True)) == [True, True]
    ms.set_auto_parallel_context(parallel_optimizer_config={"gradient_accumulation_shard": False})
    assert run_ranks(2, lambda comm: rank(comm, False)) == [True, True]
