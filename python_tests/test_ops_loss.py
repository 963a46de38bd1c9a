"""Loss primitives: sparse/dense softmax cross-entropy, BCE with logits, squared error."""
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
rng = np.random.default_rng(3)
REDUCTIONS = ["none", "mean", "sum"]


def reduce(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def ref_log_softmax(x):
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def ref_bce(x, y, weight=None, pos_weight=None):
    log_sig = -np.logaddexp(0, -x)          # log sigmoid(x)
    log_one_minus = -np.logaddexp(0, x)     # log(1 - sigmoid(x))
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -(pw * y * log_sig + (1 - y) * log_one_minus)
    return loss if weight is None else loss * weight


# ---- sparse softmax cross-entropy -----------------------------------------------------

@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sparse_forward_matches_numpy(reduction, label_dtype):
    logits = rng.normal(scale=3.0, size=(6, 5))
    labels = rng.integers(0, 5, size=6).astype(label_dtype)
    want = reduce(-ref_log_softmax(logits)[np.arange(6), labels], reduction)
    out = ops.softmax_cross_entropy(ms.Tensor(logits), ms.Tensor(labels), sparse=True, reduction=reduction)
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)
    cls = ops.SparseSoftmaxCrossEntropyWithLogits(reduction)
    np.testing.assert_allclose(cls(ms.Tensor(logits), ms.Tensor(labels)).asnumpy(), want, rtol=1e-12)


def test_sparse_class_defaults_to_per_sample_loss():
    out = ops.SparseSoftmaxCrossEntropyWithLogits()(ms.Tensor(np.zeros((3, 4))), ms.Tensor([0, 1, 3]))
    np.testing.assert_allclose(out.asnumpy(), np.full(3, np.log(4.0)), rtol=1e-14)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sparse_gradients(reduction):
    logits = rng.normal(size=(5, 4))
    labels = np.array([0, 3, 3, 1, 2])
    check_gradients(lambda x, y: ops.softmax_cross_entropy(x, y, reduction=reduction), logits, labels)


def test_sparse_gradients_of_non_contiguous_logits():
    raw = rng.normal(size=(4, 10))                 # strided view: (5, 4) logits
    labels = np.array([3, 0, 1, 2, 3], dtype=np.int32)
    want = -ref_log_softmax(raw[:, ::2].T)[np.arange(5), labels]
    got = ops.softmax_cross_entropy(strided(ms.Tensor(raw)), ms.Tensor(labels), reduction="none")
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12)
    check_gradients(lambda x, y: ops.softmax_cross_entropy(strided(x), y), raw, labels)


def test_sparse_gradient_is_softmax_minus_one_hot():
    logits = rng.normal(size=(3, 4))
    labels = np.array([2, 0, 3])
    t = ms.Tensor(logits, requires_grad=True)
    ops.softmax_cross_entropy(t, ms.Tensor(labels), reduction="sum").backward()
    p = np.exp(ref_log_softmax(logits))
    np.testing.assert_allclose(t.grad.asnumpy(), p - np.eye(4)[labels], rtol=1e-12, atol=1e-15)


def test_sparse_is_stable_for_huge_logits():
    logits = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]], dtype=np.float32)
    t = ms.Tensor(logits, requires_grad=True)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        loss = ops.softmax_cross_entropy(t, ms.Tensor([1, 2]), reduction="none")
        loss.sum().backward()
    np.testing.assert_allclose(loss.asnumpy(), [1e4, np.log(2.0)], rtol=1e-6)
    assert np.isfinite(t.grad.asnumpy()).all()


def test_labels_get_no_gradient():
    t = ms.Tensor(rng.normal(size=(2, 3)), requires_grad=True)
    labels = ms.Tensor([1, 2])
    ops.softmax_cross_entropy(t, labels).backward()
    assert labels.grad is None and not labels.requires_grad
    assert t.grad.shape == (2, 3)


def test_sparse_bad_labels():
    logits = ms.Tensor(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"SparseSoftmaxCrossEntropyWithLogits.*label 4 .*4 classes"):
        ops.softmax_cross_entropy(logits, ms.Tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"label -1 .*4 classes"):
        ops.softmax_cross_entropy(logits, ms.Tensor([0, -1, 1]))
    with pytest.raises(TypeError, match=r"labels must be integer.*float32"):
        ops.softmax_cross_entropy(logits, ms.Tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"labels must have shape \(3,\).*got \(2,\)"):
        ops.softmax_cross_entropy(logits, ms.Tensor([0, 1]))
    with pytest.raises(ValueError, match=r"logits must have shape \(N, C\), got \(3, 4, 1\)"):
        ops.softmax_cross_entropy(ms.Tensor(np.zeros((3, 4, 1))), ms.Tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        ops.softmax_cross_entropy(logits, ms.Tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of"):
        ops.SparseSoftmaxCrossEntropyWithLogits("avg")


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sparse_matches_pytorch_float32(reduction, label_dtype):
    torch = pytest.importorskip("torch")
    logits = rng.normal(scale=2.0, size=(8, 10)).astype(np.float32)
    labels = rng.integers(0, 10, size=8).astype(label_dtype)
    t = ms.Tensor(logits, requires_grad=True)
    out = ops.softmax_cross_entropy(t, ms.Tensor(labels), reduction=reduction)
    w = rng.normal(size=out.shape).astype(np.float32)
    out.backward(ms.Tensor(w))
    tx = torch.tensor(logits, requires_grad=True)
    tout = torch.nn.functional.cross_entropy(tx, torch.tensor(labels, dtype=torch.int64), reduction=reduction)
    tout.backward(torch.tensor(w))
    assert out.dtype == np.float32 and t.grad.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- dense softmax cross-entropy ------------------------------------------------------

def soft_labels(n, c):
    y = rng.uniform(0.1, 1.0, size=(n, c))
    return y / y.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_dense_forward_matches_numpy(reduction):
    logits, labels = rng.normal(size=(4, 6)), soft_labels(4, 6)
    want = reduce(-(labels * ref_log_softmax(logits)).sum(axis=1), reduction)
    out = ops.softmax_cross_entropy(ms.Tensor(logits), ms.Tensor(labels), sparse=False, reduction=reduction)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)
    cls = ops.SoftmaxCrossEntropyWithLogits(reduction)
    np.testing.assert_allclose(cls(ms.Tensor(logits), ms.Tensor(labels)).asnumpy(), want, rtol=1e-12)


def test_dense_with_one_hot_equals_sparse():
    logits, labels = rng.normal(size=(5, 3)), np.array([2, 0, 1, 1, 0])
    dense = ops.softmax_cross_entropy(ms.Tensor(logits), ms.Tensor(np.eye(3)[labels]), sparse=False)
    sparse = ops.softmax_cross_entropy(ms.Tensor(logits), ms.Tensor(labels))
    np.testing.assert_allclose(dense.asnumpy(), sparse.asnumpy(), rtol=1e-13)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_dense_gradients_for_logits_and_labels(reduction):
    logits = rng.normal(size=(3, 4))
    labels = rng.uniform(0.1, 1.0, size=(3, 4))       # rows need not sum to one
    check_gradients(lambda x, y: ops.softmax_cross_entropy(x, y, sparse=False, reduction=reduction),
                    logits, labels)
    check_gradients(lambda x, y: ops.softmax_cross_entropy(strided(x), y, sparse=False),
                    rng.normal(size=(4, 6)), soft_labels(3, 4), wrt=[0])


def test_dense_bad_labels():
    logits = ms.Tensor(np.zeros((2, 3)))
    with pytest.raises(TypeError, match=r"SoftmaxCrossEntropyWithLogits.*floating point.*sparse=True"):
        ops.softmax_cross_entropy(logits, ms.Tensor(np.zeros((2, 3), dtype=np.int64)), sparse=False)
    with pytest.raises(ValueError, match=r"shape of logits \(2, 3\), got \(2, 4\)"):
        ops.softmax_cross_entropy(logits, ms.Tensor(np.zeros((2, 4))), sparse=False)
    with pytest.raises(TypeError, match="logits must be floating point"):
        ops.softmax_cross_entropy(ms.Tensor(np.zeros((2, 3), dtype=np.int64)), ms.Tensor([0, 1]))


def test_dense_matches_pytorch_probability_targets():
    torch = pytest.importorskip("torch")
    logits, labels = rng.normal(size=(6, 5)).astype(np.float32), soft_labels(6, 5).astype(np.float32)
    t, y = ms.Tensor(logits, requires_grad=True), ms.Tensor(labels, requires_grad=True)
    out = ops.softmax_cross_entropy(t, y, sparse=False)
    out.backward()
    tx, ty = torch.tensor(logits, requires_grad=True), torch.tensor(labels, requires_grad=True)
    tout = torch.nn.functional.cross_entropy(tx, ty)
    tout.backward()
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(t.grad.asnumpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad.asnumpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- binary cross-entropy with logits -------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_forward_matches_numpy(reduction):
    x, y = rng.normal(scale=3.0, size=(4, 3)), rng.uniform(size=(4, 3))
    weight, pos_weight = rng.uniform(0.5, 2.0, size=(4, 1)), rng.uniform(0.5, 3.0, size=(3,))
    for w, pw in ((None, None), (weight, None), (None, pos_weight), (weight, pos_weight)):
        want = reduce(ref_bce(x, y, w, pw), reduction)
        w_t = None if w is None else ms.Tensor(w)
        pw_t = None if pw is None else ms.Tensor(pw)
        got = ops.binary_cross_entropy_with_logits(ms.Tensor(x), ms.Tensor(y), w_t, pw_t, reduction=reduction)
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12)
    cls = ops.BCEWithLogits(reduction)
    np.testing.assert_allclose(cls(ms.Tensor(x), ms.Tensor(y)).asnumpy(), reduce(ref_bce(x, y), reduction),
                               rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_gradients_for_every_input(reduction):
    x, y = rng.normal(size=(3, 4)), rng.uniform(size=(3, 4))
    weight, pos_weight = rng.uniform(0.5, 2.0, size=(3, 1)), rng.uniform(0.5, 3.0, size=(4,))
    bce = ops.binary_cross_entropy_with_logits
    check_gradients(lambda a, b: bce(a, b, reduction=reduction), x, y)
    check_gradients(lambda a, b, w, p: bce(a, b, w, p, reduction=reduction), x, y, weight, pos_weight)
    check_gradients(lambda a, b, w: bce(a, b, w, None, reduction=reduction), x, y, weight)
    check_gradients(lambda a, b: ops.BCEWithLogits(reduction)(strided(a), b),
                    rng.normal(size=(4, 6)), rng.uniform(size=(3, 4)), wrt=[0])


def test_bce_is_stable_and_accepts_integer_labels():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], dtype=np.float32)
    y = np.array([1, 0, 1, 1, 0])
    t = ms.Tensor(x, requires_grad=True)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        loss = ops.binary_cross_entropy_with_logits(t, ms.Tensor(y), reduction="none")
        loss.sum().backward()
    np.testing.assert_allclose(loss.asnumpy(), ref_bce(x.astype(np.float64), y), rtol=1e-6)
    np.testing.assert_allclose(t.grad.asnumpy(), 1 / (1 + np.exp(-x.astype(np.float64))) - y, atol=1e-7)


def test_bce_bad_inputs():
    x = ms.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"BCEWithLogits.*shape of logits \(2, 3\), got \(3,\)"):
        ops.binary_cross_entropy_with_logits(x, ms.Tensor(np.zeros(3)))
    with pytest.raises(ValueError, match=r"pos_weight of shape \(2,\) does not broadcast"):
        ops.binary_cross_entropy_with_logits(x, ms.Tensor(np.zeros((2, 3))), pos_weight=ms.Tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"weight of shape \(2, 2, 3\) does not broadcast"):
        ops.binary_cross_entropy_with_logits(x, ms.Tensor(np.zeros((2, 3))), ms.Tensor(np.ones((2, 2, 3))))
    with pytest.raises(TypeError, match="logits must be floating point"):
        ops.binary_cross_entropy_with_logits(ms.Tensor([1, 2]), ms.Tensor([0.0, 1.0]))


def test_bce_matches_pytorch_float32():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, y = rng.normal(scale=2.0, size=(5, 4)).astype(np.float32), rng.uniform(size=(5, 4)).astype(np.float32)
    w = rng.uniform(0.5, 2, size=(5, 1)).astype(np.float32)
    pw = rng.uniform(0.5, 3, size=(4,)).astype(np.float32)
    ts = [ms.Tensor(a, requires_grad=True) for a in (x, y, w, pw)]
    out = ops.binary_cross_entropy_with_logits(*ts)
    out.backward()
    # torch differentiates only logits and labels; weight and pos_weight are covered by check_gradients
    tt = [torch.tensor(a, requires_grad=i < 2) for i, a in enumerate((x, y, w, pw))]
    tout = F.binary_cross_entropy_with_logits(tt[0], tt[1], weight=tt[2], pos_weight=tt[3])
    tout.backward()
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy(), rtol=1e-5)
    for mine, theirs in zip(ts, tt):
        if theirs.requires_grad:
            np.testing.assert_allclose(mine.grad.asnumpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- squared error --------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_forward_and_gradients_with_broadcasting(reduction):
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    want = reduce((x - y) ** 2, reduction)
    got = ops.mse_loss(ms.Tensor(x), ms.Tensor(y), reduction)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-13)
    np.testing.assert_allclose(ops.MSE(reduction)(ms.Tensor(x), ms.Tensor(y)).asnumpy(), want, rtol=1e-13)
    check_gradients(lambda a, b: ops.mse_loss(a, b, reduction), x, y)
    check_gradients(lambda a, b: ops.mse_loss(strided(a), b, reduction), rng.normal(size=(4, 6)),
                    rng.normal(size=(3, 1)))


def test_mse_bad_reduction():
    with pytest.raises(ValueError, match=r"mse_loss: reduction must be one of \('none', 'mean', 'sum'\)"):
        ops.mse_loss(ms.Tensor([1.0]), ms.Tensor([1.0]), reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_matches_pytorch_float32(reduction):
    torch = pytest.importorskip("torch")
    x, y = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)
    tx, ty = ms.Tensor(x, requires_grad=True), ms.Tensor(y, requires_grad=True)
    out = ops.mse_loss(tx, ty, reduction)
    w = rng.normal(size=out.shape).astype(np.float32)
    out.backward(ms.Tensor(w))
    px, py = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    pout = torch.nn.functional.mse_loss(px, py, reduction=reduction)
    pout.backward(torch.tensor(w))
    np.testing.assert_allclose(out.asnumpy(), pout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tx.grad.asnumpy(), px.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ty.grad.asnumpy(), py.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_sparse_backward_twice_with_retain_graph():
    logits = rng.normal(size=(4, 5))
    t = ms.Tensor(logits, requires_grad=True)
    loss = ops.softmax_cross_entropy(t, ms.Tensor([0, 4, 2, 2]))
    loss.backward(retain_graph=True)
    first = t.grad.asnumpy()
    loss.backward()
    p = np.exp(ref_log_softmax(logits))
    np.testing.assert_allclose(first, (p - np.eye(5)[[0, 4, 2, 2]]) / 4, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(t.grad.asnumpy(), 2 * first, rtol=1e-12, atol=1e-15)


def test_dense_labels_of_another_float_dtype_keep_the_logits_dtype():
    logits = ms.Tensor(rng.normal(size=(3, 4)).astype(np.float32), requires_grad=True)
    labels = ms.Tensor(soft_labels(3, 4), dtype=ms.float64, requires_grad=True)
    loss = ops.softmax_cross_entropy(logits, labels, sparse=False)
    assert loss.dtype == np.float32
    loss.backward()
    assert logits.grad.dtype == np.float32 and labels.grad.dtype == np.float64


@pytest.mark.parametrize("shape", [(40, 3), (40, 16), (40, 17), (3, 40), (200, 10)])
def test_sparse_row_paths_for_many_and_few_classes(shape):
    """Few columns take a transposed max and a matmul sum: results must not depend on the route."""
    logits = rng.normal(scale=4.0, size=shape)
    labels = rng.integers(0, shape[1], size=shape[0])
    got = ops.softmax_cross_entropy(ms.Tensor(logits), ms.Tensor(labels), reduction="none").asnumpy()
    np.testing.assert_allclose(got, -ref_log_softmax(logits)[np.arange(shape[0]), labels], rtol=1e-12)
    np.testing.assert_allclose(ops.softmax(ms.Tensor(logits)).asnumpy(), np.exp(ref_log_softmax(logits)),
                               rtol=1e-12)


def test_sigmoid_cross_entropy_with_logits_is_elementwise_bce():
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import ops
    logits = ms.Tensor(np.array([[-2.0, 0.5], [3.0, 0.0]], np.float32))
    labels = ms.Tensor(np.array([[0.0, 1.0], [1.0, 0.0]], np.float32))
    got = ops.SigmoidCrossEntropyWithLogits()(logits, labels).asnumpy()
    x, y = logits.asnumpy(), labels.asnumpy()
    np.testing.assert_allclose(got, np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0) - x * y, rtol=1e-6)
