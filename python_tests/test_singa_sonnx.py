"""SINGA's ``sonnx``: models built with the facade export to ONNX whose reference evaluation
(``onnx.reference``) matches the facade, and ``prepare(...).run`` reproduces them and trains."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

from minitorch_dist.singa import autograd, layer, opt, sonnx, tensor  # noqa: E402

RNG = np.random.default_rng(3)


def T(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def _check(inputs, outputs, rtol=1e-5):
    model = sonnx.to_onnx(inputs, outputs)
    feeds = {i.name: tensor.to_numpy(x) for i, x in zip(model.graph.input, inputs)}
    reference = ReferenceEvaluator(model).run(None, feeds)
    ours = sonnx.prepare(model).run(list(inputs))
    for y, ref, got in zip(outputs, reference, ours):
        np.testing.assert_allclose(ref, tensor.to_numpy(y), rtol=rtol, atol=1e-5)
        np.testing.assert_allclose(tensor.to_numpy(got), tensor.to_numpy(y), rtol=rtol, atol=1e-5)
    return model


def test_a_cnn_of_layers_exports_and_runs_back():
    autograd.training = False
    x = T(RNG.standard_normal((2, 3, 8, 8)))
    conv, pool, fc = layer.Conv2d(4, 3, padding=1), layer.MaxPool2d(2, 2), layer.Linear(5)
    y = fc(autograd.flatten(autograd.relu(pool(conv(x)))))
    model = _check([x], [y], rtol=1e-4)
    assert [n.op_type for n in model.graph.node] == ["Conv", "MaxPool", "Relu", "Flatten",
                                                      "MatMul", "Add"]


@pytest.mark.parametrize("build", [
    lambda x: autograd.softmax(autograd.tanh(x), 1),
    lambda x: autograd.reduce_mean(autograd.mul(x, x), [1], 1),
    lambda x: autograd.hardsigmoid(autograd.clip(x, -0.5, 0.5)),
    lambda x: autograd.max(autograd.sin(x), autograd.cos(x)),
    lambda x: autograd.transpose(autograd.reshape(x, [3, 4]), (1, 0)),
    lambda x: autograd.cat([autograd.selu(x), autograd.elu(x)], 0),
    lambda x: autograd.gather(autograd.tile(x, [1, 2]), 1, [0, 5]),
    lambda x: autograd.slice(autograd.unsqueeze(x, [0]), [0], [1], [2]),
    lambda x: autograd.cast(autograd.greater(x, autograd.softplus(x)), tensor.float32),
    lambda x: autograd.gemm(x, T(np.ones((6, 2))), T(np.ones((2, 2))), 0.5, 2.0),
    lambda x: autograd.add_bias(x, T(np.arange(6)), 0) * 2 + 1,
], ids=["softmax", "reduce_mean", "clip", "max", "reshape", "cat", "gather", "slice",
        "greater", "gemm", "add_bias"])
def test_operators_match_onnx_reference(build):
    x = T(RNG.standard_normal((2, 6)))
    _check([x], [build(x)])


def test_a_prepared_model_trains_and_last_layers_stops_early():
    autograd.training = True
    x = T(RNG.standard_normal((2, 3, 4, 4)))
    c1, c2 = layer.Conv2d(2, 2), layer.Conv2d(1, 2)
    y = autograd.flatten(c2(c1(x)))
    rep = sonnx.prepare(sonnx.to_onnx([x], [y]))
    np.testing.assert_allclose(tensor.to_numpy(rep.run([x], last_layers=-2)[0]),
                               tensor.to_numpy(c1(x)), rtol=1e-5)
    out = rep.run([x])[0]
    loss = autograd.mse_loss(out, T(np.zeros(out.shape)))
    before = {k: tensor.to_numpy(v).copy() for k, v in rep.params.items()}
    sgd = opt.SGD(lr=0.1)
    for p, g in autograd.backward(loss):
        sgd.apply(p.name, p, g)
    assert len(before) == 4 and all(
        not np.allclose(before[k], tensor.to_numpy(v)) for k, v in rep.params.items())


def test_untranslatable_results_are_named():
    x = T(RNG.standard_normal((2, 3)))
    y = autograd.ranking_loss(x, x)
    with pytest.raises(NotImplementedError, match="RankingLoss|ranking"):
        sonnx.to_onnx([x], [y])
    with pytest.raises(TypeError, match="unexpected"):
        sonnx.prepare(sonnx.to_onnx([x], [autograd.relu(x)]), bogus=1)
