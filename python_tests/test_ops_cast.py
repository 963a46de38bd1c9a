"""Cast: forward against NumPy for every way of naming a dtype, gradients cast back to the
input's dtype, no gradient through integer casts, PyTorch parity and bad dtypes."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.testing.gradcheck import check_gradients

VALUES = np.array([[1.7, -2.2, 0.5], [-0.5, 3.0, 250.9]])


@pytest.mark.parametrize("spec, expected", [
    (ms.float16, np.float16), (np.float32, np.float32), ("float64", np.float64), ("int32", np.int32),
    (ms.int64, np.int64), (ms.uint8, np.uint8), ("bool", np.bool_), ("half", np.float16),
    (float, np.float64), (np.dtype("int8"), np.int8),
])
def test_cast_forward(spec, expected):
    source = VALUES if expected is not np.uint8 else np.abs(VALUES)
    out = ops.Cast()(ms.Tensor(source, dtype=ms.float64), spec)
    assert out.dtype == np.dtype(expected)
    np.testing.assert_array_equal(out.asnumpy(), source.astype(expected))
    np.testing.assert_array_equal(ops.cast(ms.Tensor(source, dtype=ms.float32), spec).asnumpy(),
                                  source.astype(np.float32).astype(expected))


def test_cast_from_integers_and_tensor_astype():
    x = ms.Tensor(np.array([1, -2, 3], np.int32))
    out = x.astype(ms.float32)
    assert out.dtype == ms.float32 and not out.requires_grad
    np.testing.assert_array_equal(out.asnumpy(), [1.0, -2.0, 3.0])


def test_cast_gradient_checks():
    a = np.random.default_rng(0).standard_normal((3, 4))
    check_gradients(lambda x: ops.cast(x, ms.float64), a)
    check_gradients(lambda x: ops.cast(x.T[::2], "float64"), a)


@pytest.mark.parametrize("target", [ms.float16, ms.float32])
def test_gradient_comes_back_in_the_input_dtype(target):
    x = ms.Tensor(VALUES, dtype=ms.float64, requires_grad=True)
    out = ops.cast(x, target)
    assert out.requires_grad and out.dtype == target
    out.backward(np.full(VALUES.shape, 0.25))
    assert x.grad.dtype == ms.float64
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full(VALUES.shape, 0.25))


def test_cast_to_integer_stops_the_gradient():
    x = ms.Tensor(VALUES, requires_grad=True)
    out = ops.cast(x, ms.int32)
    assert not out.requires_grad and out.grad_fn is None
    y = ops.cast(x, ms.float64) * ops.cast(out, ms.float64)
    y.backward(np.ones(VALUES.shape))
    # only the float path carries a gradient: d(x * int(x))/dx = int(x)
    np.testing.assert_array_equal(x.grad.asnumpy(), VALUES.astype(np.float32).astype(np.int32))


def test_cast_matches_pytorch():
    torch = pytest.importorskip("torch")
    t = torch.tensor(VALUES)
    for ours, theirs in [(ms.int32, torch.int32), (ms.float16, torch.float16), (ms.bool_, torch.bool)]:
        np.testing.assert_array_equal(ops.cast(ms.Tensor(VALUES, dtype=ms.float64), ours).asnumpy(),
                                      t.to(theirs).numpy())


@pytest.mark.parametrize("bad", ["complex64", "float8", object, np.complex128])
def test_cast_rejects_unsupported_dtypes(bad):
    with pytest.raises(TypeError, match=r"Cast.*(unknown dtype|not supported|cannot interpret)"):
        ops.Cast()(ms.Tensor(VALUES), bad)
    with pytest.raises(TypeError, match="Cast"):
        ops.cast(ms.Tensor(VALUES), bad)
