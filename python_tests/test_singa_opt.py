"""SINGA's optimizers without a Model, its adaptive rules and schedules, and DistOpt bound
from the tape.

* ``sgd(loss)``, ``sgd.backward_and_update(loss)`` and ``sgd.update(p, g)`` train bare
  ``Tensor(..., stores_grad=True)`` parameters (SINGA's ``examples/mlp/native.py``), with
  SINGA's momentum rule, checked against a closed form;
* ``opt.Adam`` equals ``torch.optim.Adam``; ``opt.RMSProp`` and ``opt.AdaGrad`` equal their
  closed forms (SINGA puts epsilon inside the square root);
* ``opt.ExponentialDecay`` and ``opt.Constant`` drive the learning rate by SINGA's step count;
* ``opt.DistOpt`` with no model, on two in-process ranks, finds the parameters on the tape
  and equals one process on the whole batch;
* a second set of parameters gets its own optimizer state (SINGA keys state by
  parameter); a bound ``DistOpt`` refuses it, clearly.
"""
import numpy as np
import pytest

from minitorch_dist.communication import run_ranks
from minitorch_dist.singa import autograd, opt, tensor

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def training_on():
    autograd.training = True
    yield
    autograd.training = False


def P(array, name):
    return tensor.Tensor(data=np.asarray(array, np.float32), stores_grad=True, name=name)


def mlp_loss(params, x, labels):
    h = autograd.relu(autograd.add_bias(autograd.matmul(x, params["w0"]), params["b0"]))
    out = autograd.add_bias(autograd.matmul(h, params["w1"]), params["b1"])
    return autograd.softmax_cross_entropy(out, labels)


def native_mlp(seed=0):
    r = np.random.default_rng(seed)
    return {"w0": P(r.normal(0, 0.5, (2, 3)), "w0"), "b0": P(np.zeros(3), "b0"),
            "w1": P(r.normal(0, 0.5, (3, 2)), "w1"), "b1": P(np.zeros(2), "b1")}


def data(seed=1, n=8):
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, 2)).astype(np.float32)
    return tensor.from_numpy(x), tensor.from_numpy((x[:, 0] > x[:, 1]).astype(np.int32))


def torch_mlp(params):
    return {k: torch.tensor(v.asnumpy().copy(), requires_grad=True) for k, v in params.items()}


def torch_loss(tp, x, labels):
    h = torch.relu(torch.tensor(x.asnumpy()) @ tp["w0"] + tp["b0"])
    return torch.nn.functional.cross_entropy(h @ tp["w1"] + tp["b1"],
                                             torch.tensor(labels.asnumpy()).long())


def test_sgd_without_a_model_trains_bare_tensors_with_singas_momentum_rule():
    params = native_mlp()
    tp = torch_mlp(params)
    x, y = data()
    sgd = opt.SGD(lr=0.05, momentum=0.8, dampening=0.1, weight_decay=0.01)
    buffers = {k: torch.zeros_like(v) for k, v in tp.items()}
    losses = []
    for step in range(5):
        loss = mlp_loss(params, x, y)
        losses.append(float(tensor.to_numpy(loss)[0]))
        if step % 2:
            sgd.backward_and_update(loss)          # SINGA's deprecated alias
        else:
            sgd(loss)
        tl = torch_loss(tp, x, y)
        tl.backward()
        with torch.no_grad():
            for k, p in tp.items():           # SINGA: g += wd p; v = m v + (1 - d) g; p -= lr v
                g = p.grad + 0.01 * p
                buffers[k] = 0.8 * buffers[k] + 0.9 * g
                p -= 0.05 * buffers[k]
                p.grad = None
        assert abs(losses[-1] - tl.item()) < 1e-5
    for k in params:     # the user's own tensors were updated in place
        assert np.abs(params[k].asnumpy() - tp[k].detach().numpy()).max() < 1e-5
    assert sgd.step_counter == 5 and losses[-1] < losses[0]


def test_update_and_apply_take_any_trainable_tensor():
    w = P([1.0, 2.0], "w")
    sgd = opt.SGD(lr=0.5, momentum=0.5)
    sgd.update(w, tensor.from_numpy(np.array([1.0, 1.0], np.float32)))
    sgd.step()
    sgd.apply("w", w, tensor.from_numpy(np.array([1.0, 1.0], np.float32)))
    # v1 = 1, p = [0.5, 1.5]; v2 = 0.5 * 1 + 1 = 1.5, p = [-0.25, 0.75]
    assert np.allclose(w.asnumpy(), [-0.25, 0.75])


def _train(optimizer, steps=4):
    params = native_mlp()
    x, y = data()
    start = {k: v.asnumpy().copy() for k, v in params.items()}
    grads = []
    for _ in range(steps):
        loss = mlp_loss(params, x, y)
        snapshot = {k: v.asnumpy().copy() for k, v in params.items()}
        tp = {k: torch.tensor(v, requires_grad=True) for k, v in snapshot.items()}
        torch_loss(tp, x, y).backward()
        grads.append({k: v.grad.numpy() for k, v in tp.items()})
        optimizer(loss)
    return start, grads, {k: v.asnumpy() for k, v in params.items()}


def test_adam_equals_torch_adam():
    start, _, end = _train(opt.Adam(lr=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-6,
                                    weight_decay=0.01))
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
    ref = torch.optim.Adam(tp.values(), lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01)
    x, y = data()
    for _ in range(4):
        ref.zero_grad()
        torch_loss(tp, x, y).backward()
        ref.step()
    for k in end:
        assert np.abs(end[k] - tp[k].detach().numpy()).max() < 1e-5, k


@pytest.mark.parametrize("kind", ["RMSProp", "AdaGrad"])
def test_rmsprop_and_adagrad_follow_singas_closed_forms(kind):
    rule = opt.RMSProp(lr=0.01, rho=0.8, epsilon=1e-6, weight_decay=0.01) if kind == "RMSProp" \
        else opt.AdaGrad(lr=0.05, epsilon=1e-6, weight_decay=0.01)
    start, grads, end = _train(rule)
    p = {k: v.astype(np.float64) for k, v in start.items()}
    state = {k: np.zeros_like(v) for k, v in p.items()}
    for g_step in grads:      # the gradients were taken at the facade's own iterates
        for k in p:
            g = g_step[k] + 0.01 * p[k]
            if kind == "RMSProp":
                state[k] = 0.8 * state[k] + 0.2 * g * g
                p[k] = p[k] - 0.01 * g / np.sqrt(state[k] + 1e-6)
            else:
                state[k] = state[k] + g * g
                p[k] = p[k] - 0.05 * g / np.sqrt(state[k] + 1e-6)
    for k in end:
        assert np.abs(end[k] - p[k]).max() < 1e-5, k


def test_learning_rate_schedules_follow_the_step_count():
    w = P([0.0], "w")
    one = tensor.from_numpy(np.array([1.0], np.float32))
    sgd = opt.SGD(lr=opt.ExponentialDecay(0.5, 2, 0.5, staircase=True))
    moved = []
    for _ in range(5):
        before = float(w.asnumpy()[0])
        sgd.update(w, one)
        sgd.step()
        moved.append(round(before - float(w.asnumpy()[0]), 6))
    assert moved == [0.5, 0.5, 0.25, 0.25, 0.125]
    sgd = opt.SGD(lr=opt.Constant(0.1))
    sgd.update(w, one)
    sgd.step()
    sgd.update(w, one)
    assert np.isclose(float(w.asnumpy()[0]), -1.625 - 0.2)


def test_dist_opt_without_a_model_binds_from_the_tape_and_equals_one_process():
    x, y = data(n=8)
    xs, ys = x.asnumpy(), y.asnumpy()

    def train(comm):
        params = native_mlp()
        sgd = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), communicator=comm)
        lo = 4 * comm.rank
        for _ in range(3):
            loss = mlp_loss(params, tensor.from_numpy(xs[lo:lo + 4]),
                            tensor.from_numpy(ys[lo:lo + 4]))
            sgd.backward_and_update(loss, threshold=3)
        return {k: v.asnumpy() for k, v in params.items()}

    ranks = run_ranks(2, train)
    params = native_mlp()
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    for _ in range(3):
        sgd(mlp_loss(params, x, y))    # mean over 8 = the average of two means over 4
    for k, v in params.items():
        assert np.abs(ranks[0][k] - v.asnumpy()).max() <= 1e-6
        assert np.array_equal(ranks[0][k], ranks[1][k])


def test_dist_opt_warns_when_unsynchronised_ranks_are_bound_late():
    def train(comm):
        params = native_mlp(seed=comm.rank)          # different values on each rank
        sgd = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
        x, y = data()
        sgd(mlp_loss(params, x, y))
        return {k: v.asnumpy() for k, v in params.items()}

    with pytest.warns(RuntimeWarning, match="rank 0's values were copied"):
        r0, r1 = run_ranks(2, train)
    assert all(np.array_equal(r0[k], r1[k]) for k in r0)


def test_a_second_set_of_parameters_gets_its_own_state_but_dist_opt_refuses_it():
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    x, y = data()
    first, second = native_mlp(), native_mlp()
    for _ in range(2):                 # SINGA keys state by parameter: both sets train alike
        sgd(mlp_loss(first, x, y))
        sgd(mlp_loss(second, x, y))
    assert all(np.array_equal(first[k].asnumpy(), second[k].asnumpy()) for k in first)
    assert not np.array_equal(first["w0"].asnumpy(), native_mlp()["w0"].asnumpy())

    def train(comm):
        dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
        dist(mlp_loss(native_mlp(), x, y))
        with pytest.raises(RuntimeError, match=r"opt.DistOpt\(loss\): the loss depends on a "
                                               r"trainable tensor 'b1' \(2,\) that this "
                                               "optimizer was not bound to"):
            dist(mlp_loss(native_mlp(), x, y))

    run_ranks(2, train)


@pytest.mark.parametrize("call, error, message", [
    (lambda: opt.Adam(beta_1=1.0), ValueError, r"opt.Adam: beta_1 must be in \[0, 1\)"),
    (lambda: opt.Adam(epsilon=-1), ValueError, "opt.Adam: epsilon"),
    (lambda: opt.RMSProp(rho=2), ValueError, r"opt.RMSProp: rho must be in \[0, 1\]"),
    (lambda: opt.AdaGrad(lr="x"), ValueError, "opt.AdaGrad: lr"),
    (lambda: opt.SGD()(tensor.from_numpy(np.ones(1, np.float32))), ValueError,
     r"opt.SGD\(loss\): the loss does not depend"),
    (lambda: opt.SGD()([1.0]), TypeError, r"opt.SGD\(loss\): expected the loss Tensor"),
    (lambda: opt.SGD(dtype=tensor.float16)(autograd.reduce_sum(P([1.0], "w"), None, 0)),
     TypeError, r"opt.SGD\(dtype=float16\): parameter 'w' is float32"),
])
def test_bad_optimizer_arguments_name_the_singa_call(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("method, kwargs", [
    ("backward_and_update_half", {}), ("backward_and_partial_update", {}),
    ("backward_and_sparse_update", {"topK": True, "spars": 0.5}),
    ("backward_and_sparse_update", {"topK": False, "spars": 1e-3})])
def test_every_dist_opt_variant_runs_without_a_model(method, kwargs):
    x, y = data(n=8)
    xs, ys = x.asnumpy(), y.asnumpy()

    def train(comm):
        params = native_mlp()
        start = {k: v.asnumpy().copy() for k, v in params.items()}
        sgd = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), communicator=comm)
        lo = 4 * comm.rank
        for _ in range(3):
            loss = mlp_loss(params, tensor.from_numpy(xs[lo:lo + 4]),
                            tensor.from_numpy(ys[lo:lo + 4]))
            getattr(sgd, method)(loss, **kwargs)
        assert len(sgd.parameters) == 4
        return start, {k: v.asnumpy() for k, v in params.items()}

    for start, end in run_ranks(2, train):
        assert all(np.isfinite(end[k]).all() for k in end)
        assert all(not np.array_equal(start[k], end[k]) for k in ("w0", "w1")), method
