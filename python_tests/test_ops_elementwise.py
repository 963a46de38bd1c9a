"""Unary elementwise primitives: Exp, Log, Sqrt, Rsqrt, Abs, Square, Sign."""
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

rng = np.random.default_rng(7)


def positive(shape):
    return rng.uniform(0.5, 3.0, size=shape)


def away_from_zero(shape):
    return rng.uniform(0.3, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


# name, functional, class, NumPy reference, derivative, input sampler (kept away from kinks)
CASES = [
    ("exp", ops.exp, ops.Exp, np.exp, np.exp, lambda s: rng.uniform(-3, 3, size=s)),
    ("log", ops.log, ops.Log, np.log, lambda x: 1 / x, positive),
    ("sqrt", ops.sqrt, ops.Sqrt, np.sqrt, lambda x: 0.5 / np.sqrt(x), positive),
    ("rsqrt", ops.rsqrt, ops.Rsqrt, lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x ** -1.5, positive),
    ("abs", ops.abs, ops.Abs, np.abs, np.sign, away_from_zero),
    ("square", ops.square, ops.Square, np.square, lambda x: 2 * x, away_from_zero),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_forward_matches_numpy_float64(name, fn, cls, ref, deriv, sample):
    x = sample((3, 5))
    out = fn(ms.Tensor(x))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.asnumpy(), ref(x), rtol=1e-13, atol=0)
    np.testing.assert_allclose(cls()(ms.Tensor(x)).asnumpy(), ref(x), rtol=1e-13, atol=0)


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_float32_stays_float32(name, fn, cls, ref, deriv, sample):
    x = sample((4,)).astype(np.float32)
    out = fn(ms.Tensor(x))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), ref(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("fn, ref", [(ops.exp, np.exp), (ops.log, np.log), (ops.sqrt, np.sqrt),
                                     (ops.rsqrt, lambda x: 1 / np.sqrt(x))])
def test_integer_input_gives_float32(fn, ref):
    out = fn(ms.Tensor([1, 2, 4]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), ref(np.array([1.0, 2.0, 4.0])), rtol=1e-6)


def test_abs_and_square_keep_integer_dtype():
    x = ms.Tensor(np.array([-3, 0, 2], dtype=np.int32))
    assert ops.abs(x).dtype == np.int32 and ops.abs(x).tolist() == [3, 0, 2]
    assert ops.square(x).dtype == np.int32 and ops.square(x).tolist() == [9, 0, 4]


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_gradients(name, fn, cls, ref, deriv, sample):
    check_gradients(fn, sample((3, 4)))


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_gradients_of_non_contiguous_input(name, fn, cls, ref, deriv, sample):
    x = sample((3, 8))
    view = strided(ms.Tensor(x))
    assert not view.data.flags.c_contiguous
    np.testing.assert_allclose(fn(view).asnumpy(), ref(x[:, ::2].T), rtol=1e-13)
    check_gradients(lambda t: fn(strided(t)), x)


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_gradient_matches_closed_form(name, fn, cls, ref, deriv, sample):
    x = sample((2, 3))
    t = ms.Tensor(x, requires_grad=True)
    w = rng.normal(size=x.shape)
    fn(t).backward(ms.Tensor(w))
    np.testing.assert_allclose(t.grad.asnumpy(), deriv(x) * w, rtol=1e-12)


def test_zero_dim_inputs_give_arrays_and_gradients():
    for fn in (ops.exp, ops.log, ops.sqrt, ops.rsqrt, ops.abs, ops.square):
        t = ms.Tensor(np.float64(1.5), requires_grad=True)
        out = fn(t)
        out.backward()
        assert out.shape == () and isinstance(t.grad.data, np.ndarray) and t.grad.shape == ()


def test_abs_gradient_is_zero_at_zero():
    t = ms.Tensor([-2.0, 0.0, 3.0], requires_grad=True)
    ops.abs(t).sum().backward()
    assert t.grad.tolist() == [-1.0, 0.0, 1.0]


def test_tensor_methods_call_the_ops():
    x = positive((2, 2))
    t = ms.Tensor(x)
    np.testing.assert_allclose(t.exp().asnumpy(), np.exp(x), rtol=1e-13)
    np.testing.assert_allclose(t.log().asnumpy(), np.log(x), rtol=1e-13)
    np.testing.assert_allclose(t.sqrt().asnumpy(), np.sqrt(x), rtol=1e-13)
    np.testing.assert_allclose(abs(ms.Tensor(-x)).asnumpy(), x, rtol=0)


def test_log_and_sqrt_follow_numpy_outside_their_domain():
    with np.errstate(divide="ignore", invalid="ignore"):
        out = ops.log(ms.Tensor([0.0, -1.0])).asnumpy()
        assert out[0] == -np.inf and np.isnan(out[1])
        assert np.isnan(ops.sqrt(ms.Tensor([-1.0])).asnumpy()[0])


def test_sign_is_not_differentiable():
    t = ms.Tensor([-2.0, 0.0, 3.0], requires_grad=True)
    out = ops.sign(t)
    assert out.tolist() == [-1.0, 0.0, 1.0]
    assert not out.requires_grad
    assert ops.Sign()(ms.Tensor([-5, 5])).tolist() == [-1, 1]


def test_non_numeric_input_is_rejected():
    with pytest.raises(TypeError, match="numbers"):
        ops.exp("not a number")


@pytest.mark.parametrize("name, fn, cls, ref, deriv, sample", CASES, ids=IDS)
def test_matches_pytorch_float32(name, fn, cls, ref, deriv, sample):
    torch = pytest.importorskip("torch")
    x = sample((4, 5)).astype(np.float32)
    w = rng.normal(size=x.shape).astype(np.float32)
    t = ms.Tensor(x, requires_grad=True)
    out = fn(t)
    out.backward(ms.Tensor(w))
    tx = torch.tensor(x, requires_grad=True)
    tout = getattr(torch, name)(tx)
    tout.backward(torch.tensor(w))
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_bias_add_channel_axis_and_gradients():
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import ops
    x = ms.Tensor(np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32))
    b = ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    out, (gx, gb) = ms.value_and_grad(lambda a, c: (ops.BiasAdd()(a, c) ** 2).sum(), (0, 1))(x, b)
    full = x.asnumpy() + b.asnumpy().reshape(1, 3, 1, 1)
    np.testing.assert_allclose(float(out.asnumpy()), (full ** 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(gx.asnumpy(), 2 * full, rtol=1e-5)
    np.testing.assert_allclose(gb.asnumpy(), (2 * full).sum(axis=(0, 2, 3)), rtol=1e-5)
    nhwc = ops.BiasAdd("NHWC")(ms.Tensor(np.zeros((1, 2, 2, 3), np.float32)), b).asnumpy()
    assert nhwc[0, 1, 1].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="one entry per channel"):
        ops.BiasAdd()(x, ms.Tensor(np.ones(5, np.float32)))
