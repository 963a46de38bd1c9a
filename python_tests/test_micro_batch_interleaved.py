"""``parallel.nn.MicroBatchInterleaved`` (MindSpore's multiple copy): the batch cut into
copies, the outputs summed; equal to the plain network for a summed loss, forward and
gradients."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.parallel.nn import MicroBatchInterleaved

RNG = np.random.default_rng(2)
X = RNG.standard_normal((10, 6)).astype(np.float32)
Y = RNG.standard_normal((10, 3)).astype(np.float32)


ms.set_seed(7)
_INITIAL = [p.asnumpy().copy() for p in
            nn.SequentialCell([nn.Dense(6, 12), nn.Tanh(), nn.Dense(12, 3)]).trainable_params()]


def _network(reduction="sum"):
    # the same weights every time, also on ranks that run as threads (no shared draws)
    net = nn.SequentialCell([nn.Dense(6, 12), nn.Tanh(), nn.Dense(12, 3)])
    for param, value in zip(net.trainable_params(), _INITIAL):
        param.set_data(ms.Tensor(value.copy()))
    return nn.WithLossCell(net, nn.MSELoss(reduction=reduction))


def _loss_and_grads(network):
    params = network.trainable_params()
    loss, grads = ms.value_and_grad(network, None, params)(ms.Tensor(X), ms.Tensor(Y))
    return float(loss.asnumpy()), [g.asnumpy() for g in grads]


@pytest.mark.parametrize("copies", [1, 2, 3])
def test_copies_equal_the_plain_network_for_a_summed_loss(copies):
    network = _network()
    expected_loss, expected = _loss_and_grads(network)
    loss, grads = _loss_and_grads(MicroBatchInterleaved(network, copies))
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_mean_loss_is_summed_over_the_copies_as_in_mindspore():
    network = _network("mean")
    wrapped = MicroBatchInterleaved(network, 2)
    halves = [float(network(ms.Tensor(X[:5]), ms.Tensor(Y[:5])).asnumpy()),
              float(network(ms.Tensor(X[5:]), ms.Tensor(Y[5:])).asnumpy())]
    assert float(wrapped(ms.Tensor(X), ms.Tensor(Y)).asnumpy()) == pytest.approx(sum(halves))


def test_parameters_keep_their_names():
    network = _network()
    wrapped = MicroBatchInterleaved(network, 2)
    assert [p.name for p in wrapped.trainable_params()] == \
        [p.name for p in network.trainable_params()]


@pytest.mark.parametrize("value, error", [(0, ValueError), (-2, ValueError), (2.0, TypeError),
                                          (True, TypeError)])
def test_bad_interleave_num_is_refused(value, error):
    with pytest.raises(error, match="interleave_num"):
        MicroBatchInterleaved(_network(), value)


def test_a_batch_smaller_than_the_copies_is_refused():
    with pytest.raises(ValueError, match="at least interleave_num=4 rows"):
        MicroBatchInterleaved(_network(), 4)(ms.Tensor(X[:3]), ms.Tensor(Y[:3]))


def test_under_semi_auto_parallel_each_copy_is_sharded_and_the_sum_equals_the_plain_net():
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.parallel.sharding.scope import sharding_world
    expected_loss, expected = _loss_and_grads(_network())
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            network = MicroBatchInterleaved(_network(), 2)
            params = network.trainable_params()
            part = slice(comm.rank * 5, comm.rank * 5 + 5)      # this rank's half of the batch
            loss, grads = ms.value_and_grad(network, None, params)(ms.Tensor(X[part]),
                                                                   ms.Tensor(Y[part]))
            return float(loss.asnumpy()), [g.asnumpy() for g in grads]
    try:
        for loss, grads in run_ranks(2, rank):
            assert loss == pytest.approx(expected_loss, rel=1e-5)
            for got, want in zip(grads, expected):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        ms.reset_auto_parallel_context()


def test_semi_auto_copies_reduce_their_gradients_once_inside_fused_mirrors(monkeypatch):
    """Each copy lets the parameters in through mirrors of its own: alone (no gradient scope)
    they reduce every gradient once per copy; inside ``value_and_grad`` (its
    ``FusedMirrors`` sees the network) the copies' gradients meet on the parameter and travel
    in one allreduce, same values."""
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.extension import Extension, extension
    from minitorch_dist.parallel.sharding.scope import sharding_world
    expected_loss, expected = _loss_and_grads(_network())
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            network = MicroBatchInterleaved(_network(), 2)
            params = network.trainable_params()
            part = slice(comm.rank * 5, comm.rank * 5 + 5)
            comm.reset_stats()
            loss, grads = ms.value_and_grad(network, None, params)(ms.Tensor(X[part]),
                                                                   ms.Tensor(Y[part]))
            return (float(loss.asnumpy()), [g.asnumpy() for g in grads],
                    comm.comm_stats()["by_op"]["allreduce"]["calls"])
    try:
        fused = run_ranks(2, rank)
        with monkeypatch.context() as patch:
            patch.setattr(type(extension()), "gradient_scope", Extension.gradient_scope)
            alone = run_ranks(2, rank)
        for (_, _, calls_alone), (loss, grads, calls) in zip(alone, fused):
            assert loss == pytest.approx(expected_loss, rel=1e-5)
            for got, want in zip(grads, expected):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            assert calls == calls_alone - 2 * 4 + 1     # 4 parameters x 2 copies -> 1 call
    finally:
        ms.reset_auto_parallel_context()
