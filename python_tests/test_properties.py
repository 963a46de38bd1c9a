"""Property tests (hypothesis): elementwise ops agree with NumPy for any broadcastable shapes.

Binary arithmetic from ``ops/arithmetic.py`` and the unary ops are checked on shape pairs
that broadcast, with inputs that are sometimes non-contiguous views: the forward equals
NumPy, every gradient has its input's shape, and add/mul gradients equal the un-broadcast
closed form. One test also shows that ``check_gradients`` catches a wrong backward.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.backend import get_device
from minitorch_dist.ops.primitive import Primitive
from minitorch_dist.testing import GradientCheckError, check_gradients

PROPERTY = settings(deadline=None, derandomize=True, max_examples=30)
CPU = get_device("CPU")

LAYOUTS = ["strided", "transposed", "contiguous"]
result_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4)


@st.composite
def shape_pairs(draw):
    """Two shapes that broadcast to a drawn result shape: leading axes dropped, some set to 1."""
    out = draw(result_shapes)
    shapes = []
    for _ in range(2):
        dropped = draw(st.integers(0, len(out)))
        shapes.append(tuple(1 if draw(st.booleans()) else n for n in out[dropped:]))
    return shapes


def layout(array, kind):
    """``array`` as the op will see it: contiguous, transposed, or a strided slice of a bigger one."""
    if kind == "transposed" and array.ndim >= 2:
        return np.ascontiguousarray(np.swapaxes(array, 0, -1)).swapaxes(0, -1)
    if kind == "strided" and array.ndim >= 1:
        bigger = np.zeros(array.shape[:-1] + (2 * array.shape[-1],), array.dtype)
        bigger[..., ::2] = array
        return bigger[..., ::2]
    return array


@st.composite
def operand_pair(draw, low=-10.0, high=10.0, divisor=False):
    shapes = draw(shape_pairs())
    arrays = []
    for i, shape in enumerate(shapes):
        if divisor and i == 1:   # keep denominators away from zero
            magnitude = draw(hnp.arrays(np.float64, shape, elements=st.floats(0.5, 4.0)))
            signs = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([-1.0, 1.0])))
            values = magnitude * signs
        else:
            values = draw(hnp.arrays(np.float64, shape, elements=st.floats(low, high)))
        arrays.append(layout(values, draw(st.sampled_from(LAYOUTS))))
    return arrays


def leaf(array):
    """A leaf tensor wrapping ``array`` without copying, so non-contiguous layouts reach the op."""
    return ms.Tensor._make(array, CPU, requires_grad=True)


def unbroadcast(grad, shape):
    """Reference: sum ``grad`` over the axes that broadcasting added or stretched."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for i, n in enumerate(shape):
        if n == 1 and grad.shape[i] != 1:
            grad = grad.sum(axis=i, keepdims=True)
    return grad


BINARY = {
    "add": (ops.add, np.add),
    "sub": (ops.sub, np.subtract),
    "mul": (ops.mul, np.multiply),
    "div": (ops.div, np.divide),
    "maximum": (ops.maximum, np.maximum),
}


@pytest.mark.parametrize("name", list(BINARY))
@PROPERTY
@given(data=st.data())
def test_binary_forward_equals_numpy_and_gradients_have_input_shapes(name, data):
    fn, ref = BINARY[name]
    x, y = data.draw(operand_pair(divisor=name == "div"))
    tx, ty = leaf(x), leaf(y)
    out = fn(tx, ty)
    want = ref(x, y)
    assert out.shape == want.shape
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-15, atol=0)
    out.backward(ms.Tensor(np.ones(want.shape)))
    assert tx.grad.shape == x.shape and ty.grad.shape == y.shape
    assert np.isfinite(tx.grad.asnumpy()).all() and np.isfinite(ty.grad.asnumpy()).all()


@pytest.mark.parametrize("name", ["add", "mul"])
@PROPERTY
@given(data=st.data())
def test_add_and_mul_gradients_equal_the_unbroadcast_closed_form(name, data):
    fn, ref = BINARY[name]
    x, y = data.draw(operand_pair())
    out_shape = np.broadcast_shapes(x.shape, y.shape)
    w = data.draw(hnp.arrays(np.float64, out_shape, elements=st.floats(-2.0, 2.0)))
    tx, ty = leaf(x), leaf(y)
    fn(tx, ty).backward(ms.Tensor(w))
    if name == "add":
        want_x, want_y = unbroadcast(w, x.shape), unbroadcast(w, y.shape)
    else:
        want_x, want_y = unbroadcast(w * y, x.shape), unbroadcast(w * x, y.shape)
    np.testing.assert_allclose(tx.grad.asnumpy(), want_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ty.grad.asnumpy(), want_y, rtol=1e-12, atol=1e-12)


# name, functional, NumPy reference, derivative, element strategy (away from kinks and poles)
UNARY = {
    "exp": (ops.exp, np.exp, np.exp, st.floats(-5, 5)),
    "log": (ops.log, np.log, lambda x: 1 / x, st.floats(0.1, 10)),
    "sqrt": (ops.sqrt, np.sqrt, lambda x: 0.5 / np.sqrt(x), st.floats(0.1, 10)),
    "rsqrt": (ops.rsqrt, lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x ** -1.5, st.floats(0.1, 10)),
    "abs": (ops.abs, np.abs, np.sign, st.floats(0.01, 10) | st.floats(-10, -0.01)),
    "square": (ops.square, np.square, lambda x: 2 * x, st.floats(-10, 10)),
    "neg": (ops.neg, np.negative, lambda x: -np.ones_like(x), st.floats(-10, 10)),
    "relu": (ops.relu, lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float),
             st.floats(0.01, 10) | st.floats(-10, -0.01)),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)),
                lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2, st.floats(-20, 20)),
    "tanh": (ops.tanh, np.tanh, lambda x: 1 / np.cosh(x) ** 2, st.floats(-5, 5)),
}


@pytest.mark.parametrize("name", list(UNARY))
@PROPERTY
@given(data=st.data())
def test_unary_forward_and_gradient_equal_numpy(name, data):
    fn, ref, deriv, elements = UNARY[name]
    shape = data.draw(result_shapes | st.just(()))
    values = data.draw(hnp.arrays(np.float64, shape, elements=elements))
    x = layout(values, data.draw(st.sampled_from(LAYOUTS)))
    w = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-2.0, 2.0)))
    t = leaf(x)
    out = fn(t)
    np.testing.assert_allclose(out.asnumpy(), ref(x), rtol=1e-13, atol=1e-300)
    out.backward(ms.Tensor(w))
    assert t.grad.shape == x.shape
    np.testing.assert_allclose(t.grad.asnumpy(), deriv(x) * w, rtol=1e-10, atol=1e-12)


class HalfGradientSquare(Primitive):
    """``x * x`` whose backward forgets the factor 2: a deliberately wrong primitive."""

    def forward(self, ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(self, ctx, g):
        (x,) = ctx.saved
        return (g * x,)


def test_check_gradients_fails_on_a_wrong_backward():
    x = np.array([[0.5, -1.0, 2.0], [1.5, 3.0, -0.7]])
    check_gradients(ops.square, x)                      # the correct op passes...
    with pytest.raises(GradientCheckError, match="input 0"):
        check_gradients(HalfGradientSquare(), x)        # ...the wrong one is caught
