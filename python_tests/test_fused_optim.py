"""The fused multi-tensor optimizer update (C++ multi_sgd / multi_adam, nn/optim/fused.py)
gives the same bits as the per-parameter NumPy path for every option (issue 29 item 3)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.nn.optim import fused
from minitorch_dist.nn.optim.sgd import SGD

pytestmark = [pytest.mark.skipif(fused.native_kernels() is None,
                                 reason="the C++ extension with multi_sgd is not built"),
              pytest.mark.host_default]      # the fused kernels update host arrays

SHAPES = [(7, 5), (13,), (3, 4, 2), (1,)]


def _params(dtype):
    rng = np.random.default_rng(1)
    return [ms.Parameter(ms.Tensor(rng.normal(size=s).astype(dtype)), name=f"p{k}")
            for k, s in enumerate(SHAPES)]


def _grads(step, dtype, as_tensor):
    rng = np.random.default_rng(100 + step)
    grads = [rng.normal(size=s).astype(dtype) for s in SHAPES]
    return tuple(ms.Tensor(g) if as_tensor else g for g in grads)


def _run(make, dtype, fused_on, monkeypatch, steps=4, grouped=False, as_tensor=True):
    """Parameters and state bits after ``steps`` steps, and the number of fused calls."""
    params = _params(dtype)
    if grouped:
        params = [{"params": params[:2], "lr": 0.05, "weight_decay": 0.02},
                  {"params": params[2:], "weight_decay": 0.0}]
    opt = make(params)
    calls = []
    with monkeypatch.context() as m:
        if not fused_on:
            m.setattr(fused, "native_kernels", lambda: None)
        original = opt._fused_update
        m.setattr(opt, "_fused_update", lambda *a: calls.append(1) or original(*a))
        for step in range(steps):
            opt(_grads(step, dtype, as_tensor))
    arrays = [p.asnumpy() for p in opt.parameters]
    arrays += [s.asnumpy() for slots in opt._slots.values() for s in slots]
    return arrays, len(calls)


OPTIONS = {
    "sgd": lambda p: nn.SGD(p, 0.1),
    "sgd wd scale": lambda p: nn.SGD(p, 0.1, weight_decay=0.01, loss_scale=128.0),
    "sgd momentum": lambda p: nn.SGD(p, 0.1, momentum=0.9),
    "sgd dampening wd": lambda p: nn.SGD(p, 0.1, momentum=0.9, dampening=0.3, weight_decay=0.05),
    "sgd dampening scale": lambda p: nn.SGD(p, 0.1, momentum=0.8, dampening=0.5, loss_scale=4.0),
    "sgd nesterov wd scale": lambda p: nn.SGD(p, 0.1, momentum=0.9, nesterov=True,
                                              weight_decay=0.01, loss_scale=8.0),
    "sgd lr list": lambda p: nn.SGD(p, [0.1, 0.05, 0.01], momentum=0.5),
    "sgd schedule": lambda p: nn.SGD(p, nn.ExponentialDecayLR(0.1, 0.9, 1), momentum=0.9),
    "momentum": lambda p: nn.Momentum(p, 0.1, 0.9),
    "momentum nesterov wd scale": lambda p: nn.Momentum(p, 0.1, 0.9, weight_decay=0.01,
                                                        loss_scale=16.0, use_nesterov=True),
    "adam": lambda p: nn.Adam(p, 0.01),
    "adam l2 nesterov scale": lambda p: nn.Adam(p, 0.01, weight_decay=0.01, loss_scale=64.0,
                                                use_nesterov=True),
    "adam betas eps": lambda p: nn.Adam(p, 0.02, beta1=0.5, beta2=0.7, eps=1e-3),
    "adamw": lambda p: nn.AdamW(p, 0.01),
    "adam weight decay scale": lambda p: nn.AdamWeightDecay(p, 0.01, weight_decay=0.1,
                                                            loss_scale=2.0),
    "adamw schedule": lambda p: nn.AdamW(p, nn.CosineDecayLR(0.0, 0.01, 3)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_fused_update_equals_the_numpy_path_bit_for_bit(name, dtype, monkeypatch):
    ours, calls = _run(OPTIONS[name], dtype, True, monkeypatch)
    twin, twin_calls = _run(OPTIONS[name], dtype, False, monkeypatch)
    assert calls == 4 and twin_calls == 0      # one call per step (one group, one dtype)
    for a, b in zip(ours, twin):
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("name", ["sgd nesterov wd scale", "adam l2 nesterov scale", "adamw"])
def test_groups_get_one_call_each_and_their_own_lr_and_decay(name, monkeypatch):
    ours, calls = _run(OPTIONS[name], np.float32, True, monkeypatch, grouped=True,
                       as_tensor=False)
    twin, _ = _run(OPTIONS[name], np.float32, False, monkeypatch, grouped=True, as_tensor=False)
    assert calls == 8
    for a, b in zip(ours, twin):
        assert np.array_equal(a, b)


def test_parameters_the_kernel_cannot_take_go_one_by_one():
    """float16 and a non-contiguous gradient take the NumPy path; the rest is fused."""
    rng = np.random.default_rng(0)
    half = ms.Parameter(ms.Tensor(rng.normal(size=(4, 3)).astype(np.float16)), name="h")
    full = ms.Parameter(ms.Tensor(rng.normal(size=(4, 3)).astype(np.float32)), name="f")
    odd = ms.Parameter(ms.Tensor(rng.normal(size=(3, 4)).astype(np.float32)), name="o")
    opt = nn.SGD([half, full, odd], 0.1, momentum=0.9)
    grads = (np.ones((4, 3), np.float16), np.ones((4, 3), np.float32),
             np.ones((4, 3), np.float32).T)
    before = [p.asnumpy().copy() for p in (half, full, odd)]
    done = fused.apply_fused(opt, grads, [0.1], 0)
    assert done == {1}
    assert np.array_equal(half.asnumpy(), before[0]) and np.array_equal(odd.asnumpy(), before[2])
    assert np.allclose(full.asnumpy(), before[1] - 0.1)


def test_a_subclass_that_changes_the_rule_is_not_fused():
    class ZeroStart(SGD):
        def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
            super()._apply_one(i, param, grad, lr, weight_decay, max(step, 1), device)

    w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
    opt = ZeroStart([w], 0.1, momentum=0.9, dampening=0.5)
    assert fused.apply_fused(opt, (np.ones(3, np.float32),), [0.1], 0) == ()
    opt((ms.Tensor(np.ones(3, np.float32)),))     # buffer starts at 0: 0.5 * g, not g
    assert np.allclose(w.asnumpy(), 1 - 0.1 * 0.5)


def test_momentum_of_one_or_more_is_still_refused_at_the_step():
    w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
    opt = nn.Momentum([w], 0.1, 1.5)
    with pytest.raises(ValueError, match="momentum must lie in"):
        opt((ms.Tensor(np.ones(3, np.float32)),))
    assert np.array_equal(w.asnumpy(), np.ones(3, np.float32))


def test_the_kernel_checks_its_arguments():
    c = fused.native_kernels()
    p = np.zeros(3, np.float32)
    args = dict(decay=1.0, g_scale=0.1, momentum=0.0, keep_scale=1.0, keep_wd=0.0,
                inv_scale=1.0, wd=0.0, step_scale=0.1, has_wd=False, first_dampened=False,
                unit_keep=True, nesterov=False)
    with pytest.raises(ValueError, match="same length"):
        c.multi_sgd([p], [], None, **args)
    with pytest.raises(ValueError, match="shape"):
        c.multi_sgd([p], [np.zeros(4, np.float32)], None, **args)
    with pytest.raises(TypeError, match="same dtype"):
        c.multi_sgd([p], [np.zeros(3, np.float64)], None, **args)
    with pytest.raises(ValueError, match="writeable"):
        ro = np.zeros(3, np.float32)
        ro.flags.writeable = False
        c.multi_sgd([ro], [p], None, **args)


def test_nothing_is_fused_without_the_extension_or_for_lazy_adam(monkeypatch):
    w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
    grads = (np.ones(3, np.float32),)
    assert fused.apply_fused(nn.LazyAdam([w], 0.1), grads, [0.1], 0) == ()
    monkeypatch.setattr(fused.kernels, "HAVE_CPP", False)     # as MINITORCH_DIST_NO_CPP=1
    assert fused.native_kernels() is None
    assert fused.apply_fused(nn.SGD([w], 0.1), grads, [0.1], 0) == ()


def test_an_update_replaced_on_the_instance_is_respected():
    w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
    opt = nn.SGD([w], 0.1)
    seen = []
    original = opt._update
    opt._update = lambda *a: seen.append(a[0]) or original(*a)
    opt((ms.Tensor(np.ones(3, np.float32)),))
    assert seen == [0] and np.allclose(w.asnumpy(), 0.9)
