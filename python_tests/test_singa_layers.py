"""SINGA's layers on the facade: every new layer against PyTorch, SINGA's registration and
attribute rules, closure- and list-held layers being trained, and states round trips.

* BatchNorm2d (train and evaluation, SINGA's momentum), Conv2d with groups, SeparableConv2d,
  Gemm, AvgPool2d, Add, Cat, Dropout equal PyTorch in value and gradient;
* ``register_layers`` names layers ``<Class>_<i>`` (or by an OrderedDict), a plain
  attribute may come before ``super().__init__()``, a layer may not;
* a layer reached only through a closure (ResNet's downsample) or an unregistered list is
  found on the tape and trained, both with ``opt.SGD`` alone and through ``Model.compile``;
* ``save_states``/``load_states`` restore parameters and BatchNorm's running statistics.
"""
from collections import OrderedDict

import numpy as np
import pytest

from minitorch_dist.singa import autograd, layer, model, opt, tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def training_on():
    autograd.training = True
    yield
    autograd.training = False


def T(array):
    return tensor.from_numpy(np.asarray(array, np.float32))


def param_grads(loss):
    return {id(p): g.data for p, g in autograd.backward(loss)}


def weighted_sum(out, seed=5):
    w = np.random.default_rng(seed).normal(size=out.shape).astype(np.float32)
    return autograd.reduce_sum(autograd.mul(out, T(w)), None, 0), torch.tensor(w)


R = np.random.default_rng(0)
X = R.normal(size=(4, 6, 7, 7)).astype(np.float32)


def _input():
    return T(X), torch.tensor(X, requires_grad=True)


def test_batchnorm2d_matches_pytorch_in_training_and_evaluation():
    bn = layer.BatchNorm2d(6)
    ref = torch.nn.BatchNorm2d(6, momentum=0.9, eps=1e-5)     # SINGA's 0.9 weighs the batch
    x = tensor.Tensor(data=X, stores_grad=True)
    xt = torch.tensor(X, requires_grad=True)
    out = bn(x)
    expect = ref(xt)
    assert np.allclose(out.asnumpy(), expect.detach().numpy(), atol=1e-4)
    loss, w = weighted_sum(out)
    grads = param_grads(loss)
    (expect * w).sum().backward()
    assert np.allclose(grads[id(bn.scale)], ref.weight.grad.numpy(), atol=1e-4)
    assert np.allclose(grads[id(bn.bias)], ref.bias.grad.numpy(), atol=1e-4)
    assert np.allclose(grads[id(x)], xt.grad.numpy(), atol=1e-4)
    assert np.allclose(bn.running_mean.asnumpy(), ref.running_mean.numpy(), atol=1e-5)
    assert np.allclose(bn.running_var.asnumpy(), ref.running_var.numpy(), atol=1e-5)
    autograd.training = False
    ref.eval()
    assert np.allclose(bn(T(X)).asnumpy(), ref(torch.tensor(X)).detach().numpy(), atol=1e-4)
    assert sorted(bn.get_states()) == ["bias", "running_mean", "running_var", "scale"]
    assert sorted(bn.get_params()) == ["bias", "scale"]


def test_conv2d_with_groups_matches_pytorch():
    conv = layer.Conv2d(6, 3, stride=2, padding=1, group=3)
    x = tensor.Tensor(data=X, stores_grad=True)
    out = conv(x)
    xt = torch.tensor(X, requires_grad=True)
    wt = torch.tensor(conv.W.asnumpy(), requires_grad=True)
    bt = torch.tensor(conv.b.asnumpy(), requires_grad=True)
    expect = F.conv2d(xt, wt, bt, stride=2, padding=1, groups=3)
    assert conv.W.shape == (6, 2, 3, 3)
    assert np.allclose(out.asnumpy(), expect.detach().numpy(), atol=1e-4)
    loss, w = weighted_sum(out)
    grads = param_grads(loss)
    (expect * w).sum().backward()
    for mine, theirs in ((conv.W, wt), (conv.b, bt), (x, xt)):
        assert np.allclose(grads[id(mine)], theirs.grad.numpy(), atol=1e-4)


def test_separable_conv2d_is_depthwise_then_pointwise_like_pytorch():
    sep = layer.SeparableConv2d(6, 8, 3, stride=1, padding=1)     # SINGA's older form
    x = tensor.Tensor(data=X, stores_grad=True)
    out = sep(x)
    assert sorted(sep.get_params()) == ["depthwise_conv.W", "point_conv.W"]
    dw = torch.tensor(sep.depthwise_conv.W.asnumpy(), requires_grad=True)
    pw = torch.tensor(sep.point_conv.W.asnumpy(), requires_grad=True)
    xt = torch.tensor(X, requires_grad=True)
    expect = F.conv2d(F.conv2d(xt, dw, padding=1, groups=6), pw)
    assert dw.shape == (6, 1, 3, 3) and pw.shape == (8, 6, 1, 1)
    assert np.allclose(out.asnumpy(), expect.detach().numpy(), atol=1e-4)
    loss, w = weighted_sum(out)
    grads = param_grads(loss)
    (expect * w).sum().backward()
    assert np.allclose(grads[id(sep.depthwise_conv.W)], dw.grad.numpy(), atol=1e-4)
    assert np.allclose(grads[id(sep.point_conv.W)], pw.grad.numpy(), atol=1e-4)


@pytest.mark.parametrize("transA, transB", [(False, True), (True, False)])
def test_gemm_matches_pytorch(transA, transB):
    a = R.normal(size=(5, 4)).astype(np.float32)
    gemm = layer.Gemm(3, alpha=0.5, beta=2.0, transA=transA, transB=transB)
    x = tensor.Tensor(data=a, stores_grad=True)
    out = gemm(x)
    assert gemm.W.shape == ((3, 5 if transA else 4) if transB else (5 if transA else 4, 3))
    assert gemm.b.shape == (1, 3)
    gemm.b.set_value(0.25)
    out = gemm(x)
    at = torch.tensor(a, requires_grad=True)
    wt = torch.tensor(gemm.W.asnumpy(), requires_grad=True)
    bt = torch.tensor(gemm.b.asnumpy(), requires_grad=True)
    expect = 0.5 * (at.T if transA else at) @ (wt.T if transB else wt) + 2.0 * bt
    assert np.allclose(out.asnumpy(), expect.detach().numpy(), atol=1e-5)
    loss, w = weighted_sum(out)
    grads = param_grads(loss)
    (expect * w).sum().backward()
    for mine, theirs in ((gemm.W, wt), (gemm.b, bt), (x, at)):
        assert np.allclose(grads[id(mine)], theirs.grad.numpy(), atol=1e-5)


def test_avgpool_add_cat_dropout_and_small_layers():
    x, xt = _input()
    assert np.allclose(layer.AvgPool2d(3, 2)(x).asnumpy(), F.avg_pool2d(xt, 3, 2).detach().numpy(),
                       atol=1e-6)
    padded = F.avg_pool2d(xt, 3, 2, 1, count_include_pad=False).detach().numpy()
    assert np.allclose(layer.AvgPool2d(3, 2, padding=1)(x).asnumpy(), padded, atol=1e-6)
    assert np.array_equal(layer.Add()(x, x).asnumpy(), 2 * X)
    assert layer.Cat(1)([x, x]).shape == (4, 12, 7, 7)
    assert np.allclose(layer.Sigmoid()(x).asnumpy(), torch.sigmoid(xt).detach().numpy(), atol=1e-6)
    assert np.allclose(layer.Tanh()(x).asnumpy(), np.tanh(X), atol=1e-6)
    assert np.allclose(layer.SoftMax()(T(X[:, :, 0, 0])).asnumpy().sum(axis=1), 1.0)
    assert layer.Reshape()(x, (4, -1)).shape == (4, 294)
    assert layer.MeanSquareError()(x, x).asnumpy().tolist() == [0.0]
    drop = layer.Dropout(0.25)
    kept = drop(x).asnumpy()
    assert np.allclose(kept[kept != 0] / X[kept != 0], 1 / 0.75)
    assert 0.1 < (kept == 0).mean() < 0.4
    autograd.training = False
    assert np.array_equal(drop(x).asnumpy(), X)


# ---- registration and SINGA's attribute rules ---------------------------------------------
class Listed(layer.Layer):
    def __init__(self, as_dict=False):
        self.width = 3                          # a plain attribute before super().__init__()
        super().__init__()
        self.blocks = [layer.Linear(self.width), layer.ReLU(), layer.Linear(2)]
        if as_dict:
            self.register_layers(OrderedDict(first=self.blocks[0], relu=self.blocks[1],
                                             last=self.blocks[2]))
        else:
            self.register_layers(*self.blocks)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_register_layers_names_like_singa_and_plain_attributes_may_precede_init():
    net = Listed()
    net(T(np.ones((2, 4))))
    assert sorted(net.get_params()) == ["Linear_0.W", "Linear_0.b", "Linear_2.W", "Linear_2.b"]
    assert net.Linear_0 is net.blocks[0]
    named = Listed(as_dict=True)
    named(T(np.ones((2, 4))))
    assert sorted(named.get_params()) == ["first.W", "first.b", "last.W", "last.b"]

    class Early(layer.Layer):
        def __init__(self):
            self.fc = layer.Linear(2)
            super().__init__()

    with pytest.raises(AttributeError, match=r"must call super\(\).__init__\(\) before setting "
                                             "the Linear attribute 'fc'"):
        Early()
    with pytest.raises(TypeError, match="layer.Layer.register_layers: expected layers"):
        Listed().register_layers(3)


def _downsample_block():
    class Block(layer.Layer):
        def __init__(self, downsample):
            super().__init__()
            self.conv = layer.Conv2d(4, 3, padding=1, bias=False)
            self.add = layer.Add()
            self.downsample = downsample

        def forward(self, x):
            return self.add(self.conv(x), self.downsample(x))

    conv = layer.Conv2d(4, 1, bias=False)
    bn = layer.BatchNorm2d(4)

    def _downsample(x):
        return bn(conv(x))

    return Block(_downsample), conv, bn


class Net(model.Model):
    """A block with a closure-held downsample, and a list of layers nobody registers."""

    def __init__(self):
        super().__init__()
        block, conv, bn = _downsample_block()
        self.block = block
        self.hidden = [layer.Linear(5)]            # in a list, never registered
        self.flatten = layer.Flatten()
        self.loss = layer.SoftMaxCrossEntropy()
        object.__setattr__(self, "closure_layers", (conv, bn))

    def forward(self, x):
        return self.hidden[0](self.flatten(self.block(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def test_closure_and_list_held_layers_are_trained_and_saved(tmp_path):
    net = Net()
    net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    tx = T(R.normal(size=(4, 2, 6, 6)))
    ty = tensor.from_numpy(np.array([0, 1, 2, 3], np.int32))
    net.compile([tx], is_train=True)
    conv, bn = net.closure_layers
    names = net.get_states()
    assert "block.downsample.conv.W" in names and "block.downsample.bn.running_var" in names
    assert "_unregistered.p0" in names and "_unregistered.p1" in names    # the listed Linear
    before = {k: v.asnumpy().copy() for k, v in net.get_params().items()}
    net(tx, ty)
    after = net.get_params()
    assert all(not np.array_equal(before[k], after[k].asnumpy()) for k in before), [
        k for k in before if np.array_equal(before[k], after[k].asnumpy())]

    path = str(tmp_path / "states.zip")
    net.save_states(path, aux_states={"epoch": tensor.from_numpy(np.array([3], np.int32))})
    with pytest.raises(FileExistsError, match="model.Model.save_states"):
        net.save_states(path)
    fresh = Net()
    fresh.compile([tx], is_train=True)
    aux = fresh.load_states(path)
    assert aux["epoch"].asnumpy().tolist() == [3]
    for k, v in net.get_states().items():
        assert np.array_equal(fresh.get_states()[k].asnumpy(), v.asnumpy()), k
    fresh.eval()
    net.eval()
    assert np.array_equal(fresh(tx).asnumpy(), net(tx).asnumpy())


def test_closure_held_layers_train_without_a_model():
    block, conv, bn = _downsample_block()
    x = T(R.normal(size=(4, 2, 6, 6)))
    sgd = opt.SGD(lr=0.1)
    block(x)
    before = conv.W.asnumpy().copy(), bn.scale.asnumpy().copy()
    sgd(autograd.reduce_mean(autograd.mul(block(x), block(x)), None, 0))
    assert not np.array_equal(before[0], conv.W.asnumpy())
    assert not np.array_equal(before[1], bn.scale.asnumpy())
    assert sorted(block.get_params()) == ["conv.W", "downsample.bn.bias", "downsample.bn.scale",
                                          "downsample.conv.W"]


@pytest.mark.parametrize("call, error, message", [
    (lambda: layer.BatchNorm2d(momentum=1.5), ValueError, "layer.BatchNorm2d: momentum"),
    (lambda: layer.BatchNorm2d(3)(T(np.ones((2, 4, 3, 3)))), ValueError,
     "layer.BatchNorm2d: declared 3 channels but the input has 4"),
    (lambda: layer.BatchNorm2d(3)(T(np.ones((2, 3)))), ValueError,
     "layer.BatchNorm2d: expected a 4-D input"),
    (lambda: layer.SeparableConv2d(0, 3), ValueError, "layer.SeparableConv2d: nb_kernels"),
    (lambda: layer.SeparableConv2d(3, 4, 3)(T(np.ones((1, 2, 5, 5)))), ValueError,
     "layer.SeparableConv2d: declared 3 input channels"),
    (lambda: layer.Gemm(3, alpha="x"), TypeError, "layer.Gemm: alpha must be a number"),
    (lambda: layer.Cat(axis=1.5), TypeError, "layer.Cat: axis must be an int"),
    (lambda: layer.Conv2d(4, 3, group=3)(T(np.ones((1, 4, 5, 5)))), ValueError,
     r"layer.Conv2d: input channels \(4\) and nb_kernels \(4\) must both divide by group"),
])
def test_bad_layer_arguments_name_the_singa_call(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_closure_over_the_layer_itself_adds_no_second_name():
    class Wrapped(layer.Layer):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(3)
            self.fn = lambda x: self.fc(x)

        def forward(self, x):
            return self.fn(x)

    net = Wrapped()
    net(T(np.ones((2, 4))))
    assert sorted(net.get_params()) == ["fc.W", "fc.b"]
