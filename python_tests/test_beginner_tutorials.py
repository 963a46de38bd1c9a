"""MindSpore's nine beginner tutorials (quick_start, tensor, dataset, model, autograd, train,
save_load, accelerate_with_static_graph, mixed_precision) as this project's tests: the
tutorials' own flow and names, with a small synthetic MNIST in the real IDX format instead
of the download. Values the tutorials print are checked where they do not depend on data."""
import os

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops, Tensor, Parameter
from minitorch_dist.dataset import MnistDataset, transforms, vision, write_mnist_idx


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """64 train and 32 test 28x28 images whose label is the bright quadrant (learnable)."""
    root = tmp_path_factory.mktemp("MNIST_Data")
    rng = np.random.default_rng(0)
    for folder, prefix, n in (("train", "train", 64), ("test", "t10k", 32)):
        labels = rng.integers(0, 4, n)
        images = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
        for i, lab in enumerate(labels):
            r, c = divmod(int(lab), 2)
            images[i, r * 14:(r + 1) * 14, c * 14:(c + 1) * 14] += 200
        os.makedirs(root / folder, exist_ok=True)
        write_mnist_idx(str(root / folder), images, labels, prefix=prefix)
    return root


def datapipe(path, batch_size):
    image_transforms = [vision.Rescale(1.0 / 255.0, 0), vision.Normalize(mean=(0.1307,), std=(0.3081,)),
                        vision.HWC2CHW()]
    dataset = MnistDataset(path)
    dataset = dataset.map(image_transforms, "image")
    dataset = dataset.map(transforms.TypeCast(ms.int32), "label")
    return dataset.batch(batch_size)


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(
            nn.Dense(28 * 28, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(), nn.Dense(512, 10))

    def construct(self, x):
        return self.dense_relu_sequential(self.flatten(x))


def _train_epochs(model, dataset, epochs, lr=1e-2):
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), lr)

    def forward_fn(data, label):
        logits = model(data)
        return loss_fn(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    losses = []
    model.set_train()
    for _ in range(epochs):
        for data, label in dataset.create_tuple_iterator():
            (loss, _), grads = grad_fn(data, label)
            optimizer(grads)
            losses.append(float(loss.asnumpy()))
    return losses


def _accuracy(model, dataset):
    model.set_train(False)
    correct = total = 0
    for data, label in dataset.create_tuple_iterator():
        pred = model(data)
        total += len(data)
        correct += (pred.argmax(1) == label).asnumpy().sum()
    return correct / total


def test_quick_start_and_train(mnist_dir, tmp_path):
    train = datapipe(str(mnist_dir / "train"), 16)
    test = datapipe(str(mnist_dir / "test"), 16)
    image, label = next(train.create_tuple_iterator())
    assert (image.shape, image.dtype, label.shape, label.dtype) == ((16, 1, 28, 28), ms.float32, (16,), ms.int32)
    ms.set_seed(1)
    model = Network()
    losses = _train_epochs(model, train, 3, lr=5e-2)
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert _accuracy(model, test) > 0.5
    ckpt = str(tmp_path / "model.ckpt")
    ms.save_checkpoint(model, ckpt)
    fresh = Network()
    param_not_load, _ = ms.load_param_into_net(fresh, ms.load_checkpoint(ckpt))
    assert param_not_load == []
    x = next(test.create_tuple_iterator())[0]
    assert np.array_equal(fresh(x).asnumpy(), model(x).asnumpy())


def test_tensor_tutorial_values():
    x_data = Tensor([1, 0, 1, 0])
    assert (x_data.shape, x_data.dtype) == ((4,), ms.int64)
    from minitorch_dist.common.initializer import One, Normal
    assert Tensor(shape=(2, 2), dtype=ms.float32, init=One()).asnumpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert Tensor(shape=(2, 2), dtype=ms.float32, init=Normal()).shape == (2, 2)
    assert ops.ones_like(x_data).asnumpy().tolist() == [1, 1, 1, 1]
    assert ops.zeros_like(x_data).asnumpy().tolist() == [0, 0, 0, 0]
    x = Tensor(np.array([[1, 2], [3, 4]]), ms.int32)
    assert (x.shape, x.dtype, x.itemsize, x.nbytes, x.ndim, x.size, x.strides) == (
        (2, 2), ms.int32, 4, 16, 2, 4, (8, 4))
    t = Tensor(np.array([[0, 1], [2, 3]]).astype(np.float32))
    assert t[0].tolist() == [0.0, 1.0] and t[1, 1].item() == 3.0
    assert t[:, -1].tolist() == [1.0, 3.0] and t[..., 0].tolist() == [0.0, 2.0]
    a, b = Tensor(np.array([1, 2, 3]), ms.float32), Tensor(np.array([4, 5, 6]), ms.float32)
    assert (b % a).tolist() == [0.0, 1.0, 0.0] and (b // a).tolist() == [4.0, 2.0, 2.0]
    assert (b / a).tolist() == [4.0, 2.5, 2.0]
    d1, d2 = Tensor(np.array([[0, 1], [2, 3]]).astype(np.float32)), Tensor(np.array([[4, 5], [6, 7]]).astype(np.float32))
    assert ops.concat((d1, d2), axis=0).shape == (4, 2) and ops.stack([d1, d2]).shape == (2, 2, 2)
    n = np.ones(5)
    shared = Tensor.from_numpy(n)
    np.add(n, 1, out=n)
    assert shared.tolist() == [2.0] * 5


def test_model_tutorial_shapes_and_parameters():
    model = Network()
    X = ops.ones((3, 28, 28), ms.float32)
    logits = model(X)
    assert logits.shape == (3, 10)
    pred = nn.Softmax(axis=1)(logits).argmax(1)
    assert pred.shape == (3,)
    sizes = [(name, p.shape) for name, p in model.parameters_and_names()]
    assert sizes[0] == ("dense_relu_sequential.0.weight", (512, 784))
    assert sizes[-1] == ("dense_relu_sequential.4.bias", (10,))


def test_autograd_tutorial_matches_its_printed_values():
    np.random.seed(42)
    x = ops.ones(5, ms.float32)
    y = ops.zeros(3, ms.float32)
    w = Parameter(Tensor(np.random.randn(5, 3), ms.float32), name="w")
    b = Parameter(Tensor(np.random.randn(3,), ms.float32), name="b")

    def function(x, y, w, b):
        z = ops.matmul(x, w) + b
        return ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))

    def function_with_logits(x, y, w, b):
        z = ops.matmul(x, w) + b
        return function(x, y, w, b), z

    def function_stop_gradient(x, y, w, b):
        loss, z = function_with_logits(x, y, w, b)
        return loss, ops.stop_gradient(z)

    assert float(function(x, y, w, b).asnumpy()) == pytest.approx(1.342315, abs=1e-6)
    gw, gb = ms.grad(function, (2, 3))(x, y, w, b)
    np.testing.assert_allclose(gb.asnumpy(), [0.32618925, 0.0158914644, 0.0421645455], rtol=1e-5)
    assert gw.shape == (5, 3) and np.allclose(gw.asnumpy(), gb.asnumpy())
    gw, gb = ms.grad(function_with_logits, (2, 3))(x, y, w, b)      # z's gradient adds ones
    np.testing.assert_allclose(gb.asnumpy(), [1.32618928, 1.01589143, 1.04216456], rtol=1e-5)
    gw, gb = ms.grad(function_stop_gradient, (2, 3))(x, y, w, b)
    np.testing.assert_allclose(gb.asnumpy(), [0.32618925, 0.0158914644, 0.0421645455], rtol=1e-5)
    (gw, gb), (z,) = ms.grad(function_with_logits, (2, 3), has_aux=True)(x, y, w, b)
    np.testing.assert_allclose(z.asnumpy(), [3.8211915, -2.994512, -1.932323], rtol=1e-5)


def test_save_load_tutorial_refuses_mindir_and_exports_onnx(tmp_path):
    model = Network()
    ms.set_context(mode=ms.GRAPH_MODE, jit_syntax_level=ms.STRICT)
    try:
        inputs = Tensor(np.ones([1, 1, 28, 28]).astype(np.float32))
        target = str(tmp_path / "model")
        with pytest.raises(ValueError, match="file_format='MINDIR' is not written here.*ONNX"):
            ms.export(model, inputs, file_name=target, file_format="MINDIR")
        with pytest.raises(ValueError, match="file_format must be one of"):
            ms.export(model, inputs, file_name=target, file_format="PB")
        assert os.listdir(tmp_path) == []      # nothing written on failure
        with pytest.raises(ValueError, match="MindIR/AIR file"):
            ms.load(str(tmp_path / "model.mindir"))
        with pytest.raises(TypeError, match="GraphCell: graph must be"):
            nn.GraphCell(None)
        path = ms.export(model, inputs, file_name=target, file_format="ONNX")   # what to use instead
        outputs = nn.GraphCell(ms.load(path))(inputs)
        assert outputs.shape == (1, 10)
        assert np.allclose(outputs.asnumpy(), model(inputs).asnumpy(), atol=1e-6)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_static_graph_tutorial_gives_the_eager_result():
    ms.set_seed(2)
    model = Network()
    x = Tensor(np.ones([4, 1, 28, 28]).astype(np.float32))
    eager = model(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        assert np.allclose(model(x).asnumpy(), eager)
        assert np.allclose(ms.jit(lambda t: model(t))(x).asnumpy(), eager)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_mixed_precision_tutorial_flow(mnist_dir):
    from minitorch_dist.amp import (DynamicLossScaler, FixedLossScaleManager, all_finite,
                                    auto_mixed_precision, build_train_network)
    train = datapipe(str(mnist_dir / "train"), 16)
    ms.set_seed(3)
    model = auto_mixed_precision(Network(), "O2")
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), 5e-2)
    loss_scaler = DynamicLossScaler(scale_value=2 ** 16, scale_factor=2, scale_window=50)

    def forward_fn(data, label):
        logits = model(data)
        return loss_scaler.scale(loss_fn(logits, label)), logits

    grad_fn = ms.value_and_grad(forward_fn, None, model.trainable_params(), has_aux=True)

    @ms.jit
    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        loss = loss_scaler.unscale(loss)
        is_finite = all_finite(grads)
        if is_finite:
            optimizer(loss_scaler.unscale(grads))
        loss_scaler.adjust(is_finite)
        return loss

    model.set_train()
    losses = [float(train_step(d, lab).asnumpy()) for _ in range(3) for d, lab in train.create_tuple_iterator()]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    net = Network()
    step = build_train_network(net, nn.SGD(net.trainable_params(), 1e-2), loss_fn, level="O2",
                               loss_scale_manager=FixedLossScaleManager())
    data, label = next(train.create_tuple_iterator())
    loss, overflow, scale = step(data, label)
    assert not bool(overflow) and float(scale) == 128.0
