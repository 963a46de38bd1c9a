"""``ms.export(net, x, file_name, file_format="ONNX")``, ``ms.load`` and ``nn.GraphCell``:
the written graph is checked against ``onnx.reference`` and against the network itself."""
import os

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops, Tensor

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator   # noqa: E402


class Network(nn.Cell):
    """The save_load tutorial's network (smaller hidden layer)."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(nn.Dense(28 * 28, 64), nn.ReLU(), nn.Dense(64, 10))

    def construct(self, x):
        return self.dense_relu_sequential(self.flatten(x))


class SmallCNN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, pad_mode="same", has_bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, pad_mode="pad", padding=1)
        self.avg = nn.AvgPool2d(2, 2)
        self.fc = nn.Dense(24, 3)
        self.relu = nn.ReLU()
        self.mean = ops.ReduceMean(keep_dims=True)

    def construct(self, x):
        x = self.pool(self.relu(self.bn(self.conv1(x))))
        x = self.avg(self.relu(self.conv2(x)))
        x = x - self.mean(x, (2, 3)) * 0.5
        return ops.softmax(self.fc(ops.reshape(x, (x.shape[0], -1))), -1)


@pytest.mark.parametrize("make,shape", [(Network, (2, 1, 28, 28)), (SmallCNN, (2, 1, 16, 16))])
def test_export_matches_onnx_reference_and_loads_back(make, shape, tmp_path):
    ms.set_seed(0)
    net = make()
    net.set_train(False)
    x = Tensor(np.random.default_rng(0).random(shape, np.float32))
    want = net(x).asnumpy()
    path = ms.export(net, x, file_name=str(tmp_path / "model"), file_format="ONNX")
    assert path.endswith("model.onnx") and os.path.exists(path)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    ref = ReferenceEvaluator(model).run(None, {"x": x.asnumpy()})[0]
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6)
    graph = nn.GraphCell(ms.load(path))
    np.testing.assert_allclose(graph(x).asnumpy(), want, rtol=1e-6, atol=1e-7)
    # parameters keep their names as initializers
    names = {init.name for init in model.graph.initializer}
    assert {p.name for p in net.trainable_params()} <= names


def test_export_traces_in_inference_mode_and_restores_the_mode(tmp_path):
    net = SmallCNN()
    net.set_train(True)
    x = Tensor(np.random.default_rng(1).random((2, 1, 16, 16), np.float32))
    path = ms.export(net, x, file_name=str(tmp_path / "cnn"), file_format="ONNX")
    assert net.training
    assert [n.op_type for n in onnx.load(path).graph.node].count("BatchNormalization") == 1
    net.set_train(False)
    np.testing.assert_allclose(nn.GraphCell(ms.load(path))(x).asnumpy(), net(x).asnumpy(), rtol=1e-6)


def test_bad_exports_write_nothing(tmp_path):
    x = Tensor(np.ones((1, 4), np.float32))

    class Sorting(nn.Cell):
        def construct(self, t):
            return ops.sort(t)[0]

    with pytest.raises(ValueError, match=r"primitive .*\(Sort\) has no ONNX conversion"):
        ms.export(Sorting(), x, file_name=str(tmp_path / "s"), file_format="ONNX")
    with pytest.raises(ValueError, match="MINDIR.*not written here"):
        ms.export(nn.Dense(4, 2), x, file_name=str(tmp_path / "d"), file_format="MINDIR")
    with pytest.raises(TypeError, match="file_name must be a non-empty str"):
        ms.export(nn.Dense(4, 2), x, file_name="", file_format="ONNX")
    assert os.listdir(tmp_path) == []
    with pytest.raises(OSError, match="no such file"):
        ms.load(str(tmp_path / "missing.onnx"))
    with pytest.raises(ValueError, match="MindIR/AIR file"):
        ms.load(str(tmp_path / "net.mindir"))
