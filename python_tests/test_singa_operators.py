"""SINGA's autograd operators added to the facade: forward values and ``creator.backward``
against NumPy formulas, SINGA's argument order, and training through the core tape."""
import math

import numpy as np
import pytest

from minitorch_dist.singa import autograd, layer, singa_wrap, tensor
from minitorch_dist.singa.unsupported import SingaNotSupported

X = np.array([[0.8, -1.2, 0.3], [-0.4, 0.5, 0.9]], np.float32)
ACOSH_X = np.array([[1.5, 2.0, 3.0], [1.1, 4.0, 2.5]], np.float32)


def T(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def grads(result, dy):
    out = result.creator.backward(dy)
    out = out if isinstance(out, tuple) else (out,)
    return [tensor.to_numpy(tensor.from_raw_tensor(g)) for g in out]


UNARY = [  # (function, x, forward, d/dx)
    ("cos", X, np.cos, lambda x: -np.sin(x)),
    ("cosh", X, np.cosh, np.sinh),
    ("acos", X * 0.7, np.arccos, lambda x: -1 / np.sqrt(1 - x * x)),
    ("acosh", ACOSH_X, np.arccosh, lambda x: 1 / np.sqrt(x * x - 1)),
    ("sin", X, np.sin, np.cos),
    ("sinh", X, np.sinh, np.cosh),
    ("asin", X * 0.7, np.arcsin, lambda x: 1 / np.sqrt(1 - x * x)),
    ("asinh", X, np.arcsinh, lambda x: 1 / np.sqrt(1 + x * x)),
    ("tan", X, np.tan, lambda x: 1 / np.cos(x) ** 2),
    ("atan", X, np.arctan, lambda x: 1 / (1 + x * x)),
    ("atanh", X * 0.7, np.arctanh, lambda x: 1 / (1 - x * x)),
    ("softsign", X, lambda x: x / (1 + abs(x)), lambda x: 1 / (1 + abs(x)) ** 2),
    ("softplus", X, lambda x: np.log(np.exp(x) + 1), lambda x: 1 / (1 + np.exp(-x))),
    ("erf", X, np.vectorize(math.erf), lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x)),
    ("sign", X, np.sign, lambda x: 0 * x),
    ("ceil", X, np.ceil, lambda x: 0 * x),
    ("floor", X, np.floor, lambda x: 0 * x),
    ("rounde", np.array([0.5, 1.5, -2.5], np.float32), np.round, lambda x: 0 * x),
    ("round", np.array([0.5, 1.5, -2.5], np.float32),
     lambda x: np.sign(x) * np.floor(abs(x) + 0.5), lambda x: 0 * x),
    ("hardsigmoid", X * 4, lambda x: np.clip(0.2 * x + 0.5, 0, 1),
     lambda x: 0.2 * ((0.2 * x + 0.5 > 0) & (0.2 * x + 0.5 < 1))),
    ("elu", X, lambda x: np.where(x > 0, x, np.exp(x) - 1), lambda x: np.where(x > 0, 1, np.exp(x))),
    ("selu", X, lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1)),
     lambda x: 1.0507 * np.where(x > 0, 1, 1.67326 * np.exp(x))),
]


@pytest.mark.parametrize("name, x, forward, derivative", UNARY, ids=[u[0] for u in UNARY])
def test_unary_operators_match_numpy_and_back_propagate(name, x, forward, derivative):
    result = getattr(autograd, name)(T(x))
    assert isinstance(result, tensor.Tensor) and result.creator is not None
    np.testing.assert_allclose(tensor.to_numpy(result), forward(x), rtol=1e-5, atol=1e-6)
    dy = np.linspace(0.5, 1.5, x.size).reshape(x.shape).astype(np.float32)
    np.testing.assert_allclose(grads(result, dy)[0], derivative(x) * dy, rtol=1e-4, atol=1e-6)


def test_clip_prelu_and_max_follow_singas_gradients():
    x = T(X)
    y = autograd.clip(x, -0.5, 0.5)
    np.testing.assert_allclose(tensor.to_numpy(y), np.clip(X, -0.5, 0.5))
    assert grads(y, np.ones_like(X))[0].tolist() == ((X >= -0.5) & (X <= 0.5)).astype(float).tolist()
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    y = autograd.prelu(x, T(slope))
    np.testing.assert_allclose(tensor.to_numpy(y), np.where(X > 0, X, X * slope), rtol=1e-6)
    dx, dslope = grads(y, np.ones_like(X))
    np.testing.assert_allclose(dx, np.where(X > 0, 1, slope + 0 * X), rtol=1e-6)
    np.testing.assert_allclose(dslope, np.where(X > 0, 0, X).sum(axis=0), rtol=1e-6)
    b = np.zeros_like(X)
    y = autograd.max(x, T(b), T(b - 1))
    np.testing.assert_allclose(tensor.to_numpy(y), np.maximum(X, 0))
    da, db, dc = grads(y, np.ones_like(X))
    assert da.tolist() == (X > 0).astype(float).tolist() and not dc.any()
    assert db.tolist() == (X <= 0).astype(float).tolist()


def test_comparisons_and_logic_are_float_masks_without_gradient():
    a, b = T([1.0, 0.0, -2.0]), T([0.0, 0.0, 3.0])
    assert tensor.to_numpy(autograd.less(a, b)).tolist() == [0.0, 0.0, 1.0]
    assert tensor.to_numpy(autograd.greater(a, b)).tolist() == [1.0, 0.0, 0.0]
    assert tensor.to_numpy(autograd.equal(a, b)).tolist() == [0.0, 1.0, 0.0]
    assert tensor.to_numpy(autograd._and(a, b)).tolist() == [0.0, 0.0, 1.0]
    assert tensor.to_numpy(autograd._or(a, b)).tolist() == [1.0, 0.0, 1.0]
    assert tensor.to_numpy(autograd._xor(a, b)).tolist() == [1.0, 0.0, 0.0]
    assert tensor.to_numpy(autograd._not(a)).tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(AssertionError, match="no backward"):
        autograd.less(a, b).creator.backward(np.ones(3, np.float32))


def test_shape_and_indexing_operators_match_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = T(x)
    y = autograd.slice(t, [0, 1], [2, 3], [1, 2], [2, 1])
    np.testing.assert_array_equal(tensor.to_numpy(y), x[:, 0:2:2, 1:3])
    assert grads(y, np.ones(y.shape))[0].sum() == y.size
    a, b = autograd.split(t, 2, [1, 3])
    assert a.shape == (2, 3, 1) and b.shape == (2, 3, 3)
    y = autograd.gather(t, 1, [[0, 2], [1, -1]])
    np.testing.assert_array_equal(tensor.to_numpy(y), np.take(x, [[0, 2], [1, 2]], axis=1))
    dx = grads(y, np.ones(y.shape, np.float32))[0]
    assert dx[:, 2].sum() == 2 * 2 * 4 and dx.shape == x.shape
    y = autograd.tile(t, [1, 2, 1])
    np.testing.assert_array_equal(tensor.to_numpy(y), np.tile(x, [1, 2, 1]))
    assert (grads(y, np.ones(y.shape, np.float32))[0] == 2).all()
    y = autograd.pad(T([[1.0, 2.0]]), "constant", [0, 1, 0, 2], 9.0)
    assert tensor.to_numpy(y).tolist() == [[9.0, 1.0, 2.0, 9.0, 9.0]]
    y = autograd.expand(T([[1.0], [2.0]]), [2, 3])
    assert tensor.to_numpy(y).tolist() == [[1.0] * 3, [2.0] * 3]
    assert grads(y, np.ones((2, 3), np.float32))[0].tolist() == [[3.0], [3.0]]
    y = autograd.onehot(-1, T([[1, 3]]), 4, np.array([0.0, 5.0]))
    assert tensor.to_numpy(y).tolist() == [[[0, 5, 0, 0], [0, 0, 0, 5]]]
    assert tensor.to_numpy(autograd.nonzero(T([0.0, 2.0, 3.0]))).tolist() == [[1, 2]]
    assert tensor.to_numpy(autograd.shape(t)).tolist() == [2, 3, 4]
    assert tensor.to_numpy(autograd.constant_of_shape(T([2, 1]), 7.0)).tolist() == [[7.0], [7.0]]
    assert autograd.cast(t, tensor.int32).dtype == np.int32
    y = autograd.where(T([1.0, 2.0]), T([8.0, 9.0]), [True, False])
    assert tensor.to_numpy(y).tolist() == [1.0, 9.0]
    y = autograd.upsample(T(np.ones((1, 1, 2, 2))), "nearest", [1, 1, 2, 3])
    assert y.shape == (1, 1, 4, 6) and (grads(y, np.ones(y.shape, np.float32))[0] == 6).all()
    d = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    back = autograd.space_to_depth(autograd.depth_to_space(T(d), 2), 2)
    np.testing.assert_array_equal(tensor.to_numpy(back), d)
    y = autograd.scatter_elements(T(np.zeros((2, 2))), np.array([[1], [0]]), np.array([[5.0], [6.0]]), 1)
    assert tensor.to_numpy(y).tolist() == [[0.0, 5.0], [6.0, 0.0]]


def test_cossim_and_embedding_gradients():
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)).astype(np.float32), rng.random((3, 4)).astype(np.float32)
    y = autograd.cossim(T(a), T(b))
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    cos = (a * b).sum(1) / (na * nb)
    np.testing.assert_allclose(tensor.to_numpy(y), cos, rtol=1e-5)
    da, _ = grads(y, np.ones(3, np.float32))
    np.testing.assert_allclose(da, b / (na * nb)[:, None] - cos[:, None] * a / (na ** 2)[:, None],
                               rtol=1e-4)
    w = rng.random((5, 2)).astype(np.float32)
    y = autograd.embedding(T([[0, 4], [4, 1]]), T(w))
    np.testing.assert_array_equal(tensor.to_numpy(y), w[[[0, 4], [4, 1]]])
    _, dw = grads(y, np.ones((2, 2, 2), np.float32))
    assert dw[4].tolist() == [2.0, 2.0] and dw[2].tolist() == [0.0, 0.0]


def test_new_operators_train_through_the_core_tape():
    w = tensor.Tensor(data=np.array([0.3, -0.6], np.float32), stores_grad=True, name="w")
    loss = autograd.reduce_sum(autograd.sin(autograd.max(w, T([0.0, 0.0]))), None, 0)
    [(p, g)] = list(autograd.backward(loss))
    assert p is w
    np.testing.assert_allclose(tensor.to_numpy(g), [np.cos(0.3), 0.0], rtol=1e-6)


def test_creators_of_core_built_functions_and_layers_back_propagate():
    x = T(X)
    y = autograd.mul(x, T(2 * X))
    dx, dother = grads(y, np.ones_like(X))
    assert np.allclose(dx, 2 * X) and np.allclose(dother, X)
    conv = layer.Conv2d(1, 2)
    out = conv(tensor.Tensor((2, 3, 3, 3)).gaussian(0.0, 1.0))
    dx, dW, db = out.creator.backward(np.ones(out.shape, np.float32))
    assert dx.shape() == (2, 3, 3, 3) and dW.shape() == (1, 3, 2, 2) and db.shape() == (1,)
    loss = autograd.MeanSquareError(T(np.zeros((2, 1))))(T(np.ones((2, 3))))[0]
    assert tensor.to_numpy(loss).tolist() == [1.0]          # SINGA broadcasts the target
    assert np.allclose(np.asarray(loss.creator.backward()), 2 / 6)


def test_singas_asserts_and_argument_forms():
    two, one = tensor.Tensor((10, 10)), tensor.Tensor((10,))
    with pytest.raises(AssertionError):
        autograd.mse_loss(two, tensor.Tensor((10, 10, 10)))
    with pytest.raises(AssertionError):
        autograd.add_bias(two, one, 3)
    with pytest.raises(AssertionError):
        autograd.ranking_loss(two, one)
    y = autograd.add_bias(T(np.zeros((2, 3))), T([[1.0, 2.0, 3.0]]))    # a (1, N) bias
    assert tensor.to_numpy(y).tolist() == [[1.0, 2.0, 3.0]] * 2
    assert autograd.unsqueeze(T(np.ones((3, 2))), [2, 4, 5]).shape == (3, 2, 1, 1, 1)
    with pytest.raises(SingaNotSupported, match="autograd._RNN"):
        autograd._RNN


def test_singa_wrap_tensor_is_a_thin_array_view_and_refuses_swig_internals():
    ct = singa_wrap.Tensor([2, 2])
    ct.CopyFloatDataFromHostPtr([1.0, 2.0, 3.0, 4.0])
    assert ct.shape() == (2, 2) and ct.GetFloatValue(4).tolist() == [1, 2, 3, 4]
    assert ct.AsType(singa_wrap.kInt).data_type() == singa_wrap.kInt
    assert tensor.to_numpy(tensor.from_raw_tensor(ct)).tolist() == [[1, 2], [3, 4]]
    singa_wrap.Gaussian(0.0, 1.0, ct)
    assert np.asarray(ct).std() > 0
    with pytest.raises(SingaNotSupported, match="singa_wrap.Tensor.GetRawPtr"):
        ct.GetRawPtr()
    with pytest.raises(SingaNotSupported, match="singa_wrap.CudnnRNNHandle"):
        singa_wrap.CudnnRNNHandle


def test_pooling_padding_past_half_the_kernel_follows_singa():
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    padded = np.pad(x[0, 0], 2, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3))
    avg = layer.AvgPool2d(3, 1, 2)(T(x))
    np.testing.assert_allclose(tensor.to_numpy(avg)[0, 0], np.nanmean(windows, axis=(2, 3)),
                               rtol=1e-6)
    mx = autograd.max_pool_2d(T(x), 3, 1, 2)
    np.testing.assert_allclose(tensor.to_numpy(mx)[0, 0], np.nanmax(windows, axis=(2, 3)))
    with pytest.raises(ValueError, match="smaller than the kernel"):
        layer.MaxPool2d(2, 1, 2)
