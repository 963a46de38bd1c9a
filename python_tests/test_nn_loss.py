"""Loss cells: values and gradients against PyTorch for every reduction, and bad input."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops

torch = pytest.importorskip("torch")
F = torch.nn.functional

REDUCTIONS = ["mean", "sum", "none"]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def ms_loss_and_grad(loss_fn, logits, labels, upstream=None):
    """Loss value and d(sum(loss * upstream))/d(logits), in float64."""
    label_tensor = ms.Tensor(labels)

    def objective(x):
        loss = loss_fn(x, label_tensor)
        return loss if upstream is None else (loss * ms.Tensor(upstream)).sum()

    value = loss_fn(ms.Tensor(logits), label_tensor).asnumpy()
    _, grad = ms.value_and_grad(objective)(ms.Tensor(logits))
    return value, grad.asnumpy()


def torch_loss_and_grad(fn, logits, labels, upstream=None):
    x = torch.tensor(logits, requires_grad=True)
    y = torch.tensor(labels)
    loss = fn(x, y)
    (loss if upstream is None else (loss * torch.tensor(upstream)).sum()).backward()
    return loss.detach().numpy(), x.grad.numpy()


def check_against_torch(loss_fn, torch_fn, logits, labels, reduction, atol=1e-9):
    upstream = None
    if reduction == "none":
        shape = loss_fn(ms.Tensor(logits), ms.Tensor(labels)).shape
        upstream = rand(*shape, seed=7)
    value, grad = ms_loss_and_grad(loss_fn, logits, labels, upstream)
    t_value, t_grad = torch_loss_and_grad(torch_fn, logits, labels, upstream)
    np.testing.assert_allclose(value, t_value, rtol=1e-7, atol=atol)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-7, atol=atol)


# ---- regression losses ---------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_matches_torch(reduction):
    check_against_torch(nn.MSELoss(reduction), lambda x, y: F.mse_loss(x, y, reduction=reduction),
                        rand(4, 3), rand(4, 3, seed=1), reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_loss_matches_torch(reduction):
    check_against_torch(nn.L1Loss(reduction), lambda x, y: F.l1_loss(x, y, reduction=reduction),
                        rand(4, 3), rand(4, 3, seed=1), reduction)


def test_mse_loss_default_is_mean_float32():
    loss = nn.MSELoss()(ms.Tensor([[1.0, 2.0]]), ms.Tensor([[0.0, 0.0]]))
    assert loss.shape == () and loss.dtype == np.float32
    assert float(loss.asnumpy()) == pytest.approx(2.5)


# ---- cross-entropy -------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_cross_entropy_index_labels_match_torch(reduction, label_dtype):
    labels = np.array([0, 2, 1, 2, 2], label_dtype)
    check_against_torch(nn.CrossEntropyLoss(reduction=reduction),
                        lambda x, y: F.cross_entropy(x, y.long(), reduction=reduction),
                        rand(5, 3), labels, reduction)


def test_cross_entropy_plain_index_labels_use_the_fused_primitive():
    loss_fn = nn.CrossEntropyLoss()
    loss_fn(ms.Tensor(rand(4, 3)), ms.Tensor([0, 1, 2, 1]))
    assert loss_fn.sparse_ce.calls == 1 and loss_fn.log_softmax.calls == 0


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probability_labels_match_torch(reduction):
    probs = np.random.default_rng(3).dirichlet(np.ones(4), size=5)
    check_against_torch(nn.CrossEntropyLoss(reduction=reduction),
                        lambda x, y: F.cross_entropy(x, y, reduction=reduction),
                        rand(5, 4), probs, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [
    dict(weight=[0.2, 1.0, 3.0]),
    dict(ignore_index=1),
    dict(label_smoothing=0.2),
    dict(ignore_index=1, label_smoothing=0.2),
    dict(weight=[0.2, 1.0, 3.0], label_smoothing=0.1, ignore_index=2),
], ids=["weight", "ignore_index", "smoothing", "ignore_smoothing", "all"])
def test_cross_entropy_options_match_torch(reduction, options):
    labels = np.array([0, 2, 1, 2, 1, 0], np.int64)
    torch_options = dict(options)
    if "weight" in options:
        torch_options["weight"] = torch.tensor(options["weight"], dtype=torch.float64)
        options = dict(options, weight=ms.Tensor(np.array(options["weight"])))
    check_against_torch(nn.CrossEntropyLoss(reduction=reduction, **options),
                        lambda x, y: F.cross_entropy(x, y, reduction=reduction, **torch_options),
                        rand(6, 3), labels, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_default_ignore_index_drops_those_rows(reduction):
    labels = np.array([0, -100, 1, 2], np.int64)
    check_against_torch(nn.CrossEntropyLoss(reduction=reduction),
                        lambda x, y: F.cross_entropy(x, y, reduction=reduction),
                        rand(4, 3), labels, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_weighted_probability_labels_match_torch(reduction):
    probs = np.random.default_rng(4).dirichlet(np.ones(3), size=4)
    weight = np.array([0.5, 2.0, 1.0])
    check_against_torch(
        nn.CrossEntropyLoss(weight=ms.Tensor(weight), label_smoothing=0.3, reduction=reduction),
        lambda x, y: F.cross_entropy(x, y, weight=torch.tensor(weight), label_smoothing=0.3,
                                     reduction=reduction),
        rand(4, 3), probs, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_per_position_classes_match_torch(reduction, smoothing, kind):
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, size=(2, 4, 5)) if kind == "index" else \
        rng.dirichlet(np.ones(3), size=(2, 4, 5)).transpose(0, 3, 1, 2)
    check_against_torch(
        nn.CrossEntropyLoss(reduction=reduction, label_smoothing=smoothing),
        lambda x, y: F.cross_entropy(x, y, reduction=reduction, label_smoothing=smoothing),
        rand(2, 3, 4, 5), labels, reduction)


def test_cross_entropy_unbatched_logits():
    value, grad = ms_loss_and_grad(nn.CrossEntropyLoss(), rand(4), np.array(2))
    t_value, t_grad = torch_loss_and_grad(F.cross_entropy, rand(4), np.array(2))
    np.testing.assert_allclose(value, t_value, rtol=1e-9)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-9)


def test_cross_entropy_all_ignored_mean_is_nan():
    loss = nn.CrossEntropyLoss(ignore_index=0)(ms.Tensor(rand(2, 3)), ms.Tensor([0, 0]))
    assert np.isnan(loss.asnumpy())


@pytest.mark.parametrize("options", [{}, dict(weight=[1.0, 2.0, 3.0])], ids=["fused", "weighted"])
def test_cross_entropy_label_out_of_range_names_label_and_classes(options):
    loss_fn = nn.CrossEntropyLoss(**options)
    with pytest.raises(ValueError, match=r"label 3 is out of range for 3 classes"):
        loss_fn(ms.Tensor(rand(2, 3)), ms.Tensor([0, 3]))
    with pytest.raises(ValueError, match=r"label -1 is out of range for 3 classes"):
        loss_fn(ms.Tensor(rand(2, 3)), ms.Tensor([-1, 0]))


def test_cross_entropy_bad_arguments():
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"weight must have shape \(C,\)"):
        nn.CrossEntropyLoss(weight=np.ones((2, 2)))
    loss_fn = nn.CrossEntropyLoss()
    with pytest.raises(ValueError, match=r"must have shape \(3,\) for logits of shape \(3, 4\)"):
        loss_fn(ms.Tensor(rand(3, 4)), ms.Tensor([0, 1]))
    with pytest.raises(ValueError, match=r"probabilities must have shape \(3, 4\)"):
        loss_fn(ms.Tensor(rand(3, 4)), ms.Tensor(rand(3, 5)))
    with pytest.raises(TypeError, match="labels must be int class indices or float"):
        loss_fn(ms.Tensor(rand(2, 2)), ms.Tensor(np.array([True, False])))
    with pytest.raises(ValueError, match="logits have 4 classes"):
        nn.CrossEntropyLoss(weight=[1.0, 2.0])(ms.Tensor(rand(3, 4)), ms.Tensor([0, 1, 2]))


# ---- SoftmaxCrossEntropyWithLogits ---------------------------------------------------------

def test_softmax_cross_entropy_with_logits_defaults_are_mindsporés():
    loss_fn = nn.SoftmaxCrossEntropyWithLogits()
    assert loss_fn.sparse is False and loss_fn.reduction == "none"


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sparse_softmax_cross_entropy_matches_torch(reduction):
    check_against_torch(nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction=reduction),
                        lambda x, y: F.cross_entropy(x, y.long(), reduction=reduction),
                        rand(5, 4), np.array([3, 0, 1, 1, 2], np.int32), reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_dense_softmax_cross_entropy_matches_torch(reduction):
    onehot = np.eye(4)[[3, 0, 1, 1, 2]]
    check_against_torch(nn.SoftmaxCrossEntropyWithLogits(sparse=False, reduction=reduction),
                        lambda x, y: F.cross_entropy(x, y, reduction=reduction),
                        rand(5, 4), onehot, reduction)


def test_sparse_softmax_cross_entropy_label_out_of_range():
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    with pytest.raises(ValueError, match=r"label 4 is out of range for 4 classes"):
        loss_fn(ms.Tensor(rand(2, 4)), ms.Tensor(np.array([4, 0], np.int32)))


# ---- BCEWithLogitsLoss ---------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("with_weights", [False, True])
def test_bce_with_logits_matches_torch(reduction, with_weights):
    labels = (rand(4, 3, seed=2) > 0).astype(np.float64)
    weight = np.abs(rand(4, 3, seed=3)) if with_weights else None
    pos_weight = np.array([0.5, 2.0, 3.0]) if with_weights else None
    loss_fn = nn.BCEWithLogitsLoss(reduction, weight=None if weight is None else ms.Tensor(weight),
                                   pos_weight=None if pos_weight is None else ms.Tensor(pos_weight))

    def torch_fn(x, y):
        return F.binary_cross_entropy_with_logits(
            x, y, reduction=reduction,
            weight=None if weight is None else torch.tensor(weight),
            pos_weight=None if pos_weight is None else torch.tensor(pos_weight))

    check_against_torch(loss_fn, torch_fn, 4 * rand(4, 3), labels, reduction)


def test_bce_with_logits_is_stable_for_large_logits():
    loss = nn.BCEWithLogitsLoss()(ms.Tensor([1000.0, -1000.0]), ms.Tensor([0.0, 1.0]))
    assert float(loss.asnumpy()) == pytest.approx(1000.0)


# ---- LossBase and shared checks ------------------------------------------------------------

class _AbsLoss(nn.LossBase):
    def construct(self, logits, labels, weights=1.0):
        return self.get_loss(ops.abs(logits - labels), weights)


@pytest.mark.parametrize("reduction, expected", [("mean", 2.0), ("sum", 8.0), ("none", [1.0, 2.0, 3.0, 2.0])])
def test_loss_base_get_loss_reduces_after_weighting(reduction, expected):
    x = ms.Tensor([1.0, 2.0, 3.0, 4.0])
    out = _AbsLoss(reduction)(x, ms.Tensor([0.0, 0.0, 0.0, 0.0]), ms.Tensor([1.0, 1.0, 1.0, 0.5]))
    np.testing.assert_allclose(out.asnumpy(), expected)


@pytest.mark.parametrize("cls", [nn.MSELoss, nn.L1Loss, nn.BCEWithLogitsLoss, nn.LossBase])
def test_bad_reduction_is_rejected(cls):
    with pytest.raises(ValueError, match=rf"{cls.__name__}: reduction must be one of"):
        cls(reduction="average")


def test_loss_cells_name_their_primitives_inside_a_network():
    net = nn.WithLossCell(nn.Dense(2, 3), nn.CrossEntropyLoss())
    net(ms.Tensor(rand(2, 2)), ms.Tensor([0, 2]))
    names = dict(net.primitives_and_names())
    # wrappers add no name scope, so the loss primitive keeps its own name
    assert "sparse_ce" in names and names["sparse_ce"].calls == 1
