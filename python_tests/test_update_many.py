"""``Optimizer.update_many``: one ``update`` per parameter with a gradient, the dense host
ones fused into one C++ call; DistOpt updates each reduced bucket through it, and SINGA's
momentum rule is fused too. Same bits as the per-parameter path everywhere."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.nn.optim import fused
from minitorch_dist.parallel import DistOpt
from minitorch_dist.singa.optimizer import _SingaRuleSGD
from test_fused_optim import SHAPES, _grads, _params, _run

needs_kernels = pytest.mark.skipif(fused.native_kernels() is None,
                                   reason="the C++ extension with multi_sgd is not built")


def _bits(opt):
    return [p.asnumpy().copy() for p in opt.parameters] + \
        [s.asnumpy().copy() for slots in opt._slots.values() for s in slots]


@pytest.mark.host_default
@needs_kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_singas_momentum_rule_is_fused_with_the_same_bits(dtype, monkeypatch):
    def make(p):
        return _SingaRuleSGD(p, 0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)
    ours, calls = _run(make, dtype, True, monkeypatch)
    twin, twin_calls = _run(make, dtype, False, monkeypatch)
    assert calls == 4 and twin_calls == 0
    for a, b in zip(ours, twin):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("make", [lambda p: nn.SGD(p, 0.1, momentum=0.9, weight_decay=0.01),
                                  lambda p: nn.Adam(p, 0.01)], ids=["sgd", "adam"])
def test_update_many_is_one_update_per_parameter(make):
    many, one = make(_params(np.float32)), make(_params(np.float32))
    for step in range(3):
        grads = list(_grads(step, np.float32, as_tensor=True))
        grads[1] = None                       # left alone, as update skips it
        many.update_many(grads)
        for i, g in enumerate(grads):
            one.update(i, g)
        assert many.global_step.asnumpy().item() == step    # the counter does not move
        many.step()
        one.step()
        for a, b in zip(_bits(many), _bits(one)):
            assert np.array_equal(a, b)
    untouched = _params(np.float32)[1].asnumpy()
    assert np.array_equal(many.parameters[1].asnumpy(), untouched)


def test_update_many_checks_its_gradients():
    opt = nn.SGD(_params(np.float32), 0.1)
    with pytest.raises(ValueError, match="got 1 gradients for 4 parameters"):
        opt.update_many([np.ones(SHAPES[0], np.float32)])
    with pytest.raises(ValueError, match="gradient 0 has shape"):
        opt.update_many([np.ones((2, 2), np.float32), None, None, None])


class _OneByOne:
    """An optimizer with SINGA's interface only (update, step): no update_many."""

    def __init__(self, opt):
        self.inner, self.parameters = opt, opt.parameters

    def update(self, position, grad):
        self.inner.update(position, grad)

    def step(self):
        self.inner.step()


def _dist_train(comm, one_by_one):
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(6, 64), nn.ReLU(), nn.Dense(64, 3)])
    opt = nn.SGD(net.trainable_params(), 0.1, momentum=0.9)
    calls = []
    if one_by_one:
        wrapped = _OneByOne(opt)
    else:
        wrapped = opt
        original = opt.update_many
        opt.update_many = lambda grads: calls.append(sum(g is not None for g in grads)) or \
            original(grads)
    dist = DistOpt(wrapped, communicator=comm, buffSize=1024)     # several buckets
    rng = np.random.default_rng(comm.rank)
    for _ in range(3):
        grads = [rng.normal(size=p.shape).astype(np.float32) for p in opt.parameters]
        dist.step(grads, "fp32")
    return [p.asnumpy() for p in opt.parameters], calls


def test_dist_opt_updates_each_bucket_at_once_with_the_per_parameter_bits():
    fused_run = run_ranks(2, lambda comm: _dist_train(comm, one_by_one=False))
    plain_run = run_ranks(2, lambda comm: _dist_train(comm, one_by_one=True))
    for (ours, calls), (theirs, _) in zip(fused_run, plain_run):
        assert len(calls) > 3 and sum(calls) == 3 * 4     # per step: a call per bucket
        for a, b in zip(ours, theirs):
            assert np.array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(fused_run[0][0], fused_run[1][0]))
