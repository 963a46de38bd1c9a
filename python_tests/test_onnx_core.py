"""minitorch_dist.onnx: GraphBuilder models run by ``load`` match ONNX's reference
evaluator, loaded weights train, and bad input is refused clearly."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

import minitorch_dist as ms  # noqa: E402
from minitorch_dist.onnx import GraphBuilder, load, register  # noqa: E402

RNG = np.random.default_rng(0)


def _mlp():
    g = GraphBuilder("mlp")
    x = g.input(np.zeros((4, 3), np.float32), name="x")
    w1 = g.constant(RNG.standard_normal((3, 5)).astype(np.float32), name="w1")
    b1 = g.constant(RNG.standard_normal(5).astype(np.float32), name="b1")
    h = g.node("Relu", [g.node("Add", [g.node("MatMul", [x, w1]), b1])])
    w2 = g.constant(RNG.standard_normal((5, 2)).astype(np.float32), name="w2")
    y = g.node("Gemm", [h, w2], alpha=0.5)
    z = g.node("Softmax", [g.node("Tanh", [y])], axis=1)
    s = g.node("ReduceSum", [z, g.constant(np.array([1], np.int64))], keepdims=0)
    g.output(z, (4, 2), np.float32)
    g.output(s, (4,), np.float32)
    return g.build()


def test_loaded_graph_matches_the_reference_evaluator(tmp_path):
    model = _mlp()
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    path = str(tmp_path / "mlp.onnx")
    onnx.save(model, path)
    fn = load(path)
    got = fn(x)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5, atol=1e-6)
    assert [p.name for p in fn.parameters()] == ["w1", "b1", "w2"]


def test_loaded_weights_receive_gradients():
    fn = load(_mlp())
    z, _ = fn(ms.Tensor(RNG.standard_normal((4, 3)).astype(np.float32)))
    loss = (z * z).sum()
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in fn.parameters())


def test_missing_kernels_bad_inputs_and_paths_are_clear_errors(tmp_path):
    g = GraphBuilder()
    x = g.input(np.zeros((2,), np.float32))
    g.output(g.node("Hardmax", [x]), (2,), np.float32)
    with pytest.raises(NotImplementedError, match="Hardmax"):
        load(g.build())
    with pytest.raises(OSError, match="no ONNX file"):
        load(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="ModelProto"):
        load(3)
    with pytest.raises(ValueError, match="input"):
        load(_mlp())()
    with pytest.raises(TypeError, match="callable"):
        register("Hardmax", None)
