"""Gradient accumulation (``parallel.nn.GradAccumulation``): k micro-batches give the
gradients of one batch k times larger, one micro-batch's graph alive at a time, and one
reduction per step under data parallel."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.nn import GradAccumulation

RNG = np.random.default_rng(1)
X = RNG.standard_normal((16, 8)).astype(np.float32)
Y = RNG.standard_normal((16, 2)).astype(np.float32)
ms.set_seed(5)
_INITIAL = [p.asnumpy().copy() for p in
            nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 2)]).trainable_params()]


def _loss_network():
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 2)])
    for param, value in zip(net.trainable_params(), _INITIAL):
        param.set_data(ms.Tensor(value.copy()))
    return nn.WithLossCell(net, nn.MSELoss(reduction="sum"))


def _gradients(network, x, y):
    params = network.trainable_params()
    loss, grads = ms.value_and_grad(network, None, params)(ms.Tensor(x), ms.Tensor(y))
    return float(loss.asnumpy()), [g.asnumpy() for g in grads]


def test_four_micro_batches_give_the_gradients_of_the_whole_batch():
    whole = _loss_network()
    expected_loss, expected = _gradients(whole, X, Y)
    accumulated = GradAccumulation(_loss_network(), 4)
    loss, grads = _gradients(accumulated, X, Y)
    assert accumulated.steps == 4
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_training_with_train_one_step_cell_equals_the_whole_batch():
    plain, accumulated = _loss_network(), _loss_network()
    step_plain = nn.TrainOneStepCell(plain, nn.Momentum(plain.trainable_params(), 0.01, 0.9))
    step_accumulated = nn.TrainOneStepCell(GradAccumulation(accumulated, 4),
                                           nn.Momentum(accumulated.trainable_params(), 0.01, 0.9))
    for _ in range(3):
        a = float(step_plain(ms.Tensor(X), ms.Tensor(Y)).asnumpy())
        b = float(step_accumulated(ms.Tensor(X), ms.Tensor(Y)).asnumpy())
        assert b == pytest.approx(a, rel=1e-6)
    for p, q in zip(plain.trainable_params(), accumulated.trainable_params()):
        np.testing.assert_allclose(q.asnumpy(), p.asnumpy(), rtol=1e-6, atol=1e-6)


def test_data_parallel_accumulation_reduces_once_per_step():
    expected_loss, expected = _gradients(_loss_network(), X, Y)

    def rank(comm):
        network = GradAccumulation(_loss_network(), 4)
        params = network.trainable_params()
        reducer = DistributedGradReducer(params, mean=False, communicator=comm)
        part = slice(comm.rank * 8, (comm.rank + 1) * 8)
        grad_fn = ms.value_and_grad(network, None, params)
        comm.reset_stats()
        _, grads = grad_fn(ms.Tensor(X[part]), ms.Tensor(Y[part]))
        grads = reducer(grads)
        return [g.asnumpy() for g in grads], comm.comm_stats()["by_op"]
    for grads, by_op in run_ranks(2, rank):
        for got, want in zip(grads, expected):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        # four micro-batches, one fused allreduce of the four small gradients
        assert by_op == {"allreduce": by_op["allreduce"]} and by_op["allreduce"]["calls"] == 1


def test_semi_auto_parallel_accumulation_sums_before_one_fused_mirror_reduction():
    """Under semi-auto parallel the parameters' mirrors hand back their gradients unreduced
    inside the accumulation; the sums are reduced once per step, in one fused allreduce (the
    other allreduces are the loss's, once per micro-batch)."""
    from minitorch_dist.parallel.sharding.scope import sharding_world
    expected_loss, expected = _gradients(_loss_network(), X, Y)
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm, micro_size):
        with sharding_world(comm):
            network = _loss_network() if micro_size == 1 else \
                GradAccumulation(_loss_network(), micro_size)
            part = slice(comm.rank * 8, comm.rank * 8 + 8)       # this rank's half of the batch
            comm.reset_stats()
            loss, grads = _gradients(network, X[part], Y[part])
            return loss, grads, comm.comm_stats()["by_op"]["allreduce"]["calls"]
    try:
        plain_calls = run_ranks(2, lambda comm: rank(comm, 1))[0][2]
        for loss, grads, calls in run_ranks(2, lambda comm: rank(comm, 4)):
            assert loss == pytest.approx(expected_loss, rel=1e-6)
            for got, want in zip(grads, expected):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=2e-6)
            loss_calls = plain_calls - 4                 # four parameters, one mirror each
            assert calls == 1 + 4 * loss_calls
    finally:
        ms.reset_auto_parallel_context()


def test_without_gradients_it_returns_the_summed_loss():
    network = _loss_network()
    loss = GradAccumulation(network, 2)(ms.Tensor(X), ms.Tensor(Y))
    assert float(loss.asnumpy()) == pytest.approx(float(network(ms.Tensor(X), ms.Tensor(Y))
                                                        .asnumpy()), rel=1e-6)


@pytest.mark.parametrize("micro_size", [0, -1, 1.5, True])
def test_bad_micro_size_is_refused(micro_size):
    with pytest.raises(ValueError, match="micro_size must be a positive int"):
        GradAccumulation(_loss_network(), micro_size)


def test_a_batch_that_does_not_divide_is_refused_naming_the_input():
    with pytest.raises(ValueError, match="divisible by micro_size=3"):
        GradAccumulation(_loss_network(), 3)(ms.Tensor(X), ms.Tensor(Y))


def test_network_must_be_a_cell():
    with pytest.raises(TypeError, match="network must be a Cell"):
        GradAccumulation(lambda x: x, 2)


def test_grad_accumulation_step_in_the_context_makes_model_accumulate():
    """Model under grad_accumulation_step=4 runs 4 micro-batches a step and trains as one
    GradAccumulation(net_with_loss, 4) does."""
    from minitorch_dist.train import Model

    def trained(context_step):
        net = _loss_network()
        ms.set_auto_parallel_context(grad_accumulation_step=context_step)
        try:
            opt = nn.SGD(net.trainable_params(), 0.1)
            if context_step == 1:
                step = nn.TrainOneStepCell(GradAccumulation(net, 4), opt)
                step(ms.Tensor(X), ms.Tensor(Y))
            else:
                model = Model(net, optimizer=opt)
                model._train_network(ms.Tensor(X), ms.Tensor(Y))
                assert model._train_network.network.micro_size == 4
                assert model._train_network.network.steps == 4
        finally:
            ms.reset_auto_parallel_context()
        return [p.asnumpy() for p in net.trainable_params()]

    for a, b in zip(trained(4), trained(1)):
        np.testing.assert_array_equal(a, b)
