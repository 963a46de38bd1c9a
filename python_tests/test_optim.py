"""Optimizers and learning-rate schedules: parity with torch.optim over several steps,
closed forms, parameter groups, state registration, update targets, sparse gradients,
and argument errors."""
import math
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def initial_values(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def gradient_steps(n_steps=5, seed=1, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(n_steps)]


def make_params(values, device=None):
    return [ms.Parameter(ms.Tensor(v), name=f"p{k}", device=device) for k, v in enumerate(values)]


def run_ours(make_opt, values, steps, device=None):
    params = make_params(values, device)
    opt = make_opt(params)
    for grads in steps:
        assert opt(tuple(ms.Tensor(g, device=device) for g in grads)) is True
    return [p.asnumpy() for p in params], opt


def run_torch(torch, make_opt, values, steps, groups=None):
    params = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    opt = make_opt(params if groups is None else groups(params))
    for grads in steps:
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params]


def assert_all_close(ours, theirs, rtol=2e-5, atol=2e-6):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- parity with torch.optim ----------------------------------------------------------------
SGD_CASES = [
    dict(),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3),
    dict(momentum=0.8, nesterov=True),
    dict(weight_decay=0.05),
    dict(momentum=0.9, dampening=0.5, weight_decay=0.05),
    dict(momentum=0.9, nesterov=True, weight_decay=0.05),
]


@pytest.mark.parametrize("kw", SGD_CASES)
def test_sgd_matches_torch(kw):
    torch = pytest.importorskip("torch")
    values, steps = initial_values(), gradient_steps()
    ours, _ = run_ours(lambda ps: nn.SGD(ps, learning_rate=0.1, **kw), values, steps)
    theirs = run_torch(torch, lambda ps: torch.optim.SGD(ps, lr=0.1, **kw), values, steps)
    assert_all_close(ours, theirs)
    assert not np.allclose(ours[0], values[0])   # the parameters did move


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1),
                                dict(beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.01)])
def test_adam_matches_torch(kw):
    torch = pytest.importorskip("torch")
    values, steps = initial_values(), gradient_steps()
    ours, _ = run_ours(lambda ps: nn.Adam(ps, learning_rate=0.01, **kw), values, steps)
    betas = (kw.get("beta1", 0.9), kw.get("beta2", 0.999))
    theirs = run_torch(torch, lambda ps: torch.optim.Adam(ps, lr=0.01, betas=betas, eps=kw.get("eps", 1e-8),
                                                          weight_decay=kw.get("weight_decay", 0.0)),
                       values, steps)
    assert_all_close(ours, theirs)


@pytest.mark.parametrize("cls,eps,wd", [(nn.AdamW, 1e-8, 1e-2), (nn.AdamWeightDecay, 1e-6, 0.1),
                                         (nn.AdamWeightDecay, 1e-6, 0.0)])
def test_adamw_and_adam_weight_decay_match_torch_adamw(cls, eps, wd):
    torch = pytest.importorskip("torch")
    values, steps = initial_values(), gradient_steps()
    kwargs = {} if cls is nn.AdamW else dict(weight_decay=wd)
    ours, opt = run_ours(lambda ps: cls(ps, learning_rate=0.02, **kwargs), values, steps)
    assert (opt.eps, opt.weight_decay) == (eps, wd)
    theirs = run_torch(torch, lambda ps: torch.optim.AdamW(ps, lr=0.02, eps=eps, weight_decay=wd),
                       values, steps)
    assert_all_close(ours, theirs)


def test_momentum_matches_hand_formula_and_torch():
    torch = pytest.importorskip("torch")
    values, steps = initial_values(dtype=np.float64), gradient_steps(dtype=np.float64)
    for nesterov in (False, True):
        ours, _ = run_ours(lambda ps: nn.Momentum(ps, 0.05, 0.9, weight_decay=0.01, use_nesterov=nesterov),
                           values, steps)
        p, v = [x.copy() for x in values], [np.zeros_like(x) for x in values]
        for grads in steps:
            for k, g in enumerate(grads):
                g = g + 0.01 * p[k]
                v[k] = 0.9 * v[k] + g
                p[k] -= 0.05 * (g + 0.9 * v[k] if nesterov else v[k])
        assert_all_close(ours, p, rtol=1e-12, atol=1e-12)
        theirs = run_torch(torch, lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01,
                                                             nesterov=nesterov), values, steps)
        assert_all_close(ours, theirs, rtol=1e-10, atol=1e-12)


def test_adam_nesterov_matches_hand_formula():
    values, steps = initial_values(dtype=np.float64), gradient_steps(dtype=np.float64)
    ours, _ = run_ours(lambda ps: nn.Adam(ps, 0.01, use_nesterov=True), values, steps)
    p = [x.copy() for x in values]
    m, v = [np.zeros_like(x) for x in values], [np.zeros_like(x) for x in values]
    for t, grads in enumerate(steps, start=1):
        for k, g in enumerate(grads):
            m[k] = 0.9 * m[k] + 0.1 * g
            v[k] = 0.999 * v[k] + 0.001 * g * g
            num = 0.9 * m[k] + 0.1 * g
            p[k] -= 0.01 / (1 - 0.9 ** t) * num / (np.sqrt(v[k]) / math.sqrt(1 - 0.999 ** t) + 1e-8)
    assert_all_close(ours, p, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [lambda ps, ls: nn.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01, loss_scale=ls),
                                  lambda ps, ls: nn.Adam(ps, 0.01, weight_decay=0.01, loss_scale=ls)])
def test_loss_scale_divides_the_gradients(make):
    values, steps = initial_values(dtype=np.float64), gradient_steps(dtype=np.float64)
    plain, _ = run_ours(lambda ps: make(ps, 1.0), values, steps)
    scaled, _ = run_ours(lambda ps: make(ps, 8.0), values, [[g * 8 for g in s] for s in steps])
    assert_all_close(scaled, plain, rtol=1e-12, atol=1e-12)


# ---- parameter groups --------------------------------------------------------------------
def test_groups_with_their_own_lr_and_weight_decay_match_torch():
    torch = pytest.importorskip("torch")
    values, steps = initial_values(), gradient_steps()

    def ours_opt(ps):
        return nn.Adam([{"params": [ps[0], ps[2]], "weight_decay": 0.1},
                        {"params": [ps[1]], "lr": 0.05}, {"order_params": ps}], learning_rate=0.01)

    ours, opt = run_ours(ours_opt, values, steps)
    theirs = run_torch(torch, lambda groups: torch.optim.Adam(groups, lr=0.01),
                       values, steps, groups=lambda ps: [{"params": [ps[0], ps[2]], "weight_decay": 0.1},
                                                         {"params": [ps[1]], "lr": 0.05}])
    assert [p.name for p in opt.parameters] == ["p0", "p1", "p2"]
    assert opt.get_lr() == (0.01, 0.05, 0.01) and opt.is_group_lr
    assert opt.get_lr_parameter(opt.parameters[1]) == 0.05 and opt.get_lr_parameter(2) == 0.01
    assert_all_close(ours, theirs)


def test_order_params_fixes_the_parameter_order():
    ps = make_params(initial_values())
    opt = nn.SGD([{"params": [ps[2]], "weight_decay": 0.1}, {"params": [ps[0], ps[1]]},
                  {"order_params": ps}], learning_rate=0.1)
    assert [p.name for p in opt.parameters] == ["p0", "p1", "p2"]
    before = ps[2].asnumpy()
    opt(tuple(ms.Tensor(np.zeros(s, np.float32)) for s in SHAPES))
    np.testing.assert_allclose(ps[2].asnumpy(), before * (1 - 0.1 * 0.1), rtol=1e-6)   # decay follows p2
    np.testing.assert_array_equal(ps[0].asnumpy(), initial_values()[0])


# ---- learning-rate schedules -------------------------------------------------------------
def test_schedule_cells_match_closed_forms():
    for s in range(12):
        assert nn.ExponentialDecayLR(0.1, 0.9, 4).lr_at(s) == pytest.approx(0.1 * 0.9 ** (s / 4))
        assert nn.ExponentialDecayLR(0.1, 0.9, 4, is_stair=True).lr_at(s) == pytest.approx(0.1 * 0.9 ** (s // 4))
        assert nn.NaturalExpDecayLR(0.1, 0.5, 4).lr_at(s) == pytest.approx(0.1 * math.exp(-0.5 * s / 4))
        assert nn.InverseDecayLR(0.1, 0.5, 4).lr_at(s) == pytest.approx(0.1 / (1 + 0.5 * s / 4))
        p = min(s, 8) / 8
        assert nn.CosineDecayLR(0.01, 0.1, 8).lr_at(s) == pytest.approx(0.01 + 0.045 * (1 + math.cos(math.pi * p)))
        assert nn.PolynomialDecayLR(0.1, 0.01, 8, 2.0).lr_at(s) == pytest.approx(0.09 * (1 - p) ** 2 + 0.01)
        assert nn.WarmUpLR(0.1, 5).lr_at(s) == pytest.approx(0.1 * min(s, 5) / 5)
    grow = nn.PolynomialDecayLR(0.1, 0.0, 4, 1.0, update_decay_steps=True)
    assert grow.lr_at(6) == pytest.approx(0.1 * (1 - 6 / 8))
    out = nn.CosineDecayLR(0.0, 1.0, 4)(ms.Tensor(np.array([2], np.int32)))
    assert isinstance(out, ms.Tensor) and out.dtype == np.float32 and out.asnumpy().item() == pytest.approx(0.5)


def test_list_helpers_match_closed_forms():
    assert nn.piecewise_constant_lr([2, 5, 6], [0.1, 0.05, 0.01]) == [0.1, 0.1, 0.05, 0.05, 0.05, 0.01]
    assert nn.exponential_decay_lr(0.1, 0.5, 6, 2, 2, is_stair=True) == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.05, 0.05])
    assert nn.exponential_decay_lr(0.1, 0.5, 4, 1, 2) == pytest.approx([0.1 * 0.5 ** (e / 2) for e in range(4)])
    assert nn.natural_exp_decay_lr(0.1, 0.5, 3, 1, 1) == pytest.approx([0.1 * math.exp(-0.5 * e) for e in range(3)])
    assert nn.inverse_decay_lr(0.1, 0.5, 3, 1, 1) == pytest.approx([0.1 / (1 + 0.5 * e) for e in range(3)])
    assert nn.cosine_decay_lr(0.0, 1.0, 8, 1, 4) == pytest.approx([0.5 * (1 + math.cos(math.pi * min(e, 4) / 4))
                                                                   for e in range(8)])
    assert nn.warmup_lr(0.2, 5, 1, 4) == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    assert nn.polynomial_decay_lr(0.1, 0.0, 4, 1, 2, 1.0) == pytest.approx([0.1, 0.05, 0.0, 0.0])


def test_list_learning_rate_uses_the_entry_of_the_step_then_the_last_one():
    w = ms.Parameter(ms.Tensor(np.zeros(1, np.float32)), name="w")
    opt = nn.SGD([w], learning_rate=[0.5, 0.25, 0.125])
    seen = []
    for _ in range(5):
        seen.append(opt.get_lr())
        opt((ms.Tensor(np.ones(1, np.float32)),))
    assert seen == [0.5, 0.25, 0.125, 0.125, 0.125] and opt.dynamic_lr
    assert w.asnumpy()[0] == pytest.approx(-sum(seen))
    assert opt.current_step() == 5 and opt.global_step.dtype == np.int32 and opt.global_step.shape == (1,)


def test_schedule_learning_rate_is_called_with_the_global_step():
    w = ms.Parameter(ms.Tensor(np.zeros(1, np.float64)), name="w")
    sched = nn.ExponentialDecayLR(0.1, 0.5, 1)
    opt = nn.Momentum([w], sched, momentum=0.0)
    for _ in range(4):
        opt((ms.Tensor(np.ones(1)),))
    assert w.asnumpy()[0] == pytest.approx(-(0.1 + 0.05 + 0.025 + 0.0125))
    assert opt.get_lr() == pytest.approx(0.1 / 16)

    class ConstructOnly(nn.LearningRateSchedule):   # a user schedule written MindSpore-style
        def construct(self, global_step):
            return ms.Tensor(np.array(0.5, np.float32)) * (global_step.astype(ms.float32) + 1.0)

    assert nn.SGD([w], ConstructOnly()).get_lr() == pytest.approx(0.5)


# ---- state registration -------------------------------------------------------------------
def test_state_parameters_are_named_registered_and_not_optimized():
    net = nn.Dense(3, 2)
    params = net.trainable_params()
    opt = nn.Adam(params, 0.01)
    names = [name for name, _ in opt.parameters_and_names()]
    assert names == ["global_step", "moment1.weight", "moment1.bias", "moment2.weight", "moment2.bias"]
    assert all(p.name == n for n, p in opt.parameters_and_names())
    state_ids = {id(p) for p in opt.get_parameters()}
    assert not state_ids & {id(p) for p in opt.parameters}
    assert list(opt.parameters) == params and opt.trainable_params() == []
    assert opt.moment1[1].shape == (2,) and len(opt.moment2) == 2
    assert [n for n, _ in nn.SGD(params, 0.1, momentum=0.9).parameters_and_names()] == \
        ["global_step", "moments.weight", "moments.bias"]
    assert [n for n, _ in nn.SGD(params, 0.1).parameters_and_names()] == ["global_step"]

    class Trainer(nn.Cell):   # a training cell holding both: each tensor appears once
        def __init__(self):
            super().__init__()
            self.network, self.optimizer = net, opt

    all_names = [n for n, _ in Trainer().parameters_and_names()]
    assert all_names == ["network.weight", "network.bias", "optimizer.global_step",
                         "optimizer.moment1.weight", "optimizer.moment1.bias",
                         "optimizer.moment2.weight", "optimizer.moment2.bias"]


def test_restoring_state_by_name_resumes_identically():
    values, steps = initial_values(), gradient_steps(6)
    make = lambda ps: nn.Adam(ps, 0.01, weight_decay=0.01)   # noqa: E731
    full, _ = run_ours(make, values, steps)
    first, saved = run_ours(make, values, steps[:3])
    params = make_params(first)
    resumed = make(params)
    state = dict(saved.parameters_and_names())
    for name, p in resumed.parameters_and_names():
        p.set_data(state[name])
    for grads in steps[3:]:
        resumed(tuple(ms.Tensor(g) for g in grads))
    assert_all_close([p.asnumpy() for p in params], full, rtol=0, atol=0)


def test_update_one_parameter_at_a_time_then_step_equals_a_full_call():
    values, steps = initial_values(), gradient_steps(3)
    full, _ = run_ours(lambda ps: nn.SGD(ps, 0.1, momentum=0.9, dampening=0.2), values, steps)
    params = make_params(values)
    opt = nn.SGD(params, 0.1, momentum=0.9, dampening=0.2)
    for grads in steps:
        for k in reversed(range(len(params))):        # any order, by index or by Parameter
            opt.update(params[k] if k % 2 else k, ms.Tensor(grads[k]))
        opt.step()
    assert_all_close([p.asnumpy() for p in params], full, rtol=0, atol=0)


def test_none_gradient_leaves_the_parameter_alone():
    params = make_params(initial_values())
    opt = nn.Adam(params, 0.1)
    opt((None, ms.Tensor(np.ones(3, np.float32)), None))
    np.testing.assert_array_equal(params[0].asnumpy(), initial_values()[0])
    assert not np.array_equal(params[1].asnumpy(), initial_values()[1])


def test_steps_reuse_scratch_buffers_instead_of_allocating():
    rng = np.random.default_rng(0)
    params = [ms.Parameter(ms.Tensor(rng.standard_normal((256, 256)).astype(np.float32)), name="w")]
    grads = (ms.Tensor(rng.standard_normal((256, 256)).astype(np.float32)),)
    for opt in (nn.Adam(params, 0.01, weight_decay=0.01), nn.SGD(params, 0.1, momentum=0.9, weight_decay=0.01)):
        opt(grads)
        tracemalloc.start()
        opt(grads)
        opt(grads)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < params[0].nbytes // 8, f"{type(opt).__name__} allocated {peak} bytes in a step"


# ---- update target and placement -----------------------------------------------------------
# ``virtual_gpu`` (python_tests/conftest.py) emulates the GPU and zeroes the byte counters.
@pytest.mark.parametrize("make", [lambda ps: nn.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01),
                                  lambda ps: nn.Adam(ps, 0.01, weight_decay=0.01)])
def test_host_target_for_device_parameters_matches_all_cpu_and_counts_bytes(virtual_gpu, make):
    values, steps = initial_values(), gradient_steps(3)
    expected, _ = run_ours(make, values, steps)
    params = make_params(values, device="GPU")
    opt = make(params)
    assert opt.target == "GPU" and opt.get_parameters().__next__().device.is_host   # global_step
    opt.target = "CPU"
    assert opt.target == "CPU"
    assert all(p.device.is_host for n, p in opt.parameters_and_names())   # state lives on the target
    grads = [tuple(ms.Tensor(g, device="GPU") for g in s) for s in steps]
    ms.reset_transfer_stats()
    for g in grads:
        opt(g)
    stats = ms.transfer_stats()
    nbytes = sum(p.nbytes for p in params)
    assert stats["device_to_host"] == len(steps) * 2 * nbytes   # parameter and gradient, each step
    assert stats["host_to_device"] == len(steps) * nbytes       # the updated parameter back
    assert all(p.device is virtual_gpu for p in params)
    assert_all_close([p.asnumpy() for p in params], expected, rtol=0, atol=0)


def test_default_target_updates_device_parameters_in_place_without_copies(virtual_gpu):
    values, steps = initial_values(), gradient_steps(3)
    expected, _ = run_ours(lambda ps: nn.Adam(ps, 0.01), values, steps)
    params = make_params(values, device="GPU")
    opt = nn.Adam(params, 0.01)
    grads = [tuple(ms.Tensor(g, device="GPU") for g in s) for s in steps]
    ms.reset_transfer_stats()
    for g in grads:
        opt(g)
    assert ms.transfer_stats()["copies"] == 0
    assert opt.moment1[0].device is virtual_gpu
    assert_all_close([p.asnumpy() for p in params], expected, rtol=0, atol=0)


@pytest.mark.host_default
def test_target_validation():
    opt = nn.SGD(make_params(initial_values()), 0.1)
    assert opt.target == "CPU"
    with pytest.raises(ValueError, match=r"target must be one of \['CPU', 'GPU'\], got 'TPU'"):
        opt.target = "TPU"
    with pytest.raises(TypeError, match="target must be a string"):
        opt.target = 0


# ---- sparse gradients ------------------------------------------------------------------------
def row_gradient(device=None):
    rng = np.random.default_rng(3)
    ids = np.array([1, 3, 1, 7, 3, 1], np.int32)
    values = rng.standard_normal((6, 4)).astype(np.float32)
    return ms.RowTensor(ms.Tensor(ids, device=device), ms.Tensor(values, device=device), (10, 4))


@pytest.mark.parametrize("host_kernel", [True, False])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_sgd_row_gradient_updates_only_touched_rows_like_the_dense_gradient(wd, host_kernel, monkeypatch):
    from minitorch_dist.nn.optim import sgd
    if not host_kernel:   # the xp path (what a GPU target runs)
        monkeypatch.setattr(sgd, "_KERNEL", [None])
    elif sgd._host_sparse_sgd() is None:
        pytest.skip("minitorch_dist.kernels.sparse_sgd is not available")
    table = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    grad = row_gradient()
    sparse = ms.Parameter(ms.Tensor(table), name="table")
    dense = ms.Parameter(ms.Tensor(table), name="table")
    for _ in range(2):
        nn.SGD([sparse], 0.1, weight_decay=wd, loss_scale=2.0)((grad,))
        nn.SGD([dense], 0.1, weight_decay=wd, loss_scale=2.0)((grad.to_dense(),))
    touched = [1, 3, 7]
    untouched = [r for r in range(10) if r not in touched]
    np.testing.assert_allclose(sparse.asnumpy()[touched], dense.asnumpy()[touched], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(sparse.asnumpy()[untouched], table[untouched])
    if wd == 0:
        np.testing.assert_allclose(sparse.asnumpy(), dense.asnumpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make", [lambda ps: nn.SGD(ps, 0.1, momentum=0.9),
                                  lambda ps: nn.Momentum(ps, 0.1, 0.9), lambda ps: nn.Adam(ps, 0.01)])
def test_momentum_and_adam_accept_row_gradients_as_dense(make):
    table = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    sparse, dense = ms.Parameter(ms.Tensor(table)), ms.Parameter(ms.Tensor(table))
    opt_sparse, opt_dense = make([sparse]), make([dense])
    for _ in range(3):
        opt_sparse((row_gradient(),))
        opt_dense((row_gradient().to_dense(),))
    np.testing.assert_array_equal(sparse.asnumpy(), dense.asnumpy())


def test_row_gradient_from_the_device_moves_only_its_rows(virtual_gpu):
    table = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    param = ms.Parameter(ms.Tensor(table), name="table", device="CPU")
    grad = row_gradient(device="GPU")
    ms.reset_transfer_stats()
    nn.SGD([param], 0.1)((grad,))
    assert ms.transfer_stats()["device_to_host"] == grad.indices.nbytes + grad.values.nbytes
    assert ms.transfer_stats()["host_to_device"] == 0
    expected = table.copy()
    np.add.at(expected, grad.indices.asnumpy(), -0.1 * grad.values.asnumpy())
    np.testing.assert_allclose(param.asnumpy(), expected, rtol=1e-6, atol=1e-7)


# ---- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("build,match", [
    (lambda ps: nn.SGD(ps, -0.1), r"SGD: learning_rate must be >= 0, got -0.1"),
    (lambda ps: nn.SGD(ps, [0.1, -1.0]), r"learning_rate\[1\] must be >= 0, got -1.0"),
    (lambda ps: nn.SGD(ps, []), r"learning_rate is an empty list"),
    (lambda ps: nn.SGD(ps, 0.1, weight_decay=-1e-4), r"SGD: weight_decay must be >= 0, got -0.0001"),
    (lambda ps: nn.SGD(ps, 0.1, momentum=-0.9), r"SGD: momentum must be >= 0, got -0.9"),
    (lambda ps: nn.SGD(ps, 0.1, nesterov=True), r"nesterov=True needs momentum > 0 and dampening == 0"),
    (lambda ps: nn.SGD(ps, 0.1, momentum=0.9, dampening=0.1, nesterov=True), r"dampening=0.1"),
    (lambda ps: nn.SGD(ps, 0.1, loss_scale=0.0), r"loss_scale must be > 0, got 0.0"),
    (lambda ps: nn.Momentum(ps, 0.1, -0.5), r"Momentum: momentum must be >= 0, got -0.5"),
    (lambda ps: nn.Adam(ps, beta1=1.0), r"Adam: beta1 must be in \[0, 1\), got 1.0"),
    (lambda ps: nn.Adam(ps, beta2=-0.1), r"Adam: beta2 must be in \[0, 1\), got -0.1"),
    (lambda ps: nn.Adam(ps, eps=0.0), r"Adam: eps must be > 0, got 0.0"),
    (lambda ps: nn.AdamW(ps, weight_decay=-1.0), r"AdamW: weight_decay must be >= 0, got -1.0"),
    (lambda ps: nn.SGD([], 0.1), r"parameter list is empty"),
    (lambda ps: nn.SGD([ps[0], ps[0]], 0.1), r"parameter 'p0' appears more than once"),
    (lambda ps: nn.SGD([{"params": ps, "momentum": 0.1}], 0.1), r"group 0 must have key 'params'"),
    (lambda ps: nn.SGD([{"params": ps, "lr": -1.0}], 0.1), r"lr of group 0 must be >= 0, got -1.0"),
    (lambda ps: nn.SGD([{"params": ps[:2]}, {"order_params": ps}], 0.1), r"'order_params' must list"),
])
def test_bad_settings_raise_value_error_naming_the_argument(build, match):
    with pytest.raises(ValueError, match=match):
        build(make_params(initial_values()))


def test_bad_types_raise_type_error():
    ps = make_params(initial_values())
    with pytest.raises(TypeError, match="learning_rate must be a float"):
        nn.SGD(ps, "0.1")
    with pytest.raises(TypeError, match="parameters must be Parameters, got ndarray"):
        nn.SGD([np.zeros(3)], 0.1)
    with pytest.raises(TypeError, match="expects a tuple of gradients"):
        nn.SGD(ps, 0.1)(ms.Tensor(np.zeros(3, np.float32)))


def test_gradients_of_wrong_length_or_shape_raise_naming_the_parameter():
    ps = make_params(initial_values())
    opt = nn.Adam(ps, 0.01)
    good = [ms.Tensor(np.ones(s, np.float32)) for s in SHAPES]
    with pytest.raises(ValueError, match=r"Adam: got 2 gradients for 3 parameters"):
        opt(tuple(good[:2]))
    bad = (good[0], ms.Tensor(np.ones(4, np.float32)), good[2])
    with pytest.raises(ValueError, match=r"gradient 1 has shape \(4,\) but parameter 1 \('p1'\) has shape \(3,\)"):
        opt(bad)
    with pytest.raises(ValueError, match=r"parameter 2 \('p2'\)"):
        opt.update(2, ms.Tensor(np.ones(8, np.float32)))
    assert opt.current_step() == 0
    np.testing.assert_array_equal(ps[0].asnumpy(), initial_values()[0])   # nothing half-applied


def test_bad_schedule_arguments():
    with pytest.raises(ValueError, match=r"ExponentialDecayLR: decay_steps must be >= 1, got 0"):
        nn.ExponentialDecayLR(0.1, 0.9, 0)
    with pytest.raises(ValueError, match=r"CosineDecayLR: min_lr \(0.2\) must be smaller than max_lr \(0.1\)"):
        nn.CosineDecayLR(0.2, 0.1, 10)
    with pytest.raises(TypeError, match=r"WarmUpLR: warmup_steps must be an int"):
        nn.WarmUpLR(0.1, 2.5)
    with pytest.raises(ValueError, match=r"milestone must be strictly increasing"):
        nn.piecewise_constant_lr([3, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"equal length"):
        nn.piecewise_constant_lr([3], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"warmup_lr: learning_rate must be >= 0"):
        nn.warmup_lr(-0.1, 4, 1, 2)


# ---- end to end ---------------------------------------------------------------------------
def test_training_a_dense_layer_with_value_and_grad_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)
    net = nn.Dense(4, 3)
    opt = nn.Adam(net.trainable_params(), 0.05, weight_decay=0.01)
    lin = torch.nn.Linear(4, 3)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(net.weight.asnumpy()))
        lin.bias.copy_(torch.tensor(net.bias.asnumpy()))
    topt = torch.optim.Adam(lin.parameters(), lr=0.05, weight_decay=0.01)
    grad_fn = ms.value_and_grad(lambda a, b: ((net(a) - b) ** 2).mean(), None, opt.parameters)
    losses = []
    for _ in range(5):
        loss, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
        opt(grads)
        losses.append(float(loss.asnumpy()))
        topt.zero_grad()
        ((lin(torch.tensor(x)) - torch.tensor(y)) ** 2).mean().backward()
        topt.step()
    assert losses[-1] < losses[0]
    np.testing.assert_allclose(net.weight.asnumpy(), lin.weight.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net.bias.asnumpy(), lin.bias.detach().numpy(), rtol=1e-4, atol=1e-5)
