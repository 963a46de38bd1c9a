"""WithLossCell, WithEvalCell and TrainOneStepCell (with a stand-in optimizer)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops


class StandInSGD:
    """The optimizer interface TrainOneStepCell relies on: ``parameters`` and ``__call__(grads)``."""

    def __init__(self, params, learning_rate, record=True):
        self.parameters = ms.ParameterTuple(params)
        self.learning_rate = learning_rate
        self.record = record   # keep host copies of the gradients it was given
        self.seen = []

    def __call__(self, grads):
        if self.record:
            self.seen.append([g.asnumpy() for g in grads])
        for param, grad in zip(self.parameters, grads):
            param.data -= self.learning_rate * grad.data
        return True


class TwoLayer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8, activation="relu")
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(self.fc1(x))


def data(seed=0, n=16):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0).astype(np.int32)
    return ms.Tensor(x), ms.Tensor(y)


def test_with_loss_cell_computes_the_loss_of_the_backbone():
    ms.set_seed(0)
    net, loss_fn = TwoLayer(), nn.CrossEntropyLoss()
    x, y = data()
    wrapped = nn.WithLossCell(net, loss_fn)
    assert wrapped.backbone_network is net
    np.testing.assert_allclose(wrapped(x, y).asnumpy(), loss_fn(net(x), y).asnumpy(), rtol=1e-6)


def test_wrappers_keep_the_names_of_the_wrapped_network():
    ms.set_seed(0)
    net = TwoLayer()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                               StandInSGD(net.trainable_params(), 0.1))
    expected = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.name for p in step.trainable_params()] == expected
    assert [p.name for p in net.trainable_params()] == expected
    assert net.fc1.matmul.name == "fc1.matmul"
    assert net.fc1.activation.relu.name == "fc1.activation.relu"


def test_train_one_step_decreases_the_loss():
    ms.set_seed(1)
    net = TwoLayer()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                               StandInSGD(net.trainable_params(), 0.2))
    x, y = data()
    losses = [float(step(x, y).asnumpy()) for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a + 1e-6 for a, b in zip(losses[:5], losses[1:6]))


def test_train_one_step_hands_the_optimizer_the_gradients_of_its_parameters():
    ms.set_seed(2)
    net = TwoLayer()
    with_loss = nn.WithLossCell(net, nn.CrossEntropyLoss())
    x, y = data()
    params = [net.fc2.weight, net.fc2.bias]          # fc1 is frozen: not given to the optimizer
    _, expected = ms.value_and_grad(with_loss, None, params)(x, y)
    frozen = net.fc1.weight.asnumpy()
    opt = StandInSGD(params, 0.1)
    loss = nn.TrainOneStepCell(with_loss, opt)(x, y)
    assert loss.shape == ()
    assert len(opt.seen) == 1 and len(opt.seen[0]) == 2
    for got, want in zip(opt.seen[0], expected):
        np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-6)
    np.testing.assert_array_equal(net.fc1.weight.asnumpy(), frozen)


def test_sens_scales_the_gradients_and_return_grad_returns_them():
    ms.set_seed(3)
    net = TwoLayer()
    x, y = data()
    with_loss = nn.WithLossCell(net, nn.CrossEntropyLoss())
    _, expected = ms.value_and_grad(with_loss, None, net.trainable_params())(x, y)
    opt = StandInSGD(net.trainable_params(), 0.0)
    loss, grads = nn.TrainOneStepCell(with_loss, opt, sens=4.0, return_grad=True)(x, y)
    assert loss.shape == ()
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got.asnumpy(), 4.0 * want.asnumpy(), rtol=1e-5)


def test_grad_reducer_hook_sits_between_gradients_and_optimizer():
    calls = []

    class HalvingStep(nn.TrainOneStepCell):
        def _make_grad_reducer(self):
            def reduce(grads):
                calls.append(len(grads))
                return tuple(g * 0.5 for g in grads)
            return reduce

    ms.set_seed(4)
    net = TwoLayer()
    x, y = data()
    with_loss = nn.WithLossCell(net, nn.CrossEntropyLoss())
    _, expected = ms.value_and_grad(with_loss, None, net.trainable_params())(x, y)
    opt = StandInSGD(net.trainable_params(), 0.0)
    HalvingStep(with_loss, opt)(x, y)
    assert calls == [4]
    np.testing.assert_allclose(opt.seen[0][0], 0.5 * expected[0].asnumpy(), rtol=1e-6)
    # the default hook is the identity
    plain = nn.TrainOneStepCell(with_loss, opt)
    grads = (ms.Tensor([1.0]),)
    assert plain.grad_reducer(grads) is grads


def test_train_one_step_matches_a_torch_sgd_step():
    torch = pytest.importorskip("torch")
    ms.set_seed(5)
    net = TwoLayer()
    x, y = data(seed=3)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for layer, dense in ((ref[0], net.fc1), (ref[2], net.fc2)):
            layer.weight.copy_(torch.tensor(dense.weight.asnumpy()))
            layer.bias.copy_(torch.tensor(dense.bias.asnumpy()))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                               StandInSGD(net.trainable_params(), 0.3))
    for _ in range(3):
        loss = step(x, y)
        ref.zero_grad()
        ref_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(x.asnumpy())),
                                                     torch.tensor(y.asnumpy()).long())
        ref_loss.backward()
        with torch.no_grad():      # plain SGD by hand (torch.optim's first step is slow to set up)
            for p in ref.parameters():
                p -= 0.3 * p.grad
        np.testing.assert_allclose(loss.asnumpy(), ref_loss.item(), rtol=1e-5)
    np.testing.assert_allclose(net.fc2.weight.asnumpy(), ref[2].weight.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(net.fc1.bias.asnumpy(), ref[0].bias.detach().numpy(), atol=1e-6)


def test_train_one_step_with_the_library_sgd():
    """``nn.SGD`` without momentum takes the plain stand-in's steps, and the loss falls."""
    losses = {}
    for name, make in (("library", nn.SGD), ("stand-in", StandInSGD)):
        ms.set_seed(6)
        net = TwoLayer()
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                                   make(net.trainable_params(), 0.2))
        x, y = data()
        losses[name] = [float(step(x, y).asnumpy()) for _ in range(30)]
    np.testing.assert_allclose(losses["library"], losses["stand-in"], rtol=1e-5)
    assert losses["library"][-1] < 0.5 * losses["library"][0]


def test_set_train_reaches_the_network_inside_the_wrappers():
    net = nn.SequentialCell(nn.Dense(4, 4), nn.Dropout(p=0.5))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), StandInSGD(net.trainable_params(), 0.1))
    step.set_train(False)
    assert not net[1].training and not net.training
    step.set_train(True)
    assert net[1].training


def test_with_eval_cell_returns_loss_outputs_and_label():
    ms.set_seed(7)
    net = TwoLayer()
    x, y = data()
    loss, outputs, label = nn.WithEvalCell(net, nn.CrossEntropyLoss())(x, y)
    np.testing.assert_allclose(outputs.asnumpy(), net(x).asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(loss.asnumpy(), nn.CrossEntropyLoss()(net(x), y).asnumpy(), rtol=1e-6)
    assert label is y
    half = nn.SequentialCell(nn.Dense(4, 1, dtype=ms.float64))
    loss, outputs, label = nn.WithEvalCell(half, nn.MSELoss(), add_cast_fp32=True)(
        ms.Tensor(np.ones((2, 4))), ms.Tensor(np.zeros((2, 1))))
    assert outputs.dtype == np.float32 and label.dtype == np.float32 and loss.dtype == np.float32


def test_wrapper_arguments_are_checked():
    with pytest.raises(TypeError, match="WithLossCell"):
        nn.WithLossCell(nn.Dense(2, 2), None)


def test_train_one_step_works_with_a_functional_loss():
    ms.set_seed(8)
    net = nn.Dense(3, 1)

    class FunctionalLoss(nn.Cell):
        def construct(self, x, y):
            return ops.mse_loss(net(x), y)

    opt = StandInSGD(net.trainable_params(), 0.1)
    step = nn.TrainOneStepCell(FunctionalLoss(), opt)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32))
    y = ms.Tensor(np.zeros((8, 1), np.float32))
    first = float(step(x, y).asnumpy())
    for _ in range(20):
        last = float(step(x, y).asnumpy())
    assert last < first


def test_gradients_of_a_small_cnn_through_with_loss_cell_match_torch():
    torch = pytest.importorskip("torch")
    ms.set_seed(9)
    net = nn.SequentialCell(
        nn.Conv2d(2, 4, 3, pad_mode="pad", padding=1, has_bias=True, dtype=ms.float64),
        nn.BatchNorm2d(4, gamma_init="normal", beta_init="normal", dtype=ms.float64),
        nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
        nn.Dense(4 * 3 * 3, 5, dtype=ms.float64), nn.Tanh(), nn.Dense(5, 3, dtype=ms.float64))
    ref = torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2, 2), torch.nn.Flatten(), torch.nn.Linear(36, 5), torch.nn.Tanh(),
        torch.nn.Linear(5, 3)).double()
    ref_params = [ref[0].weight, ref[0].bias, ref[1].weight, ref[1].bias,
                  ref[5].weight, ref[5].bias, ref[7].weight, ref[7].bias]
    params = net.trainable_params()
    assert [p.name for p in params] == ["0.weight", "0.bias", "1.gamma", "1.beta",
                                        "5.weight", "5.bias", "7.weight", "7.bias"]
    with torch.no_grad():
        for mine, theirs in zip(params, ref_params):
            theirs.copy_(torch.tensor(mine.asnumpy()))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2, 6, 6))
    y = rng.integers(0, 3, 6)
    loss, grads = ms.value_and_grad(nn.WithLossCell(net, nn.CrossEntropyLoss()), None, params)(
        ms.Tensor(x), ms.Tensor(y))
    ref_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y))
    ref_loss.backward()
    np.testing.assert_allclose(loss.asnumpy(), ref_loss.item(), rtol=1e-10)
    for p, g, theirs in zip(params, grads, ref_params):
        np.testing.assert_allclose(g.asnumpy(), theirs.grad.numpy(), rtol=1e-7, atol=1e-10, err_msg=p.name)
    np.testing.assert_allclose(net[1].moving_mean.asnumpy(), ref[1].running_mean.numpy(), rtol=1e-10)


@pytest.mark.parametrize("loss_fn", [nn.CrossEntropyLoss(),
                                     nn.CrossEntropyLoss(weight=[1.0, 2.0, 0.5], label_smoothing=0.1)],
                         ids=["fused", "weighted"])
def test_a_training_step_on_the_device_moves_nothing_across_the_bus(virtual_gpu, loss_fn):
    ms.set_context(device_target="GPU")
    ms.set_seed(10)
    net = nn.SequentialCell(nn.Conv2d(1, 4, 3, has_bias=True), nn.BatchNorm2d(4), nn.ReLU(),
                            nn.MaxPool2d(2, 2), nn.Flatten(), nn.Dropout(p=0.2), nn.Dense(16, 3))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), StandInSGD(net.trainable_params(), 0.1, record=False))
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.random((8, 1, 4, 4)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 3, 8).astype(np.int32))
    first = step(x, y)     # the weighted loss copies its class weights to the device once, here
    ms.reset_transfer_stats()
    for _ in range(3):
        loss = step(x, y)
    assert loss.device is virtual_gpu and all(p.device is virtual_gpu for p in net.get_parameters())
    assert ms.transfer_stats()["copies"] == 0
    assert float(loss.asnumpy()) < float(first.asnumpy())
