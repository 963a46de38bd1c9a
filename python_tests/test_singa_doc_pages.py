"""What SINGA's documentation pages (apache/singa-doc, docs-site/docs: tensor, autograd,
optimizer, device, graph, half-precision, time-profiling, dist-train, onnx) show users, as
this project's own checks: the same calls, with small synthetic data (issue 27)."""
import numpy as np
import pytest

from minitorch_dist.singa import autograd, device, layer, model, opt, sonnx, tensor
from minitorch_dist.singa import singa_wrap as singa

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:.*graph mode runs eagerly:UserWarning")]


def test_tensor_page_shapes_arithmetic_and_devices():
    t = tensor.from_numpy(np.array([[2.0, 0.0, 1.0]], np.float32))
    assert t.transpose([1, 0]).shape == (3, 1)
    r = tensor.random((2, 3, 4, 5))
    assert r.reshape((3, 2, 5, 4)).transpose((3, 2, 1, 0)).shape == (4, 5, 2, 3)
    np.testing.assert_allclose(tensor.to_numpy(tensor.log(t + 1)), np.log([[3.0, 1.0, 2.0]]),
                               rtol=1e-6)
    rows = tensor.from_numpy(np.array([[2.0, 4.0], [6.0, 8.0]], np.float32))
    rows /= tensor.from_numpy(np.array([[2.0, 4.0]], np.float32))      # broadcast, in place
    assert tensor.to_numpy(rows).tolist() == [[1.0, 1.0], [3.0, 2.0]]
    assert tensor.mult(tensor.random((3, 1, 2, 4)), tensor.random((2, 4, 5))).shape == \
        (3, 2, 2, 5)                               # batch axes broadcast
    x = tensor.Tensor((2, 2), device.create_cuda_gpu())
    x.gaussian(0.0, 1.0)
    x.to_device(device.get_default_device())
    assert x.device is device.get_default_device().core


def test_autograd_page_leaves_bias_rows_and_float_held_labels():
    w = tensor.Tensor(shape=(2, 2), requires_grad=True, stores_grad=True)
    w.set_value(0.5)
    b = tensor.Tensor(shape=(1, 2), requires_grad=True, stores_grad=True)   # a (1, N) bias
    b.set_value(0.0)
    x = tensor.Tensor(data=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32))
    labels = tensor.Tensor(data=np.array([0, 1, 1], np.int32))     # held as float32 values
    assert labels.dtype == tensor.float32
    autograd.training = True
    try:
        loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(x, w), b),
                                              labels)
        sgd = opt.SGD(0.1)
        for p, g in autograd.backward(loss):
            sgd.update(p, g)
    finally:
        autograd.training = False
    np.testing.assert_allclose(float(tensor.to_numpy(loss)[0]), np.log(2.0), rtol=1e-6)
    # d(mean loss)/d(logits) = (softmax - one_hot) / 3 = (1/6, -1/6) summed over the rows
    np.testing.assert_allclose(tensor.to_numpy(b), [[-1 / 60, 1 / 60]], rtol=1e-5)
    with pytest.raises(TypeError, match="whole numbers"):
        autograd.softmax_cross_entropy(x, tensor.Tensor(data=np.array([0.5, 1, 0], np.float32)))


def test_autograd_page_layers_are_the_layer_classes():
    for name in ("Conv2d", "BatchNorm2d", "MaxPool2d", "AvgPool2d", "Linear"):
        assert getattr(autograd, name) is getattr(layer, name)
    conv, bn = autograd.Conv2d(1, 4, 3, padding=1, bias=False), autograd.BatchNorm2d(4)
    pool, fc = autograd.MaxPool2d(3, 1, padding=1), autograd.Linear(4 * 5 * 5, 3)
    x = tensor.from_numpy(np.random.default_rng(0).random((2, 1, 5, 5)).astype(np.float32))
    y = fc(autograd.flatten(pool(bn(autograd.relu(conv(x))))))
    assert y.shape == (2, 3) and conv.W.shape == (4, 1, 3, 3)


def test_optimizer_page_constructors_and_decay():
    assert opt.SGD(lr=0.001, momentum=0.9, weight_decay=1e-4).momentum == 0.9
    opt.RMSProp(lr=0.001, rho=0.9, epsilon=1e-8, weight_decay=1e-4)
    opt.AdaGrad(lr=0.001, epsilon=1e-8, weight_decay=1e-4)
    opt.Adam(lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=1e-4)
    sgd = opt.SGD(lr=opt.ExponentialDecay(0.2, 2, 0.5, True), momentum=0.9)
    values = []
    for _ in range(4):
        values.append(float(tensor.to_numpy(sgd.lr_value)[0]))
        sgd.step()
    assert values == pytest.approx([0.2, 0.2, 0.1, 0.1])


def test_device_page_lists_of_gpus_and_profiling_calls(capsys):
    assert len(device.create_cuda_gpus(2)) == 2
    assert len(device.create_cuda_gpus([0, 3])) == 2          # ids, as the page writes
    dev = device.create_cuda_gpu()
    dev.SetVerbosity(2)
    dev.SetSkipIteration(1)
    dev.PrintTimeProfiling()
    dev.SetVerbosity(0)


def test_graph_page_mult_on_the_raw_tensors():
    a, b = tensor.random((2, 3)), tensor.random((3, 4))
    product = tensor.from_raw_tensor(singa.Mult(a.data, b.data))
    np.testing.assert_allclose(tensor.to_numpy(product),
                               tensor.to_numpy(a) @ tensor.to_numpy(b), rtol=1e-5)


def test_half_precision_page_as_type_and_sum():
    x = tensor.random((2, 3))
    y = x.as_type(tensor.float16)
    assert y.dtype == tensor.float16 and (y + y).dtype == tensor.float16
    np.testing.assert_allclose(tensor.to_numpy(y + y), 2 * tensor.to_numpy(x), rtol=2e-3)


class _TinyNet(model.Model):
    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(3)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(x)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optimizer(loss)
        return out, loss


def _onnx_model():
    x = tensor.from_numpy(np.random.default_rng(1).random((4, 5)).astype(np.float32))
    hidden = layer.Linear(6)
    return x, sonnx.to_onnx([x], [autograd.relu(hidden(x))])


def test_onnx_page_sonnx_model_run_cut_train_and_files(tmp_path):
    x, onnx_model = _onnx_model()
    path = str(tmp_path / "m.onnx")
    sonnx.save(onnx_model, path)

    class Head(sonnx.SONNXModel):
        def __init__(self, proto):
            super().__init__(proto)
            self.head = layer.Linear(2)

        def forward(self, *xs):
            return self.head(super().forward(*xs, last_layers=-1)[0])   # before the ReLU

        def train_one_batch(self, xb, yb):
            loss = autograd.softmax_cross_entropy(self.forward(xb), yb)
            self.optimizer(loss)
            return loss

    net = Head(sonnx.load(path))
    net.set_optimizer(opt.SGD(lr=0.5))
    tx = tensor.Tensor((4, 5))
    net.compile([tx], is_train=True, use_graph=True, sequential=True)
    names = sorted(net.get_params())
    before = {k: tensor.to_numpy(v) for k, v in net.get_params().items()}
    net(x, tensor.from_numpy(np.array([0, 1, 0, 1], np.int32)))
    moved = [k for k in names if not np.allclose(before[k], tensor.to_numpy(net.get_params()[k]))]
    assert any(k.startswith("onnx_") for k in moved) and any("head" in k for k in moved)
    with pytest.raises(ValueError, match="aux_output"):
        net.sg_ir and sonnx.SONNXModel.forward(net, x, aux_output=("y",))
