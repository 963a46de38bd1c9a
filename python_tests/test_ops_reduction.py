"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, Argmax, Argmin."""
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
rng = np.random.default_rng(5)

FUNCS = {"sum": (ops.sum, np.sum), "mean": (ops.mean, np.mean),
         "max": (ops.max, np.max), "min": (ops.min, np.min)}
CLASSES = {"sum": ops.ReduceSum, "mean": ops.ReduceMean, "max": ops.ReduceMax, "min": ops.ReduceMin}
AXES = [None, 0, 1, -1, (0, 2), (2, 0), (-3, -2, -1)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(FUNCS))
def test_functional_forward_matches_numpy(name, axis, keepdims):
    fn, ref = FUNCS[name]
    x = rng.normal(size=(2, 3, 4))
    out = fn(ms.Tensor(x), axis, keepdims)
    want = ref(x, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-13)


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("name", list(CLASSES))
def test_class_form_reduces_all_axes_for_empty_tuple_or_none(name, keep_dims):
    _, ref = FUNCS[name]
    x = rng.normal(size=(2, 3))
    op = CLASSES[name](keep_dims=keep_dims)
    want = ref(x, keepdims=keep_dims)
    for out in (op(ms.Tensor(x)), op(ms.Tensor(x), ()), op(ms.Tensor(x), None)):
        assert out.shape == want.shape
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-13)


def test_reduce_mean_keep_dims_over_spatial_axes_like_the_resnet_head():
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    out = ops.ReduceMean(keep_dims=True)(ms.Tensor(x), (2, 3))
    assert out.shape == (2, 3, 1, 1) and out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-6)


def test_tensor_methods():
    x = rng.normal(size=(3, 4))
    t = ms.Tensor(x)
    np.testing.assert_allclose(t.sum(1).asnumpy(), x.sum(1), rtol=1e-13)
    np.testing.assert_allclose(t.mean(0, True).asnumpy(), x.mean(0, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(t.max().asnumpy(), x.max())
    np.testing.assert_allclose(t.min(axis=1).asnumpy(), x.min(axis=1))
    assert t.argmax().item() == x.argmax()


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(FUNCS))
def test_gradients(name, axis, keepdims):
    fn, _ = FUNCS[name]
    x = rng.normal(size=(2, 3, 4))   # continuous values: no ties for max/min
    check_gradients(lambda t: fn(t, axis, keepdims), x)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", list(FUNCS))
def test_gradients_of_non_contiguous_input(name, axis):
    fn, ref = FUNCS[name]
    x = rng.normal(size=(3, 8))
    np.testing.assert_allclose(fn(strided(ms.Tensor(x)), axis).asnumpy(), ref(x[:, ::2].T, axis=axis),
                               rtol=1e-13)
    check_gradients(lambda t: fn(strided(t), axis), x)


@pytest.mark.parametrize("name, picked", [("max", 3.0), ("min", -1.0)])
def test_ties_share_the_gradient_equally(name, picked):
    x = np.array([[3.0, -1.0, 3.0, 0.0], [-1.0, -1.0, 3.0, 3.0]])
    t = ms.Tensor(x, requires_grad=True)
    FUNCS[name][0](t, 1).backward(ms.Tensor([2.0, 4.0]))
    mask = (x == picked).astype(float)
    want = mask * np.array([[2.0], [4.0]]) / mask.sum(axis=1, keepdims=True)
    assert want.tolist()[1] == [2.0, 2.0, 0.0, 0.0] or want.tolist()[1] == [0.0, 0.0, 2.0, 2.0]
    np.testing.assert_allclose(t.grad.asnumpy(), want)
    t2 = ms.Tensor(x, requires_grad=True)
    FUNCS[name][0](t2).backward()
    np.testing.assert_allclose(t2.grad.asnumpy(), np.where(x == picked, 1.0 / (x == picked).sum(), 0.0))


def test_leaf_gradients_are_writable_arrays_of_the_input_shape():
    """Sum and mean hand back broadcast views; a leaf's .grad must still be a real array."""
    for fn in (ops.sum, ops.mean, ops.max, ops.min):
        t = ms.Tensor(rng.normal(size=(3, 4)), requires_grad=True)
        fn(t, 0).sum().backward()
        assert t.grad.shape == (3, 4)
        assert t.grad.data.flags.writeable
        t.grad.data += 1.0


def test_zero_dim_input():
    for fn in (ops.sum, ops.mean, ops.max, ops.min):
        t = ms.Tensor(np.float64(2.5), requires_grad=True)
        out = fn(t)
        out.backward()
        assert out.item() == 2.5 and t.grad.item() == 1.0 and isinstance(t.grad.data, np.ndarray)


def test_integer_and_boolean_inputs_follow_numpy():
    x = np.array([[1, 2], [3, 4]], dtype=np.int32)
    assert ops.sum(ms.Tensor(x)).item() == 10
    assert ops.mean(ms.Tensor(x), 0).tolist() == [2.0, 3.0]
    assert ops.max(ms.Tensor(x), 1).tolist() == [2, 4]
    assert ops.sum(ms.Tensor([True, True, False])).item() == 2


def test_argmax_class_defaults_to_last_axis_and_int32():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    out = ops.Argmax()(ms.Tensor(x))
    assert out.dtype == np.int32 and out.tolist() == [1, 0]     # first index on ties
    out = ops.Argmax(axis=0, output_type=ms.int64)(ms.Tensor(x))
    assert out.dtype == np.int64 and out.tolist() == [1, 0, 1]
    assert ops.Argmin()(ms.Tensor(x)).tolist() == [0, 1]


def test_argmax_functional_follows_numpy():
    x = rng.normal(size=(3, 4, 5))
    t = ms.Tensor(x, requires_grad=True)
    for axis in (None, 0, 1, -1):
        for keepdims in (False, True):
            out = ops.argmax(t, axis, keepdims)
            assert out.dtype == np.int64 and not out.requires_grad
            np.testing.assert_array_equal(out.asnumpy(), np.argmax(x, axis=axis, keepdims=keepdims))
            np.testing.assert_array_equal(ops.argmin(t, axis, keepdims).asnumpy(),
                                          np.argmin(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name", list(FUNCS))
def test_axis_out_of_range_names_op_axis_and_rank(name):
    with pytest.raises(ValueError, match=rf"Reduce{name.title()}.*axis 3 .*shape \(2, 3\).*2 dimensions"):
        FUNCS[name][0](ms.Tensor(np.zeros((2, 3))), 3)
    with pytest.raises(ValueError, match=r"axis -3 .*2 dimensions"):
        CLASSES[name]()(ms.Tensor(np.zeros((2, 3))), (0, -3))


def test_other_bad_arguments():
    x = ms.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="ReduceSum.*same dimension twice"):
        ops.sum(x, (1, -1))
    with pytest.raises(TypeError, match="ReduceMean.*axis must be"):
        ops.mean(x, 1.0)
    with pytest.raises(TypeError, match="keep_dims must be a bool"):
        ops.ReduceMax(keep_dims="yes")
    with pytest.raises(TypeError, match="output_type must be an integer dtype"):
        ops.Argmax(output_type=ms.float32)
    with pytest.raises(ValueError, match=r"Argmax.*axis 2 .*2 dimensions"):
        ops.Argmax(axis=2)(x)
    with pytest.raises(ValueError, match="Argmax.*empty"):
        ops.argmax(ms.Tensor(np.zeros((0,))))


@pytest.mark.parametrize("name, torch_name", [("sum", "sum"), ("mean", "mean"),
                                              ("max", "amax"), ("min", "amin")])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)], ids=str)
def test_matches_pytorch_float32(name, torch_name, axis):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    x[0, 1, :2] = 9.0                         # a tie in the max: torch.amax splits it too
    t = ms.Tensor(x, requires_grad=True)
    out = FUNCS[name][0](t, axis, True)
    w = rng.normal(size=out.shape).astype(np.float32)
    out.backward(ms.Tensor(w))
    tx = torch.tensor(x, requires_grad=True)
    dims = (0, 1, 2) if axis is None else axis
    tout = getattr(torch, torch_name)(tx, dim=dims, keepdim=True)
    tout.backward(torch.tensor(w))
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_argmax_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(4, 6)).astype(np.float32)
    np.testing.assert_array_equal(ops.argmax(ms.Tensor(x), 1).asnumpy(), torch.tensor(x).argmax(1).numpy())
