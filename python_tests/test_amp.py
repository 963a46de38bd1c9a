"""``mindspore.amp``: levels O0-O3 with MindSpore's lists, loss scalers and managers,
``build_train_network`` and ``Model(amp_level=...)``."""

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, Tensor
from minitorch_dist.amp import (DynamicLossScaleManager, DynamicLossScaler, FixedLossScaleManager,
                                StaticLossScaler, TrainOneStepWithLossScaleCell, all_finite,
                                auto_mixed_precision, build_train_network, custom_mixed_precision,
                                get_black_list, get_white_list)
from minitorch_dist.nn.layers.mixed_precision import compute_dtype
from minitorch_dist.train import Model


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense1 = nn.Dense(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.relu = nn.ReLU()
        self.dense2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.dense2(self.relu(self.bn(self.dense1(x))))


def _net(seed=0):
    ms.set_seed(seed)
    return _Net()


def _data(n=32, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 1).astype(np.int32)
    return x, y


def test_lists_are_mindspores():
    names = {c.__name__ for c in get_white_list()}
    assert {"Dense", "Conv2d", "MatMul", "BatchMatMul", "Conv2D", "ReLU"} <= names
    assert {c.__name__ for c in get_black_list()} >= {"BatchNorm1d", "BatchNorm2d"}


@pytest.mark.parametrize("level,dense,bn", [("O0", None, None), ("O1", ms.float16, None),
                                            ("O2", ms.float16, ms.float32),
                                            ("O3", ms.float16, ms.float16)])
def test_levels_choose_which_cells_run_in_float16(level, dense, bn):
    net = _net()
    names = [p.name for p in net.trainable_params()]
    x = Tensor(_data()[0])
    before = net(x).asnumpy()
    out = auto_mixed_precision(net, level)(x)
    assert out.dtype == ms.float32              # outputs come back in float32
    assert compute_dtype(net.dense1) == dense and compute_dtype(net.bn) == bn
    assert [p.name for p in net.trainable_params()] == names     # checkpoint layout unchanged
    assert all(p.dtype == ms.float32 for p in net.trainable_params())
    tol = 0 if level == "O0" else 2e-2
    np.testing.assert_allclose(out.asnumpy(), before, atol=tol + 1e-6, rtol=tol)


def test_float16_dense_computes_in_float16_and_gradients_reach_float32_weights():
    ms.set_seed(3)
    dense = nn.Dense(4, 2).to_float(ms.float16)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    out = dense(Tensor(x))
    w, b = dense.weight.asnumpy(), dense.bias.asnumpy()
    expected = x.astype(np.float16) @ w.astype(np.float16).T + b.astype(np.float16)
    assert out.dtype == ms.float16
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-3)
    grads = ms.value_and_grad(lambda t: dense(t).astype(ms.float32).sum(), None,
                              dense.trainable_params())(Tensor(x))[1]
    assert [g.dtype for g in grads] == [ms.float32, ms.float32]
    np.testing.assert_allclose(grads[0].asnumpy(), np.tile(x.sum(0), (2, 1)), rtol=1e-2)


def test_bad_levels_and_dtypes_are_refused():
    with pytest.raises(ValueError, match="amp_level must be one of"):
        auto_mixed_precision(_net(), "O4")
    with pytest.raises(TypeError, match="network must be a Cell"):
        auto_mixed_precision(lambda x: x, "O2")
    with pytest.raises(TypeError, match="dtype must be ms.float16"):
        auto_mixed_precision(_net(), "O2", dtype=ms.float64)
    with pytest.raises(ValueError, match="exactly one of white_list and black_list"):
        custom_mixed_precision(_net())
    with pytest.raises(ValueError, match="level must be one of"):
        build_train_network(_net(), nn.SGD(_net().trainable_params(), 0.1), level="O5")
    with pytest.raises(TypeError, match="unexpected keyword"):
        build_train_network(_net(), nn.SGD(_net().trainable_params(), 0.1), level="O2", speed=1)


def test_custom_white_list():
    net = custom_mixed_precision(_net(), white_list=[nn.Dense])
    assert compute_dtype(net.dense2) == ms.float16 and compute_dtype(net.bn) is None


def test_static_and_dynamic_loss_scalers():
    static = StaticLossScaler(8.0)
    grads = static.unscale((Tensor([8.0]), Tensor([16.0])))
    assert [g.item() for g in grads] == [1.0, 2.0] and static.adjust(True) is False
    s = DynamicLossScaler(scale_value=4.0, scale_factor=2, scale_window=2)
    history = []
    for finite in (True, True, False, True, False, False, False):
        s.adjust(Tensor(np.array(finite)))
        history.append(float(s.scale_value.asnumpy()))
    assert history == [4.0, 8.0, 4.0, 4.0, 2.0, 1.0, 1.0]
    assert bool(all_finite((Tensor([1.0]), Tensor([2.0])))) is True
    assert bool(all_finite([Tensor([1.0, np.nan])])) is False
    with pytest.raises(ValueError, match="scale_window must be a positive int"):
        DynamicLossScaler(2.0, 2, 0)
    with pytest.raises(ValueError, match="scale_value must be a positive number"):
        StaticLossScaler(-1)


def test_managers():
    fixed = FixedLossScaleManager(64.0, drop_overflow_update=False)
    assert fixed.get_loss_scale() == 64.0 and fixed.get_update_cell() is None
    assert FixedLossScaleManager().get_update_cell().get_loss_scale() == 128.0
    dyn = DynamicLossScaleManager(init_loss_scale=16, scale_factor=2, scale_window=1)
    dyn.update_loss_scale(True)
    assert dyn.get_loss_scale() == 8.0
    dyn.update_loss_scale(False)
    assert dyn.get_loss_scale() == 16.0


def test_build_train_network_o2_skips_an_overflowing_step_and_halves_the_scale():
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    step = build_train_network(net, opt, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                               level="O2", loss_scale_manager=DynamicLossScaleManager(2.0 ** 10, 2, 1000))
    assert isinstance(step, TrainOneStepWithLossScaleCell)
    x, y = _data()
    first, overflow, scale = step(Tensor(x), Tensor(y))
    assert not bool(overflow) and float(scale) == 1024.0
    saved = [p.asnumpy().copy() for p in net.trainable_params()]
    bad = x.copy()
    bad[0, 0] = 1e30                             # float16 overflows: the step is skipped
    _, overflow, _ = step(Tensor(bad), Tensor(y))
    assert bool(overflow)
    assert all(np.array_equal(a, p.asnumpy()) for a, p in zip(saved, net.trainable_params()))
    assert step.update_cell.get_loss_scale() == 512.0
    for _ in range(20):
        loss = step(Tensor(x), Tensor(y))[0]
    assert float(loss) < float(first)


def test_model_amp_level_o2_trains_close_to_o0():
    x, y = _data(64)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    losses = {}
    for level in ("O0", "O2"):
        net = _net(5)
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        model = Model(net, loss, nn.SGD(net.trainable_params(), 0.1), metrics={"loss"},
                      amp_level=level, loss_scale_manager=FixedLossScaleManager(128.0) if level == "O2" else None)
        model.train(3, batches)
        losses[level] = model.eval(batches)["loss"]
        if level == "O2":
            assert isinstance(model.train_network, TrainOneStepWithLossScaleCell)
            assert compute_dtype(net.bn) == ms.float32
    assert losses["O2"] == pytest.approx(losses["O0"], rel=2e-2)
    with pytest.raises(ValueError, match="amp_level must be one of"):
        Model(_net(), nn.MSELoss(), nn.SGD(_net().trainable_params(), 0.1), amp_level="O7")


def test_amp_changes_no_shared_state():
    """Casting one network leaves another built from the same class in full precision."""
    a, b = _net(), _net()
    auto_mixed_precision(a, "O3")
    assert compute_dtype(b.dense1) is None
    assert b(Tensor(_data()[0])).dtype == ms.float32


def test_float16_batch_norm_still_updates_its_moving_statistics():
    """Regression: casting every parameter of a float16 cell made batch norm update a
    temporary float16 copy of its moving statistics (O3 lost them)."""
    net = auto_mixed_precision(_net(), "O3")
    step = build_train_network(net, nn.SGD(net.trainable_params(), 0.01),
                               nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), level="O0")
    before = net.bn.moving_mean.asnumpy().copy()
    x, y = _data()
    step(Tensor(x), Tensor(y))
    assert net.bn.moving_mean.dtype == ms.float32
    assert not np.allclose(net.bn.moving_mean.asnumpy(), before)


def test_loss_scale_step_renames_no_parameter():
    """Regression: the loss-scale training cell prefixed every parameter with "network."
    (a wrapper must rename nothing, or checkpoints stop matching the network)."""
    net = _net()
    names = [p.name for p in net.get_parameters()]
    build_train_network(net, nn.SGD(net.trainable_params(), 0.01),
                        nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), level="O2")
    assert [p.name for p in net.get_parameters()] == names
