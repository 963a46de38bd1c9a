"""Activation primitives: ReLU, Sigmoid, Tanh, GeLU, Softmax, LogSoftmax."""
import math
import warnings

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.ops.primitive import Primitive
from minitorch_dist.testing import check_gradients


class StridedView(Primitive):
    """Test helper: ``x[:, ::2].T``, a non-contiguous view, with its exact backward."""

    def forward(self, ctx, x):
        ctx.shape = x.shape
        return x[:, ::2].T

    def backward(self, ctx, g):
        gx = ctx.xp.zeros(ctx.shape, g.dtype)
        gx[:, ::2] = g.T
        return (gx,)


strided = StridedView()
rng = np.random.default_rng(11)

_erfc = np.vectorize(math.erfc)


def ref_gelu(x):
    return x * 0.5 * _erfc(-x / math.sqrt(2.0))


def ref_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_log_softmax(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def away_from_zero(shape):
    return rng.uniform(0.1, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


# name, functional, NumPy float64 reference, rtol of the forward check
UNARY = [
    ("relu", ops.relu, lambda x: np.maximum(x, 0), 0),
    ("sigmoid", ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 1e-14),
    ("tanh", ops.tanh, np.tanh, 1e-14),
    ("gelu", ops.gelu, ref_gelu, 2e-7),      # erfc fit: relative error below 1.2e-7
    ("gelu_tanh", lambda x: ops.gelu(x, approximate=True), ref_gelu_tanh, 1e-13),
]
UNARY_IDS = [c[0] for c in UNARY]
CLASSES = {"relu": ops.ReLU(), "sigmoid": ops.Sigmoid(), "tanh": ops.Tanh(), "gelu": ops.GeLU(),
           "gelu_tanh": ops.GeLU(approximate="tanh")}


@pytest.mark.parametrize("name, fn, ref, rtol", UNARY, ids=UNARY_IDS)
def test_unary_forward_matches_numpy(name, fn, ref, rtol):
    x = rng.uniform(-4, 4, size=(3, 7))
    np.testing.assert_allclose(fn(ms.Tensor(x)).asnumpy(), ref(x), rtol=rtol, atol=1e-300)
    np.testing.assert_allclose(CLASSES[name](ms.Tensor(x)).asnumpy(), ref(x), rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("name, fn, ref, rtol", UNARY, ids=UNARY_IDS)
def test_unary_gradients(name, fn, ref, rtol):
    check_gradients(fn, away_from_zero((3, 4)))


@pytest.mark.parametrize("name, fn, ref, rtol", UNARY, ids=UNARY_IDS)
def test_unary_gradients_of_non_contiguous_input(name, fn, ref, rtol):
    x = away_from_zero((3, 8))
    np.testing.assert_allclose(fn(strided(ms.Tensor(x))).asnumpy(), ref(x[:, ::2].T), rtol=rtol)
    check_gradients(lambda t: fn(strided(t)), x)


def test_relu_gradient_at_zero_is_zero():
    t = ms.Tensor([-1.0, 0.0, 2.0], requires_grad=True)
    ops.relu(t).sum().backward()
    assert t.grad.tolist() == [0.0, 0.0, 1.0]


def test_gelu_exact_is_precise_over_a_wide_range_including_the_tail():
    x = np.concatenate([np.linspace(-12, 8, 2001), [0.0, 1e-8, -1e-8]])
    got = ops.gelu(ms.Tensor(x)).asnumpy()
    want = ref_gelu(x)
    nonzero = want != 0
    assert np.max(np.abs(got[nonzero] / want[nonzero] - 1)) < 2e-7
    assert got[~nonzero].tolist() == [0.0] * int((~nonzero).sum())


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="approximate"):
        ops.GeLU(approximate="fast")
    with pytest.raises(ValueError, match="approximate"):
        ops.gelu(ms.Tensor([1.0]), approximate="fast")


def test_sigmoid_and_softmaxes_stay_finite_for_huge_inputs():
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        sig = ops.sigmoid(ms.Tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])).asnumpy()
        sm = ops.softmax(ms.Tensor([[1000.0, 1000.0, -1000.0]])).asnumpy()
        lsm = ops.log_softmax(ms.Tensor([[0.0, -1000.0]])).asnumpy()
    np.testing.assert_allclose(sig, [0.0, 1.9287498e-22, 0.5, 1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(sm, [[0.5, 0.5, 0.0]], atol=1e-30)
    np.testing.assert_allclose(lsm, [[0.0, -1000.0]], rtol=1e-6)


@pytest.mark.parametrize("shape, axis", [((4, 5), -1), ((4, 5), 0), ((2, 3, 4), 1), ((6,), 0)])
@pytest.mark.parametrize("which", ["softmax", "log_softmax"])
def test_softmax_forward_and_gradients(which, shape, axis):
    fn = getattr(ops, which)
    ref = ref_softmax if which == "softmax" else ref_log_softmax
    x = rng.normal(scale=2.0, size=shape)
    np.testing.assert_allclose(fn(ms.Tensor(x), axis).asnumpy(), ref(x, axis), rtol=1e-12, atol=1e-15)
    cls = ops.Softmax(axis) if which == "softmax" else ops.LogSoftmax(axis)
    np.testing.assert_allclose(cls(ms.Tensor(x)).asnumpy(), ref(x, axis), rtol=1e-12, atol=1e-15)
    check_gradients(lambda t: fn(t, axis), x)


@pytest.mark.parametrize("which", ["softmax", "log_softmax"])
def test_softmax_non_contiguous_input(which):
    fn = getattr(ops, which)
    ref = ref_softmax if which == "softmax" else ref_log_softmax
    x = rng.normal(size=(3, 10))
    np.testing.assert_allclose(fn(strided(ms.Tensor(x))).asnumpy(), ref(x[:, ::2].T, -1), rtol=1e-12)
    check_gradients(lambda t: fn(strided(t), 0), x)


def test_softmax_rows_sum_to_one_and_tensor_methods_agree():
    x = rng.normal(size=(5, 7)).astype(np.float32)
    t = ms.Tensor(x)
    p = t.softmax()
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.asnumpy().sum(axis=1), np.ones(5), rtol=1e-6)
    np.testing.assert_allclose(np.exp(t.log_softmax().asnumpy()), p.asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(t.relu().asnumpy(), np.maximum(x, 0))
    np.testing.assert_allclose(t.sigmoid().asnumpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(t.tanh().asnumpy(), np.tanh(x), rtol=1e-6)


def test_log_softmax_without_grad_gives_the_same_values():
    x = rng.normal(size=(3, 4))
    with ms.no_grad():
        plain = ops.log_softmax(ms.Tensor(x, requires_grad=True)).asnumpy()
    np.testing.assert_allclose(plain, ref_log_softmax(x, -1), rtol=1e-12)


def test_zero_dim_softmax():
    t = ms.Tensor(np.float64(3.0), requires_grad=True)
    assert ops.softmax(t).item() == 1.0
    out = ops.log_softmax(t)
    assert out.item() == 0.0
    out.backward()
    assert t.grad.item() == 0.0


@pytest.mark.parametrize("which", ["softmax", "log_softmax"])
def test_softmax_bad_axis(which):
    fn = getattr(ops, which)
    with pytest.raises(ValueError, match=r"Softmax.*axis 2 .*shape \(3, 4\).*2 dimensions"):
        fn(ms.Tensor(np.zeros((3, 4))), 2)
    with pytest.raises(TypeError, match="axis must be an int"):
        fn(ms.Tensor(np.zeros((3, 4))), 1.0)


TORCH_CASES = [
    ("relu", ops.relu, lambda F, t: F.relu(t)),
    ("sigmoid", ops.sigmoid, lambda F, t: F.sigmoid(t)),
    ("tanh", ops.tanh, lambda F, t: F.tanh(t)),
    ("gelu", ops.gelu, lambda F, t: F.gelu(t)),
    ("gelu_tanh", lambda x: ops.gelu(x, "tanh"), lambda F, t: F.gelu(t, approximate="tanh")),
    ("softmax0", lambda x: ops.softmax(x, 0), lambda F, t: F.softmax(t, dim=0)),
    ("softmax", ops.softmax, lambda F, t: F.softmax(t, dim=-1)),
    ("log_softmax", ops.log_softmax, lambda F, t: F.log_softmax(t, dim=-1)),
]


@pytest.mark.parametrize("name, fn, torch_fn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_pytorch_float32(name, fn, torch_fn):
    torch = pytest.importorskip("torch")
    x = (rng.normal(scale=2.0, size=(6, 9))).astype(np.float32)
    w = rng.normal(size=x.shape).astype(np.float32)
    t = ms.Tensor(x, requires_grad=True)
    out = fn(t)
    out.backward(ms.Tensor(w))
    tx = torch.tensor(x, requires_grad=True)
    tout = torch_fn(torch.nn.functional, tx)
    tout.backward(torch.tensor(w))
    assert out.dtype == np.float32 and t.grad.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
