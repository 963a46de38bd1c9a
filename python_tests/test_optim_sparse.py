"""Sparse-capable optimizers (FTRL, LazyAdam / Adam(use_lazy=True), ProximalAdagrad) with
``target``: dense and RowTensor paths against an independent NumPy implementation of
MindSpore's formulas, untouched rows bit-identical, host C++ kernels and the device (virtual
GPU) path in agreement, state names and placement, and argument errors.
"""
import math

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import kernels, nn
from minitorch_dist.kernels import reference as ref

SHAPE = (12, 3)
IDS = [np.array([4, 1, 4, 9, 4], np.int64),       # duplicates; most rows untouched
       np.array([1, 7, 7], np.int64),
       np.array([11, 0, 11, 4], np.int64)]        # rows 0 and 11 first touched at step 3


# ---- independent NumPy oracles (float64, MindSpore's formulas, one row at a time) -----------
def merged(ids, values):
    """Duplicate ids summed with a plain dictionary (no np.unique / add.at)."""
    out = {}
    for i, row in zip(ids.tolist(), values):
        out[i] = out[i] + row if i in out else row.astype(np.float64)
    return out


class Oracle:
    """Applies one optimizer's rule to ``rows`` of float64 copies of the parameter and state."""

    def __init__(self, w, loss_scale=1.0, weight_decay=0.0):
        self.w = w.astype(np.float64)
        self.scale, self.wd, self.t = loss_scale, weight_decay, 0

    def step(self, grad):
        """``grad``: a dense array, or ``(ids, values)``."""
        self.t += 1
        if isinstance(grad, tuple):
            items = merged(*grad).items()
        else:
            items = enumerate(grad.astype(np.float64))
        for r, g in items:
            self.row(r, g / self.scale + self.wd * self.w[r])


class LazyAdamOracle(Oracle):
    def __init__(self, w, lr, beta1=0.9, beta2=0.999, eps=1e-8, nesterov=False, **kw):
        super().__init__(w, **kw)
        self.m, self.v = np.zeros_like(self.w), np.zeros_like(self.w)
        self.lr, self.b1, self.b2, self.eps, self.nesterov = lr, beta1, beta2, eps, nesterov

    def row(self, r, g):
        b1, b2 = self.b1, self.b2
        self.m[r] = b1 * self.m[r] + (1 - b1) * g
        self.v[r] = b2 * self.v[r] + (1 - b2) * g * g
        lr_t = self.lr * math.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t)
        num = b1 * self.m[r] + (1 - b1) * g if self.nesterov else self.m[r]
        self.w[r] = self.w[r] - lr_t * num / (np.sqrt(self.v[r]) + self.eps)

    def state(self):
        return {"moment1": self.m, "moment2": self.v}


class FTRLOracle(Oracle):
    def __init__(self, w, lr, initial_accum=0.1, lr_power=-0.5, l1=0.0, l2=0.0, **kw):
        super().__init__(w, **kw)
        self.acc = np.full_like(self.w, initial_accum)
        self.lin = np.zeros_like(self.w)
        self.lr, self.p, self.l1, self.l2 = lr, lr_power, l1, l2

    def row(self, r, g):
        for j in range(self.w.shape[1]):
            new = self.acc[r, j] + g[j] * g[j]
            self.lin[r, j] += g[j] - (new ** -self.p - self.acc[r, j] ** -self.p) / self.lr * self.w[r, j]
            z = self.lin[r, j]
            self.w[r, j] = ((math.copysign(self.l1, z) - z) / (new ** -self.p / self.lr + 2 * self.l2)
                            if abs(z) > self.l1 else 0.0)
            self.acc[r, j] = new

    def state(self):
        return {"moments": self.acc, "linear": self.lin}


class ProximalAdagradOracle(Oracle):
    def __init__(self, w, lr, accum=0.1, l1=0.0, l2=0.0, **kw):
        super().__init__(w, **kw)
        self.acc = np.full_like(self.w, accum)
        self.lr, self.l1, self.l2 = lr, l1, l2

    def row(self, r, g):
        self.acc[r] += g * g
        prox = self.w[r] - self.lr * g / np.sqrt(self.acc[r])
        self.w[r] = np.sign(prox) / (1 + self.lr * self.l2) * np.maximum(np.abs(prox) - self.lr * self.l1, 0)

    def state(self):
        return {"accum": self.acc}


# Each case: (ours, oracle) factories with the same settings.
CASES = {
    "lazy_adam": (lambda ps: nn.LazyAdam(ps, 0.05, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.01,
                                         loss_scale=4.0),
                  lambda w: LazyAdamOracle(w, 0.05, 0.8, 0.95, 1e-6, weight_decay=0.01, loss_scale=4.0)),
    "lazy_adam_nesterov": (lambda ps: nn.LazyAdam(ps, 0.05, use_nesterov=True),
                           lambda w: LazyAdamOracle(w, 0.05, nesterov=True)),
    "adam_use_lazy": (lambda ps: nn.Adam(ps, 0.05, use_lazy=True),
                      lambda w: LazyAdamOracle(w, 0.05)),
    "ftrl": (lambda ps: nn.FTRL(ps, initial_accum=0.5, learning_rate=0.3, l1=0.01, l2=0.02,
                                weight_decay=0.01, loss_scale=2.0),
             lambda w: FTRLOracle(w, 0.3, 0.5, l1=0.01, l2=0.02, weight_decay=0.01, loss_scale=2.0)),
    "ftrl_power": (lambda ps: nn.FTRL(ps, initial_accum=1.0, learning_rate=0.2, lr_power=-0.3, l1=0.5),
                   lambda w: FTRLOracle(w, 0.2, 1.0, lr_power=-0.3, l1=0.5)),
    "proximal_adagrad": (lambda ps: nn.ProximalAdagrad(ps, accum=0.2, learning_rate=0.3, l1=0.05, l2=0.1,
                                                       weight_decay=0.01, loss_scale=2.0),
                         lambda w: ProximalAdagradOracle(w, 0.3, 0.2, 0.05, 0.1, weight_decay=0.01,
                                                         loss_scale=2.0)),
}


def table(dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(dtype)


def sparse_steps(dtype=np.float64, seed=1):
    rng = np.random.default_rng(seed)
    return [(ids, rng.standard_normal((ids.size, SHAPE[1])).astype(dtype)) for ids in IDS]


def row_tensor(ids, values, device=None):
    return ms.RowTensor(ms.Tensor(ids, device=device), ms.Tensor(values, device=device), SHAPE)


def state_of(opt, name):
    return getattr(opt, name)[0].asnumpy()


def tolerance(dtype):
    return dict(rtol=1e-12, atol=1e-13) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)


# ---- dense and sparse paths against the oracle -------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_dense_gradients_match_numpy(case, dtype):
    make, make_oracle = CASES[case]
    w0 = table(dtype)
    param = ms.Parameter(ms.Tensor(w0), name="w")
    opt, oracle = make([param]), make_oracle(w0)
    rng = np.random.default_rng(5)
    for _ in range(3):
        g = rng.standard_normal(SHAPE).astype(dtype)
        assert opt((ms.Tensor(g),)) is True
        oracle.step(g)
    np.testing.assert_allclose(param.asnumpy(), oracle.w, **tolerance(dtype))
    for name, expected in oracle.state().items():
        np.testing.assert_allclose(state_of(opt, name), expected, **tolerance(dtype))


PATHS = ["host_cpp", "host_twin", "device", "host_target_for_device_params"]


def run_sparse(case, path, dtype, monkeypatch, steps):
    """Parameters placed and target set as ``path`` says; returns (param, optimizer)."""
    make = CASES[case][0]
    if path == "host_twin":   # the NumPy twins in place of the C++ kernels
        for name in ("lazy_adam", "ftrl", "proximal_adagrad"):
            monkeypatch.setattr(kernels, name, getattr(ref, name))
    device = "GPU" if path in ("device", "host_target_for_device_params") else "CPU"
    param = ms.Parameter(ms.Tensor(table(dtype), device=device), name="w")
    opt = make([param])
    if path == "host_target_for_device_params":
        opt.target = "CPU"
    for ids, values in steps:
        opt((row_tensor(ids, values, device=device),))
    return param, opt


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_row_gradients_match_numpy_and_leave_other_rows_alone(case, path, monkeypatch, request):
    if path != "host_cpp" and path != "host_twin":
        request.getfixturevalue("virtual_gpu")
    elif path == "host_cpp" and not kernels.HAVE_CPP:
        pytest.skip("the C++ extension was not built")
    steps = sparse_steps()
    param, opt = run_sparse(case, path, np.float64, monkeypatch, steps)
    oracle = CASES[case][1](table())
    for step in steps:
        oracle.step(step)
    np.testing.assert_allclose(param.asnumpy(), oracle.w, **tolerance(np.float64))
    untouched = sorted(set(range(SHAPE[0])) - set(np.concatenate(IDS).tolist()))
    np.testing.assert_array_equal(param.asnumpy()[untouched], table()[untouched])   # bit-identical
    fresh = CASES[case][0]([ms.Parameter(ms.Tensor(table()), name="w")])
    for name, expected in oracle.state().items():
        got = state_of(opt, name)
        np.testing.assert_allclose(got, expected, **tolerance(np.float64))
        np.testing.assert_array_equal(got[untouched], state_of(fresh, name)[untouched])
    assert int(opt.global_step.asnumpy()[0]) == len(steps)


@pytest.mark.parametrize("case", sorted(CASES))
def test_host_cpp_and_device_paths_agree(case, virtual_gpu, monkeypatch):
    """float32: the C++ kernels and the array-module path run the same operations in the
    same order, so dense and sparse steps give the same bits (pow aside)."""
    steps = sparse_steps(np.float32)
    runs = {}
    for path in ("host_cpp", "device"):
        param, opt = run_sparse(case, path, np.float32, monkeypatch, steps)
        dense = np.random.default_rng(9).standard_normal(SHAPE).astype(np.float32)
        opt((ms.Tensor(dense, device=param.device),))
        opt((row_tensor(*steps[0], device=param.device),))
        runs[path] = [param.asnumpy()] + [state_of(opt, n) for n in CASES[case][1](table()).state()]
    for host, device in zip(runs["host_cpp"], runs["device"]):
        if case == "ftrl_power":   # pow may differ in the last bit between libm and NumPy
            np.testing.assert_allclose(host, device, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(host, device)


def test_duplicate_ids_equal_their_merged_gradient():
    ids, values = np.array([3, 3, 3, 5]), np.arange(12, dtype=np.float64).reshape(4, 3)
    merged_ids, merged_values = np.array([3, 5]), np.stack([values[:3].sum(0), values[3]])
    for case in ("lazy_adam", "ftrl", "proximal_adagrad"):
        results = []
        for i, v in ((ids, values), (merged_ids, merged_values)):
            p = ms.Parameter(ms.Tensor(table()), name="w")
            CASES[case][0]([p])((row_tensor(i, v),))
            results.append(p.asnumpy())
        np.testing.assert_array_equal(results[0], results[1])


def test_lazy_adam_touched_rows_equal_dense_adam_in_fused_form():
    """On rows that every step touches, lazy and dense updates coincide."""
    ids = np.array([2, 5, 2])
    rng = np.random.default_rng(4)
    sparse, dense = (ms.Parameter(ms.Tensor(table()), name="w") for _ in range(2))
    opt_s, opt_d = nn.LazyAdam([sparse], 0.1), nn.Adam([dense], 0.1, use_lazy=True)
    for _ in range(3):
        values = rng.standard_normal((3, 3))
        grad = row_tensor(ids, values)
        opt_s((grad,))
        opt_d((grad.to_dense(),))
    np.testing.assert_allclose(sparse.asnumpy()[[2, 5]], dense.asnumpy()[[2, 5]], rtol=1e-12)


def test_step_count_is_per_optimizer_and_beta_powers_follow_it():
    p = ms.Parameter(ms.Tensor(table()), name="w")
    opt = nn.LazyAdam([p], 0.1, beta1=0.5, beta2=0.75)
    oracle = LazyAdamOracle(table(), 0.1, 0.5, 0.75)
    for ids in ([0], [0], [3]):   # row 3 is first touched at t = 3: its bias correction uses t = 3
        values = np.ones((1, 3))
        opt((row_tensor(np.array(ids), values),))
        oracle.step((np.array(ids), values))
    np.testing.assert_allclose(p.asnumpy(), oracle.w, rtol=1e-12)
    assert opt.beta1_power.asnumpy().tolist() == [0.125] and opt.beta2_power.asnumpy().tolist() == [0.421875]
    assert opt.beta1_power.device.is_host and opt.beta1_power.dtype == ms.float32


# ---- state, names, target ------------------------------------------------------------------
def names(opt):
    return [n for n, _ in opt.parameters_and_names()]


def test_state_names_follow_mindspore():
    ps = [ms.Parameter(ms.Tensor(table()), name="emb"), ms.Parameter(ms.Tensor(np.ones(3)), name="b")]
    assert names(nn.FTRL(ps)) == ["global_step", "moments.emb", "moments.b", "linear.emb", "linear.b"]
    lazy = ["global_step", "beta1_power", "beta2_power", "moment1.emb", "moment1.b", "moment2.emb",
            "moment2.b"]
    assert names(nn.LazyAdam(ps)) == lazy and names(nn.Adam(ps, use_lazy=True)) == lazy
    assert names(nn.Adam(ps)) == ["global_step", "moment1.emb", "moment1.b", "moment2.emb", "moment2.b"]
    assert names(nn.ProximalAdagrad(ps)) == ["global_step", "accum.emb", "accum.b"]
    ftrl = nn.FTRL(ps, initial_accum=0.25)
    assert (ftrl.moments[0].asnumpy() == 0.25).all() and not ftrl.linear[1].asnumpy().any()
    assert (nn.ProximalAdagrad(ps, accum=0.5).accum[0].asnumpy() == 0.5).all()
    assert nn.LazyAdam(ps).supports_sparse and not nn.Adam(ps).supports_sparse


@pytest.mark.parametrize("case", ["lazy_adam", "ftrl", "proximal_adagrad"])
def test_setting_target_after_construction_moves_the_state(case, virtual_gpu):
    """The seeds' pattern: build the optimizer, then ``optimizer.target = "CPU"``."""
    param = ms.Parameter(ms.Tensor(table(np.float32), device="GPU"), name="w")
    opt = CASES[case][0]([param])
    state = list(CASES[case][1](table()).state())
    assert opt.target == "GPU" and all(getattr(opt, n)[0].device is virtual_gpu for n in state)
    opt.target = "CPU"
    assert opt.target == "CPU" and all(getattr(opt, n)[0].device.is_host for n in state)
    ids, values = sparse_steps(np.float32)[0]
    grad = row_tensor(ids, values, device="GPU")
    ms.reset_transfer_stats()
    opt((grad,))
    # the gradient crosses as its rows; the table goes to the host and back
    assert ms.transfer_stats()["device_to_host"] == grad.indices.nbytes + grad.values.nbytes + param.nbytes
    assert ms.transfer_stats()["host_to_device"] == param.nbytes
    assert param.device is virtual_gpu
    opt.target = "GPU"
    assert all(getattr(opt, n)[0].device is virtual_gpu for n in state)


def test_host_table_updated_in_place_from_a_device_row_gradient(virtual_gpu):
    """A host-resident embedding table: only the gradient's rows move, nothing comes back."""
    param = ms.Parameter(ms.Tensor(table(np.float32)), name="embedding_table", device="CPU")
    before = param.data
    opt = nn.FTRL([param], learning_rate=0.1)
    opt.target = "CPU"
    grad = row_tensor(*sparse_steps(np.float32)[0], device="GPU")
    ms.reset_transfer_stats()
    opt((grad,))
    assert ms.transfer_stats()["host_to_device"] == 0
    assert ms.transfer_stats()["device_to_host"] == grad.indices.nbytes + grad.values.nbytes
    assert param.data is before and param.device.is_host


def test_embedding_lookup_on_the_host_trains_with_sparse_optimizers():
    emb = nn.EmbeddingLookup(20, 4, target="CPU")
    start = emb.embedding_table.asnumpy().copy()
    ids = ms.Tensor(np.array([[1, 5, 1], [7, 5, 5]], np.int32))
    grad_fn = ms.value_and_grad(lambda x: (emb(x) * emb(x)).sum(), None, emb.trainable_params())
    for opt in (nn.LazyAdam(emb.trainable_params(), 0.01), nn.FTRL(emb.trainable_params(), learning_rate=0.1)):
        opt.target = "CPU"
        _, (grad,) = grad_fn(ids)
        assert isinstance(grad, ms.RowTensor)
        opt((grad,))
    table_now = emb.embedding_table.asnumpy()
    untouched = [r for r in range(20) if r not in (1, 5, 7)]
    np.testing.assert_array_equal(table_now[untouched], start[untouched])
    assert not np.array_equal(table_now[[1, 5, 7]], start[[1, 5, 7]])


def test_adam_without_use_lazy_is_unchanged_and_densifies_row_gradients():
    ids, values = sparse_steps()[0]
    a, b = (ms.Parameter(ms.Tensor(table()), name="w") for _ in range(2))
    nn.Adam([a], 0.1)((row_tensor(ids, values),))
    nn.Adam([b], 0.1)((row_tensor(ids, values).to_dense(),))
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


# ---- bad input -------------------------------------------------------------------------------
def one_param():
    return [ms.Parameter(ms.Tensor(table()), name="w")]


@pytest.mark.parametrize("build,error,match", [
    (lambda ps: nn.FTRL(ps, learning_rate=[0.1, 0.2]), ValueError, r"FTRL: learning_rate must be one float"),
    (lambda ps: nn.FTRL(ps, learning_rate=nn.ExponentialDecayLR(0.1, 0.9, 10)), ValueError, "one float"),
    (lambda ps: nn.FTRL([{"params": ps, "lr": 0.5}]), ValueError, "per-group learning rates"),
    (lambda ps: nn.FTRL(ps, learning_rate=0.0), ValueError, r"FTRL: learning_rate must be > 0, got 0.0"),
    (lambda ps: nn.FTRL(ps, lr_power=0.5), ValueError, r"FTRL: lr_power must be <= 0, got 0.5"),
    (lambda ps: nn.FTRL(ps, initial_accum=-1.0), ValueError, r"FTRL: initial_accum must be >= 0, got -1.0"),
    (lambda ps: nn.FTRL(ps, l1=-0.1), ValueError, r"FTRL: l1 must be >= 0"),
    (lambda ps: nn.FTRL(ps, l2="big"), TypeError, r"FTRL: l2 must be a number, got str"),
    (lambda ps: nn.LazyAdam(ps, beta1=1.0), ValueError, r"LazyAdam: beta1 must be in \[0, 1\), got 1.0"),
    (lambda ps: nn.LazyAdam(ps, eps=0.0), ValueError, r"LazyAdam: eps must be > 0"),
    (lambda ps: nn.ProximalAdagrad(ps, accum=-0.1), ValueError, r"ProximalAdagrad: accum must be >= 0"),
    (lambda ps: nn.ProximalAdagrad(ps, l2=-1.0), ValueError, r"ProximalAdagrad: l2 must be >= 0"),
])
def test_bad_settings_are_clear_errors(build, error, match):
    with pytest.raises(error, match=match):
        build(one_param())


@pytest.mark.host_default
@pytest.mark.parametrize("case", ["lazy_adam", "ftrl", "proximal_adagrad"])
def test_bad_target_is_a_clear_error(case):
    opt = CASES[case][0](one_param())
    with pytest.raises(ValueError, match=r"target must be one of \['CPU', 'GPU'\], got 'Ascend'"):
        opt.target = "Ascend"
    with pytest.raises(TypeError, match="target must be a string"):
        opt.target = None
    assert opt.target == "CPU"


@pytest.mark.host_default
def test_gpu_target_without_a_gpu_is_a_clear_error(no_gpu):
    opt = nn.FTRL(one_param())
    with pytest.raises(Exception, match="no GPU is available"):
        opt.target = "GPU"


@pytest.mark.parametrize("path", ["host", "device"])
@pytest.mark.parametrize("case", ["lazy_adam", "ftrl", "proximal_adagrad"])
def test_out_of_range_row_ids_raise_and_change_nothing(case, path, request):
    device = "CPU"
    if path == "device":
        request.getfixturevalue("virtual_gpu")
        device = "GPU"
    param = ms.Parameter(ms.Tensor(table(), device=device), name="w")
    opt = CASES[case][0]([param])
    for bad in (12, -1):
        grad = row_tensor(np.array([1, bad]), np.ones((2, 3)), device=device)
        with pytest.raises(IndexError, match=f"id {bad} is out of range for a table of 12 rows"):
            opt((grad,))
    np.testing.assert_array_equal(param.asnumpy(), table())


def test_row_gradient_with_the_wrong_dense_shape_is_rejected():
    grad = ms.RowTensor(ms.Tensor(np.array([1])), ms.Tensor(np.ones((1, 2))), (12, 2))
    expected = r"FTRL: gradient 0 has shape \(12, 2\) but parameter 0 \('w'\) has shape \(12, 3\)"
    with pytest.raises(ValueError, match=expected):
        nn.FTRL(one_param())((grad,))


# ---- the fused host kernels ----------------------------------------------------------------
@pytest.fixture(scope="module")
def cpp():
    pytest.importorskip("minitorch_dist._C")
    from minitorch_dist.kernels import native
    return native


def kernel_problem(dtype, rows=40, width=5, n=60, seed=0):
    rng = np.random.default_rng(seed)
    param = rng.standard_normal((rows, width)).astype(dtype)
    ids = rng.integers(0, rows, n)
    ids[1] = ids[0]
    return param, ids, rng.standard_normal((n, width)).astype(dtype)


def run_kernel(module, name, dtype, problem):
    param, ids, grads = (a.copy() for a in problem)
    state = [np.abs(np.random.default_rng(7 + k).standard_normal(param.shape)).astype(dtype) for k in range(2)]
    if name == "lazy_adam_nesterov":
        module.lazy_adam(param, *state, ids, grads, 0.01, 0.9, 0.99, 1e-7, 3, 0.01, True)
    elif name == "ftrl_decay":
        module.ftrl(param, *state, ids, grads, 0.1, 0.01, 0.02, -0.5, 0.05)
    else:
        module.proximal_adagrad(param, state[0], ids, grads, 0.1, 0.01, 0.02, 0.05)
    return [param] + state


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["lazy_adam_nesterov", "ftrl_decay", "proximal_adagrad"])
def test_cpp_kernels_equal_their_numpy_twins(cpp, name, dtype):
    problem = kernel_problem(dtype)
    got, want = run_kernel(cpp, name, dtype, problem), run_kernel(ref, name, dtype, problem)
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-14)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, **tol)


def test_proximal_adagrad_kernel_zero_accumulator_and_gradient(cpp):
    for module in (cpp, ref):
        w, acc = np.array([[1.0, -2.0]]), np.zeros((1, 2))
        module.proximal_adagrad(w, acc, np.array([0]), np.array([[0.0, 0.0]]), 0.5, l1=0.2, l2=1.0)
        np.testing.assert_allclose(w, [[0.9 / 1.5, -1.9 / 1.5]])   # sign(w)*(|w| - 0.1)/1.5, no NaN
    with pytest.raises(ValueError, match="lr must be >= 0"):
        ref.proximal_adagrad(w, acc, np.array([0]), np.array([[0.0, 0.0]]), -0.5)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        cpp.proximal_adagrad(w, acc, np.array([0]), np.array([[0.0, 0.0]]), -0.5)


@pytest.mark.parametrize("name", ["lazy_adam_nesterov", "ftrl_decay", "proximal_adagrad"])
def test_multithreaded_kernels_are_bit_identical_to_one_thread(cpp, name):
    problem = kernel_problem(np.float32, rows=3000, width=64, n=4000, seed=3)   # ~190k elements
    results = []
    try:
        for threads in (1, 3, 0):
            cpp.set_sparse_threads(threads)
            results.append(run_kernel(cpp, name, np.float32, problem))
    finally:
        cpp.set_sparse_threads(0)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        cpp.set_sparse_threads(-2)
