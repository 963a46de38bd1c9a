"""The layers of MindSpore's ``nn`` list added for the beginner surface, against PyTorch
(values; gradients come from the functional ops, checked in test_ops_functional.py)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, Tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional
rng = np.random.default_rng(0)


def _x(*shape):
    return rng.normal(size=shape).astype(np.float32)


CASES = [
    (lambda: nn.ELU(), F.elu, (3, 4)), (lambda: nn.CELU(0.5), lambda t: F.celu(t, 0.5), (3, 4)),
    (lambda: nn.Hardtanh(-0.5, 0.5), lambda t: F.hardtanh(t, -0.5, 0.5), (3, 4)),
    (lambda: nn.HShrink(0.3), lambda t: F.hardshrink(t, 0.3), (3, 4)),
    (lambda: nn.SoftShrink(), F.softshrink, (3, 4)), (lambda: nn.HSigmoid(), F.hardsigmoid, (3, 4)),
    (lambda: nn.HSwish(), F.hardswish, (3, 4)), (lambda: nn.LogSigmoid(), F.logsigmoid, (3, 4)),
    (lambda: nn.Mish(), F.mish, (3, 4)), (lambda: nn.Softsign(), F.softsign, (3, 4)),
    (lambda: nn.ReLU6(), F.relu6, (3, 4)), (lambda: nn.SeLU(), F.selu, (3, 4)),
    (lambda: nn.SiLU(), F.silu, (3, 4)), (lambda: nn.Softmin(), lambda t: F.softmin(t, -1), (3, 4)),
    (lambda: nn.Tanhshrink(), F.tanhshrink, (3, 4)),
    (lambda: nn.Threshold(0.1, 20.0), lambda t: F.threshold(t, 0.1, 20.0), (3, 4)),
    (lambda: nn.PReLU(3, 0.1), lambda t: F.prelu(t, torch.full((3,), 0.1)), (2, 3, 4)),
    (lambda: nn.AvgPool1d(2, 2), lambda t: F.avg_pool1d(t, 2, 2), (2, 3, 8)),
    (lambda: nn.MaxPool1d(3, 1), lambda t: F.max_pool1d(t, 3, 1), (2, 3, 8)),
    (lambda: nn.AdaptiveAvgPool2d((2, 2)), lambda t: F.adaptive_avg_pool2d(t, (2, 2)), (1, 2, 5, 5)),
    (lambda: nn.AdaptiveMaxPool2d(3), lambda t: F.adaptive_max_pool2d(t, 3), (1, 2, 7, 5)),
    (lambda: nn.AdaptiveAvgPool1d(3), lambda t: F.adaptive_avg_pool1d(t, 3), (1, 2, 7)),
    (lambda: nn.Pad(((0, 0), (1, 2))), lambda t: F.pad(t, (1, 2)), (2, 3)),
    (lambda: nn.Pad(((0, 0), (0, 0), (1, 1)), "REFLECT"), lambda t: F.pad(t, (1, 1), mode="reflect"),
     (1, 2, 4)),
    (lambda: nn.ConstantPad2d((1, 0, 2, 1), 3.0), lambda t: F.pad(t, (1, 0, 2, 1), value=3.0), (1, 2, 3)),
    (lambda: nn.ZeroPad2d(1), lambda t: F.pad(t, (1, 1, 1, 1)), (1, 2, 3)),
    (lambda: nn.ReflectionPad2d(1), lambda t: F.pad(t, (1, 1, 1, 1), mode="reflect"), (1, 1, 3, 3)),
    (lambda: nn.LayerNorm((4,), epsilon=1e-5), lambda t: F.layer_norm(t, (4,)), (3, 4)),
    (lambda: nn.GroupNorm(2, 4), lambda t: F.group_norm(t, 2), (2, 4, 3)),
    (lambda: nn.InstanceNorm2d(3), lambda t: F.instance_norm(t), (2, 3, 4, 4)),
    (lambda: nn.Tril(), torch.tril, (4, 4)), (lambda: nn.Roll(1, 0), lambda t: torch.roll(t, 1, 0), (3, 2)),
]


@pytest.mark.parametrize("make,ref,shape", CASES, ids=[str(i) for i in range(len(CASES))])
def test_layer_matches_pytorch(make, ref, shape):
    x = _x(*shape)
    np.testing.assert_allclose(make()(Tensor(x)).asnumpy(), ref(torch.tensor(x)).numpy(), rtol=1e-4, atol=1e-5)


def test_conv1d_and_bidense_match_pytorch():
    ms.set_seed(0)
    conv = nn.Conv1d(3, 4, 3, pad_mode="pad", padding=1, has_bias=True)
    x = _x(2, 3, 6)
    want = F.conv1d(torch.tensor(x), torch.tensor(conv.weight.asnumpy()), torch.tensor(conv.bias.asnumpy()),
                    padding=1)
    np.testing.assert_allclose(conv(Tensor(x)).asnumpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    bi = nn.BiDense(3, 4, 2)
    a, b = _x(5, 3), _x(5, 4)
    want = F.bilinear(torch.tensor(a), torch.tensor(b), torch.tensor(bi.weight.asnumpy()),
                      torch.tensor(bi.bias.asnumpy()))
    np.testing.assert_allclose(bi(Tensor(a), Tensor(b)).asnumpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_losses_match_pytorch():
    p, y = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32), rng.uniform(0, 1, (3, 4)).astype(np.float32)
    assert float(nn.BCELoss()(Tensor(p), Tensor(y)).asnumpy()) == pytest.approx(
        F.binary_cross_entropy(torch.tensor(p), torch.tensor(y)).item(), rel=1e-5)
    logits, labels = _x(4, 5), np.array([0, 4, 2, 1])
    logp = torch.log_softmax(torch.tensor(logits), 1)
    assert float(nn.NLLLoss()(Tensor(logp.numpy()), Tensor(labels)).asnumpy()) == pytest.approx(
        F.nll_loss(logp, torch.tensor(labels)).item(), rel=1e-5)
    a, b = _x(3, 4), _x(3, 4)
    assert float(nn.HuberLoss(delta=0.5)(Tensor(a), Tensor(b)).asnumpy()) == pytest.approx(
        F.huber_loss(torch.tensor(a), torch.tensor(b), delta=0.5).item(), rel=1e-5)
    assert nn.SmoothL1Loss()(Tensor(a), Tensor(b)).shape == (3, 4)
    assert float(nn.RMSELoss()(Tensor(a), Tensor(b)).asnumpy()) == pytest.approx(
        np.sqrt(((a - b) ** 2).mean()), rel=1e-5)
    t = np.array([1.0, -1.0, 1.0], np.float32)
    assert float(nn.CosineEmbeddingLoss(0.1)(Tensor(a), Tensor(b), Tensor(t)).asnumpy()) == pytest.approx(
        F.cosine_embedding_loss(torch.tensor(a), torch.tensor(b), torch.tensor(t), 0.1).item(), rel=1e-5)
    focal = float(nn.FocalLoss(gamma=0.0)(Tensor(logits), Tensor(labels)).asnumpy())
    assert focal == pytest.approx(F.cross_entropy(torch.tensor(logits), torch.tensor(labels)).item(), rel=1e-5)


def test_wrappers():
    ms.set_seed(1)
    net = nn.Dense(3, 2)
    x, y = _x(4, 3), np.zeros((4, 2), np.float32)
    grads = nn.WithGradCell(net, nn.MSELoss())(Tensor(x), Tensor(y))
    loss, same = nn.ForwardValueAndGrad(nn.WithLossCell(net, nn.MSELoss()), net.trainable_params(),
                                        get_by_list=True)(Tensor(x), Tensor(y))
    assert all(np.allclose(g.asnumpy(), h.asnumpy()) for g, h in zip(grads, same))
    seq = Tensor(_x(2, 5, 3))
    out = nn.TimeDistributed(net, time_axis=1)(seq)
    assert out.shape == (2, 5, 2)
    assert np.allclose(out.asnumpy()[:, 2], net(seq[:, 2]).asnumpy())
    act = nn.get_activation("relu6")
    assert isinstance(act, nn.ReLU6) and isinstance(nn.get_activation("relu"), nn.ReLU)
    with pytest.raises(ValueError, match="unknown activation 'swishy'"):
        nn.get_activation("swishy")


def test_batchnorm3d_normalises_per_channel():
    x = _x(2, 3, 2, 4, 4) * 5 + 2
    out = nn.BatchNorm3d(3)(Tensor(x)).asnumpy()
    assert np.allclose(out.mean(axis=(0, 2, 3, 4)), 0, atol=1e-5)
    assert np.allclose(out.var(axis=(0, 2, 3, 4)), 1, atol=1e-3)


def test_refused_layers_say_what_to_use():
    with pytest.raises(NotImplementedError, match="AdaptiveAvgPool3d.*AdaptiveAvgPool2d"):
        nn.AdaptiveAvgPool3d(2)
    with pytest.raises(NotImplementedError, match="SyncBatchNorm.*BatchNorm2d"):
        nn.SyncBatchNorm(4)
    with pytest.raises(NotImplementedError, match="Unfold"):
        nn.Unfold([1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1])
    with pytest.raises(ValueError, match="mode must be 'CONSTANT' or 'REFLECT'"):
        nn.Pad(((1, 1),), mode="SYMMETRIC")
    with pytest.raises(ValueError, match="num_channels .* divisible"):
        nn.GroupNorm(3, 4)
    with pytest.raises(TypeError, match="nn.ELU: unexpected argument"):
        nn.ELU(beta=2)
