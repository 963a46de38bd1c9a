"""``minitorch_dist.singa.autograd``: SINGA's functions, ``backward``, ``Operator`` and the
``training`` switch, checked against the core engine, PyTorch and SINGA's own rules.

* every function's value and gradient equal PyTorch's (CPU, float64 inputs cast to float32)
  and the same network written with the core ops gives the same gradients (<= 1e-6);
* ``autograd.backward`` yields (param, grad) in SINGA's order: a parameter as soon as its
  last consumer has been back-propagated, ready operators last-in first-out;
* a user's ``Operator`` subclass (forward/backward on arrays, one or two outputs) is
  differentiated by the core engine and trained by ``opt.SGD``;
* ``autograd.training`` switches dropout and batch norm, and ``Model.train``/``eval`` set it;
* bad arguments are errors that name the SINGA call.
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.singa import SingaNotSupported, autograd, layer, model, opt, tensor

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def training_on():
    autograd.training = True
    yield
    autograd.training = False


def T(array, trainable=False, name=None):
    return tensor.Tensor(data=np.asarray(array, np.float32), stores_grad=trainable, name=name)


def tt(array):
    return torch.tensor(np.asarray(array, np.float32), requires_grad=True)


def grads_of(loss):
    return {p.name: g.data for p, g in autograd.backward(loss)}


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- every function against PyTorch ----------------------------------------------------
def _check(fn, torch_fn, *arrays, tol=1e-5):
    """fn on facade tensors (all trainable) vs torch_fn: value, and the gradient of
    sum(out * w) for a fixed random w."""
    mine = [T(a, True, f"in{i}") for i, a in enumerate(arrays)]
    theirs = [tt(a) for a in arrays]
    out = fn(*mine)
    ref = torch_fn(*theirs)
    assert out.shape == tuple(ref.shape), (out.shape, ref.shape)
    np.testing.assert_allclose(out.asnumpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    w = rng(9).normal(size=out.shape).astype(np.float32)
    grads = grads_of(autograd.reduce_sum(autograd.mul(out, T(w)), None, 0))
    (ref * torch.tensor(w)).sum().backward()
    for i, t in enumerate(theirs):
        np.testing.assert_allclose(grads[f"in{i}"], t.grad.numpy(), rtol=tol, atol=tol)


R = rng(1)
A34, B45, V4 = R.normal(size=(3, 4)), R.normal(size=(4, 5)), R.normal(size=4)
X4 = R.normal(size=(2, 3, 4, 4))
LABELS = np.array([0, 2, 1], np.int32)
PROBS = np.abs(R.normal(size=(3, 4))) + 0.1
PROBS /= PROBS.sum(axis=1, keepdims=True)

CASES = [
    ("matmul", autograd.matmul, torch.matmul, (A34, B45)),
    ("add_bias0", lambda x, b: autograd.add_bias(x, b, 0), lambda x, b: x + b, (A34, V4)),
    ("add_bias1", lambda x, b: autograd.add_bias(x, b, 1), lambda x, b: x + b[:, None],
     (A34, V4[:3])),
    ("add", autograd.add, torch.add, (A34, V4)),
    ("sub", autograd.sub, torch.sub, (A34, A34[::-1].copy())),
    ("mul", autograd.mul, torch.mul, (A34, V4)),
    ("div", autograd.div, torch.div, (A34, np.abs(V4) + 1)),
    ("relu", autograd.relu, torch.relu, (A34,)),
    ("sigmoid", autograd.sigmoid, torch.sigmoid, (A34,)),
    ("tanh", autograd.tanh, torch.tanh, (A34,)),
    ("softmax", autograd.softmax, lambda x: torch.softmax(x, 1), (A34,)),
    ("leakyrelu", lambda x: autograd.leakyrelu(x, 0.2),
     lambda x: torch.nn.functional.leaky_relu(x, 0.2), (A34,)),
    ("exp", autograd.exp, torch.exp, (A34,)),
    ("log", autograd.log, torch.log, (np.abs(A34) + 0.5,)),
    ("sqrt", autograd.sqrt, torch.sqrt, (np.abs(A34) + 0.5,)),
    ("flatten", autograd.flatten, lambda x: x.reshape(2, -1), (X4,)),
    ("flatten2", lambda x: autograd.flatten(x, 2), lambda x: x.reshape(6, -1), (X4,)),
    ("reshape", lambda x: autograd.reshape(x, (0, -1)), lambda x: x.reshape(2, -1), (X4,)),
    ("transpose", lambda x: autograd.transpose(x, (0, 2, 3, 1)),
     lambda x: x.permute(0, 2, 3, 1), (X4,)),
    ("cat", lambda a, b: autograd.cat([a, b], 1), lambda a, b: torch.cat([a, b], 1),
     (A34, A34[:, :2].copy())),
    ("reduce_mean", lambda x: autograd.reduce_mean(x, [1], 1),
     lambda x: x.mean(1, keepdim=True), (A34,)),
    ("reduce_sum", lambda x: autograd.reduce_sum(x, None, 0), torch.sum, (A34,)),
    ("gemm", lambda a, b, c: autograd.gemm(a, b, c, 0.5, 2.0, 1, 1),
     lambda a, b, c: 0.5 * a.T @ b.T + 2.0 * c, (A34.T.copy(), B45.T.copy(), V4[:1] * 0 + 1)),
    ("cross_entropy", lambda p: autograd.cross_entropy(p, T(np.eye(4)[[0, 2, 1]])),
     lambda p: -(torch.tensor(np.eye(4, dtype=np.float32)[[0, 2, 1]]) * p.log()).sum()
     .reshape(1) / 3, (PROBS,)),
    ("mse_loss", lambda x: autograd.mse_loss(x, T(np.ones((3, 4)))),
     lambda x: ((x - 1) ** 2).mean().reshape(1), (A34,)),
    ("binary_cross_entropy", lambda p: autograd.binary_cross_entropy(p, T(np.eye(4)[[0, 2, 1]])),
     lambda p: -(torch.tensor(np.eye(4, dtype=np.float32)[[0, 2, 1]]) * (p + 1e-4).log()
                 + (1 - torch.tensor(np.eye(4, dtype=np.float32)[[0, 2, 1]]))
                 * (1.0001 - p).log()).sum().reshape(1) / 3, (PROBS,)),
    ("softmax_cross_entropy",
     lambda x: autograd.softmax_cross_entropy(x, tensor.from_numpy(LABELS)),
     lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(LABELS).long()).reshape(1),
     (A34,)),
    ("max_pool_2d", lambda x: autograd.max_pool_2d(x, 2, 2),
     lambda x: torch.nn.functional.max_pool2d(x, 2, 2), (X4,)),
    ("avg_pool_2d", lambda x: autograd.avg_pool_2d(x, 3, 1, 1),
     lambda x: torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False), (X4,)),
]


@pytest.mark.parametrize("name, fn, torch_fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_every_function_matches_pytorch_in_value_and_gradient(name, fn, torch_fn, arrays):
    _check(fn, torch_fn, *arrays)


def test_operator_classes_are_the_functions():
    x, w = T(A34, True, "x"), T(B45, True, "w")
    assert np.array_equal(autograd.Matmul()(x, w)[0].asnumpy(), autograd.matmul(x, w).asnumpy())
    assert np.array_equal(autograd.ReLU()(x)[0].asnumpy(), autograd.relu(x).asnumpy())
    assert np.array_equal(autograd.AddBias(0)(x, T(V4))[0].asnumpy(),
                          autograd.add_bias(x, T(V4)).asnumpy())
    loss = autograd.SoftMaxCrossEntropy(tensor.from_numpy(LABELS))(x)[0]
    assert loss.shape == (1,)
    assert np.allclose(loss.asnumpy(), autograd.softmax_cross_entropy(
        x, tensor.from_numpy(LABELS)).asnumpy())
    assert autograd.Concat(1)(x, x)[0].shape == (3, 8)
    assert isinstance(autograd.ReLU(), autograd.Operator)


def test_the_same_network_through_the_core_has_the_same_gradients():
    r = rng(3)
    x, w1, b1, w2, b2 = (r.normal(size=s).astype(np.float32) for s in
                         ((6, 5), (5, 7), (7,), (7, 3), (3,)))
    labels = np.array([0, 1, 2, 0, 1, 2], np.int32)
    params = {n: T(v, True, n) for n, v in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))}
    h = autograd.relu(autograd.add_bias(autograd.matmul(T(x), params["w1"]), params["b1"]))
    out = autograd.add_bias(autograd.matmul(h, params["w2"]), params["b2"])
    mine = grads_of(autograd.softmax_cross_entropy(out, tensor.from_numpy(labels)))

    core = {n: ms.Tensor(v, requires_grad=True) for n, v in
            (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))}
    h = ops.relu(ops.add(ops.matmul(ms.Tensor(x), core["w1"]), core["b1"]))
    logits = ops.add(ops.matmul(h, core["w2"]), core["b2"])
    ops.softmax_cross_entropy(logits, ms.Tensor(labels), sparse=True).backward()
    for n in core:
        assert np.abs(mine[n] - core[n].grad.asnumpy()).max() <= 1e-6


# ---- backward's order -------------------------------------------------------------------
def test_backward_yields_in_singas_order():
    x = T(rng(4).normal(size=(2, 3)))
    w1, b1 = T(np.ones((3, 4)), True, "w1"), T(np.zeros(4), True, "b1")
    w2, b2 = T(np.ones((4, 2)), True, "w2"), T(np.zeros(2), True, "b2")
    h = autograd.relu(autograd.add_bias(autograd.matmul(x, w1), b1))
    loss = autograd.reduce_mean(autograd.add_bias(autograd.matmul(h, w2), b2), None, 0)
    # last layer first, and within a layer the bias (consumed last) before the weight
    assert [p.name for p, _ in autograd.backward(loss)] == ["b2", "w2", "b1", "w1"]

    # two branches joined by add: the second branch's operator is ready last, so it runs first
    a, b = T(np.ones((3, 2)), True, "a"), T(np.ones((3, 2)), True, "b")
    y = autograd.add(autograd.matmul(x, a), autograd.matmul(x, b))
    assert [p.name for p, _ in autograd.backward(autograd.reduce_sum(y, None, 0))] == ["b", "a"]

    # a shared weight comes out once, after its last consumer, with the summed gradient
    s = T(np.eye(3), True, "s")
    y = autograd.matmul(autograd.matmul(x, s), s)
    pairs = list(autograd.backward(autograd.reduce_sum(y, None, 0)))
    assert [p.name for p, _ in pairs] == ["s"]
    xs = torch.tensor(x.asnumpy())
    st = torch.eye(3, requires_grad=True)
    (xs @ st @ st).sum().backward()
    assert np.allclose(pairs[0][1].data, st.grad.numpy())


def test_backward_scales_by_dy_and_gradients_is_the_dict():
    w = T([[2.0]], True, "w")
    x = T([[3.0]])
    assert [g.data.item() for _, g in autograd.backward(autograd.matmul(x, w), dy=2.0)] == [6.0]
    loss = autograd.matmul(x, w)
    assert autograd.gradients(loss)[id(w)].data.item() == 3.0


def test_tensor_inplace_arithmetic_is_raw_and_keeps_the_object():
    w = T([2.0, 4.0], True, "w")
    data = w.data
    w /= 2
    w += 1
    w *= 3
    w -= T([1.0, 1.0])
    assert w.data is data and w.asnumpy().tolist() == [5.0, 8.0]
    with pytest.raises(TypeError, match="Tensor.__iadd__"):
        w += "x"


# ---- user operators ---------------------------------------------------------------------
class Cube(autograd.Operator):
    def forward(self, x):
        self.x = x
        return x ** 3

    def backward(self, dy):
        return 3 * self.x ** 2 * dy


class SplitSum(autograd.Operator):
    """Two outputs (a + b, a - b): the backward gets one gradient per output."""

    def forward(self, a, b):
        return a + b, a - b

    def backward(self, d_sum, d_diff):
        return d_sum + d_diff, d_sum - d_diff


def test_a_user_operator_is_differentiated_and_trained():
    w = T([1.0, 2.0], True, "w")
    y = Cube()(w)[0]
    assert y.asnumpy().tolist() == [1.0, 8.0]
    assert grads_of(autograd.reduce_sum(y, None, 0))["w"].tolist() == [3.0, 12.0]

    a, b = T([1.0, 2.0], True, "a"), T([5.0, 7.0], True, "b")
    s, d = SplitSum()(a, b)
    loss = autograd.reduce_sum(autograd.add(autograd.mul(s, 2.0), autograd.mul(d, 3.0)), None, 0)
    grads = grads_of(loss)
    assert grads["a"].tolist() == [5.0, 5.0] and grads["b"].tolist() == [-1.0, -1.0]

    w = T([1.5, 2.0], True, "w")
    sgd = opt.SGD(lr=0.005)                    # no model: the parameters are on the tape
    for _ in range(100):
        sgd(autograd.mse_loss(Cube()(w)[0], T([8.0, 8.0])))
    assert np.allclose(w.asnumpy(), [2.0, 2.0], atol=1e-2)


def test_a_wrong_user_operator_is_a_clear_error():
    class Bad(autograd.Operator):
        def forward(self, x):
            return x * 2

        def backward(self, dy):
            return dy[:1]

    w = T([1.0, 2.0], True, "w")
    loss = autograd.reduce_sum(Bad()(w)[0], None, 0)
    with pytest.raises(RuntimeError, match="returned a gradient of shape"):
        list(autograd.backward(loss))
    with pytest.raises(TypeError, match="autograd.Operator Cube: every input must be a Tensor"):
        Cube()(np.ones(2))


# ---- the training switch ---------------------------------------------------------------
def test_training_switches_dropout_and_batch_norm_and_models_set_it():
    x = T(np.ones((4, 3, 5, 5)))
    autograd.training = False
    assert np.array_equal(autograd.dropout(x, 0, 0.5).asnumpy(), x.asnumpy())
    bn = layer.BatchNorm2d(3)
    bn(x)
    assert np.array_equal(bn.running_mean.asnumpy(), np.zeros(3))    # evaluation: unchanged
    autograd.training = True
    dropped = autograd.dropout(x, 0, 0.5).asnumpy()
    assert set(np.unique(dropped)) == {0.0, 2.0}
    bn(x)
    assert np.allclose(bn.running_mean.asnumpy(), 0.9)                # SINGA: new batch x0.9

    class Net(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(2)

        def forward(self, x):
            return self.fc(x)

    net = Net()
    net.compile([T(np.ones((2, 3)))], is_train=False)
    assert autograd.training is False
    net.train()
    assert autograd.training is True
    net.eval()
    assert autograd.training is False


# ---- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, message", [
    (lambda: list(autograd.backward(T(np.ones(3), True))), ValueError,
     r"autograd.backward\(y\): the loss must have one element"),
    (lambda: list(autograd.backward(T([1.0]))), ValueError, "does not depend on any trainable"),
    (lambda: list(autograd.backward([1.0])), TypeError, "expected the loss Tensor"),
    (lambda: autograd.matmul(T(np.ones((2, 3))), T(np.ones((2, 3)))), ValueError,
     r"autograd.matmul: shapes \(2, 3\) and \(2, 3\) do not multiply"),
    (lambda: autograd.add_bias(T(np.ones((2, 3))), T(np.ones(2)), 0), ValueError,
     r"autograd.add_bias\(axis=0\): b has 2 values, x has 3 columns"),
    (lambda: autograd.add_bias(T(np.ones((2, 3))), T(np.ones(3)), 2), ValueError,
     "autograd.add_bias: needs a 2-D x"),
    (lambda: autograd.relu(np.ones(3)), TypeError, "autograd.relu: x must be a Tensor"),
    (lambda: autograd.cat(T([1.0])), TypeError, r"autograd.cat\(xs, axis\): xs must be"),
    (lambda: autograd.mse_loss(T(np.ones(3)), T(np.ones(2))), ValueError,
     "autograd.mse_loss: input and target shapes differ"),
    (lambda: autograd.dropout(T([1.0]), 0, 1.0), ValueError, "autograd.dropout: ratio"),
    (lambda: autograd.conv2d(None, T(np.ones((1, 1, 3, 3))), T(np.ones((1, 1, 1, 1)))),
     TypeError, "autograd.conv2d.*singa_wrap.ConvHandle"),
    (lambda: autograd._RNN, SingaNotSupported, "singa autograd._RNN is not supported"),
])
def test_bad_arguments_are_errors_naming_the_singa_call(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_conv2d_and_batchnorm_2d_with_handles_match_pytorch():
    from minitorch_dist.singa import singa_wrap
    x = R.normal(size=(2, 3, 6, 6)).astype(np.float32)
    w = R.normal(size=(4, 3, 3, 3)).astype(np.float32)
    handle = singa_wrap.ConvHandle(None, 3, 2, 1, 3, 4, False)
    y = autograd.conv2d(handle, T(x), T(w))
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2, padding=1)
    assert np.allclose(y.asnumpy(), ref.numpy(), atol=1e-5)
    mean, var = T(np.zeros(3)), T(np.ones(3))
    out = autograd.batchnorm_2d(singa_wrap.BatchNormHandle(0.9), T(x), T(np.ones(3)),
                                T(np.zeros(3)), mean, var)
    rm, rv = torch.zeros(3), torch.ones(3)
    ref = torch.nn.functional.batch_norm(torch.tensor(x), rm, rv, training=True, momentum=0.9)
    assert np.allclose(out.asnumpy(), ref.numpy(), atol=1e-4)
    assert np.allclose(mean.asnumpy(), rm.numpy(), atol=1e-5)
    assert np.allclose(var.asnumpy(), rv.numpy(), atol=1e-5)


def test_regressions_to_numpy_copies_whole_float_labels_and_empty_target_rows():
    t = T([1.0, 2.0])
    snapshot = tensor.to_numpy(t)
    t += 1
    assert snapshot.tolist() == [1.0, 2.0]            # SINGA's to_numpy clones
    labels = tensor.Tensor((2, 3), dtype=tensor.int32)
    labels.copy_from_numpy(np.eye(3, dtype=np.float32)[[0, 2]])   # float one-hot rows
    assert tensor.to_numpy(labels).tolist() == [[1, 0, 0], [0, 0, 1]]
    x = T(np.array([[1.0, 2.0, 3.0], [3.0, 1.0, 0.0]]), True, "x")
    zero_row = tensor.Tensor((2, 3), dtype=tensor.int32)
    zero_row.copy_from_numpy(np.array([[0, 0, 1], [0, 0, 0]], np.int32))
    loss = autograd.softmax_cross_entropy(x, zero_row)
    ref = torch.nn.functional.cross_entropy(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([2]))
    assert np.isclose(float(loss.asnumpy()[0]), float(ref) / 2)    # the empty row adds 0
    assert np.array_equal(grads_of(loss)["x"][1], np.zeros(3))
