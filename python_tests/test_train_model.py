"""Model: training decreases the loss, eval and predict, callback order and cb_params,
stopping, datasets, the different ways of building a Model, and resuming with checkpoints."""
import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import nn
from minitorch_dist.train import (Accuracy, Callback, CheckpointConfig, Loss, LossMonitor, Model,
                                  ModelCheckpoint, checkpoint_entries, load_checkpoint,
                                  load_param_into_net)


def _blobs(n=96, seed=0):
    """Two well separated Gaussian blobs in 4-D: labels 0 and 1."""
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 2).astype(np.int32)
    x = rng.normal(scale=0.5, size=(n, 4)).astype(np.float32)
    x[:, 0] += np.where(y == 1, 2.0, -2.0)
    return x, y


def _batches(n=96, batch=16, seed=0):
    x, y = _blobs(n, seed)
    return [(ms.Tensor(x[i:i + batch]), ms.Tensor(y[i:i + batch])) for i in range(0, n, batch)]


def _classifier(seed=0, lr=0.1, optimizer="momentum"):
    ms.set_seed(seed)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 2)])
    params = net.trainable_params()
    opt = nn.Momentum(params, lr, 0.9) if optimizer == "momentum" else nn.Adam(params, lr)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, loss, opt


class LossRecorder(Callback):
    def __init__(self):
        self.losses = []

    def on_train_step_end(self, run_context):
        self.losses.append(float(run_context.original_args().net_outputs.asnumpy()))


# ---- training and evaluation ----------------------------------------------------------------------
def test_train_decreases_loss_and_eval_is_accurate():
    net, loss, opt = _classifier()
    model = Model(net, loss, opt, metrics={"accuracy", "loss"})
    data = _batches()
    before = model.eval(data)
    recorder = LossRecorder()
    model.train(5, data, callbacks=recorder)
    after = model.eval(data)
    assert len(recorder.losses) == 5 * len(data)
    assert np.mean(recorder.losses[-6:]) < 0.25 * np.mean(recorder.losses[:6])
    assert after["loss"] < before["loss"]
    assert after["accuracy"] >= 0.97
    assert set(after) == {"accuracy", "loss"}


def test_train_on_a_dataset_pipeline_and_sink_mode_is_the_same():
    x, y = _blobs()
    final = []
    for sink in (False, True):
        data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(16)
        net, loss, opt = _classifier(seed=3)
        model = Model(net, loss, opt, metrics={"acc": Accuracy()})
        model.train(2, data, dataset_sink_mode=sink, sink_size=4)
        final.append([p.asnumpy() for p in net.trainable_params()])
        assert model.eval(data)["acc"] > 0.9
    for a, b in zip(*final):
        np.testing.assert_array_equal(a, b)


def test_predict_runs_the_network_in_eval_mode_without_gradients():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(p=0.5), nn.Dense(4, 2)])
    model = Model(net)
    x = np.ones((3, 4), np.float32)
    out = model.predict(x)
    assert out.shape == (3, 2) and not out.requires_grad
    np.testing.assert_array_equal(model.predict(ms.Tensor(x)).asnumpy(), out.asnumpy())  # no dropout
    assert not net.training


def test_network_that_returns_the_loss_and_a_complete_train_step():
    data = _batches()
    net, loss, opt = _classifier(seed=5)
    Model(nn.WithLossCell(net, loss), optimizer=opt).train(1, data)
    net2, loss2, opt2 = _classifier(seed=5)
    step = nn.TrainOneStepCell(nn.WithLossCell(net2, loss2), opt2)
    model = Model(step)
    assert model.train_network is step
    model.train(1, data)
    for a, b in zip(net.trainable_params(), net2.trainable_params()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_eval_network_with_eval_indexes():
    net, loss, opt = _classifier()

    class Eval(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net

        def construct(self, x, y):
            logits = self.net(x)
            return logits, y, loss(logits, y)     # prediction, label, loss

    model = Model(net, optimizer=opt, metrics={"a": Accuracy(), "l": Loss()},
                  eval_network=Eval(), eval_indexes=[2, 0, 1])
    result = model.eval(_batches())
    reference = Model(net, loss, metrics={"a": Accuracy(), "l": Loss()}).eval(_batches())
    assert result == pytest.approx(reference)


# ---- callbacks ------------------------------------------------------------------------------------
class Recorder(Callback):
    def __init__(self):
        self.events = []

    def _log(self, hook, ctx):
        p = ctx.original_args()
        self.events.append((hook, p.cur_epoch_num, p.cur_step_num))

    def on_train_begin(self, ctx):
        self._log("train_begin", ctx)

    def on_train_epoch_begin(self, ctx):
        self._log("epoch_begin", ctx)

    def on_train_step_begin(self, ctx):
        self._log("step_begin", ctx)

    def on_train_step_end(self, ctx):
        self._log("step_end", ctx)
        self.params = ctx.original_args()

    def on_train_epoch_end(self, ctx):
        self._log("epoch_end", ctx)

    def on_train_end(self, ctx):
        self._log("train_end", ctx)


def test_callbacks_fire_in_order_with_cb_params():
    net, loss, opt = _classifier()
    model = Model(net, loss, opt)
    data = _batches(n=32)          # 2 batches
    rec = Recorder()
    model.train(2, data, callbacks=[rec])
    assert rec.events == [
        ("train_begin", 0, 0),
        ("epoch_begin", 1, 0), ("step_begin", 1, 1), ("step_end", 1, 1),
        ("step_begin", 1, 2), ("step_end", 1, 2), ("epoch_end", 1, 2),
        ("epoch_begin", 2, 2), ("step_begin", 2, 3), ("step_end", 2, 3),
        ("step_begin", 2, 4), ("step_end", 2, 4), ("epoch_end", 2, 4),
        ("train_end", 2, 4)]
    p = rec.params
    assert p.epoch_num == 2 and p.batch_num == 2 and p.mode == "train"
    assert p.train_network is model.train_network and p.optimizer is opt
    assert p.network is net and p.loss_fn is loss and p.train_dataset is data
    assert isinstance(p.net_outputs, ms.Tensor) and p.net_outputs.shape == ()
    assert p.train_dataset_element[0].shape == (16, 4)


def test_old_style_callbacks_fire_too():
    names = []

    class Old(Callback):
        def begin(self, ctx):
            names.append("begin")

        def step_end(self, ctx):
            names.append("step_end")

        def end(self, ctx):
            names.append("end")

    net, loss, opt = _classifier()
    Model(net, loss, opt).train(1, _batches(n=32), callbacks=Old())
    assert names == ["begin", "step_end", "step_end", "end"]


def test_request_stop_ends_training_and_still_calls_train_end():
    class StopAt(Recorder):
        def on_train_step_end(self, ctx):
            super().on_train_step_end(ctx)
            if ctx.original_args().cur_step_num == 3:
                ctx.request_stop()

    rec = StopAt()
    net, loss, opt = _classifier()
    Model(net, loss, opt).train(5, _batches(n=32), callbacks=rec)
    assert rec.events[-2:] == [("epoch_end", 2, 3), ("train_end", 2, 3)]
    assert sum(e[0] == "step_end" for e in rec.events) == 3
    assert int(opt.global_step.asnumpy()[0]) == 3


def test_nan_loss_stops_training_with_a_clear_error(capsys):
    data = _batches(n=48)
    bad_x = data[1][0].asnumpy()
    bad_x[0, 0] = np.nan
    data[1] = (ms.Tensor(bad_x), data[1][1])
    net, loss, opt = _classifier()
    with pytest.raises(ValueError, match=r"epoch: 1 step: 2\. Invalid loss nan"):
        Model(net, loss, opt).train(3, data, callbacks=LossMonitor())
    out = capsys.readouterr().out
    assert out.startswith("epoch: 1 step: 1, loss is ") and "step: 2" not in out
    assert int(opt.global_step.asnumpy()[0]) == 2


def test_loss_monitor_through_model(capsys):
    net, loss, opt = _classifier()
    Model(net, loss, opt).train(2, _batches(n=32), callbacks=LossMonitor())
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(", loss is ")[0] for line in lines] == [
        "epoch: 1 step: 1", "epoch: 1 step: 2", "epoch: 2 step: 1", "epoch: 2 step: 2"]
    for line in lines:
        value = line.split(", loss is ")[1]
        assert value == str(np.float32(value))      # float32 precision, as MindSpore prints


def test_eval_callbacks_and_fit(capsys):
    events = []

    class EvalRecorder(Callback):
        def on_eval_begin(self, ctx):
            events.append(("eval_begin", ctx.original_args().mode))

        def on_eval_step_end(self, ctx):
            events.append(("eval_step", ctx.original_args().cur_step_num))

        def on_eval_end(self, ctx):
            events.append(("eval_end", sorted(ctx.original_args().metrics)))

    net, loss, opt = _classifier()
    model = Model(net, loss, opt, metrics={"accuracy"})
    data = _batches(n=32)
    model.fit(2, data, valid_dataset=data, callbacks=[EvalRecorder(), LossMonitor(per_print_times=0)])
    assert events == [("eval_begin", "eval"), ("eval_step", 1), ("eval_step", 2),
                      ("eval_end", ["accuracy"])] * 2
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    for epoch, line in enumerate(out, 1):
        assert line.startswith(f"Eval result: epoch {epoch}, metrics: {{'accuracy': ")


def test_initial_epoch_continues_numbering():
    rec = Recorder()
    net, loss, opt = _classifier()
    Model(net, loss, opt).train(3, _batches(n=32), callbacks=rec, initial_epoch=1)
    steps = [e for e in rec.events if e[0] == "step_end"]
    assert steps == [("step_end", 2, 3), ("step_end", 2, 4), ("step_end", 3, 5), ("step_end", 3, 6)]


# ---- resume through Model and ModelCheckpoint -----------------------------------------------------
def test_resume_from_model_checkpoint_matches_uninterrupted_training(tmp_path):
    data = _batches()
    net, loss, opt = _classifier(seed=1, lr=0.01, optimizer="adam")
    Model(net, loss, opt).train(4, data)

    first, loss1, opt1 = _classifier(seed=1, lr=0.01, optimizer="adam")
    config = CheckpointConfig(save_checkpoint_steps=len(data), keep_checkpoint_max=1)
    Model(first, loss1, opt1).train(2, data, callbacks=ModelCheckpoint("run", str(tmp_path), config))
    second, loss2, opt2 = _classifier(seed=2, lr=0.01, optimizer="adam")
    model = Model(second, loss2, opt2)
    load_param_into_net(model.train_network, load_checkpoint(str(tmp_path / "run-2_6.ckpt")),
                        strict_load=True)
    model.train(4, data, initial_epoch=2)
    expected = dict(checkpoint_entries(Model(net, loss, opt).train_network))
    for name, param in checkpoint_entries(model.train_network):
        assert np.array_equal(param.asnumpy(), expected[name].asnumpy()), name


# ---- bad input ------------------------------------------------------------------------------------
def test_bad_arguments():
    net, loss, opt = _classifier()
    with pytest.raises(TypeError, match="network must be a Cell"):
        Model(lambda x: x)
    with pytest.raises(ValueError, match="metrics need a loss_fn"):
        Model(net, optimizer=opt, metrics={"accuracy"})
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        Model(net, loss, opt, metrics={"f1"})
    with pytest.raises(ValueError, match="eval_indexes"):
        Model(net, loss, opt, eval_indexes=[0, 1])
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        Model(net, loss, opt, foo=1)
    with pytest.raises(ValueError, match="amp_level must be one of"):
        Model(net, loss, opt, amp_level="O4")
    model = Model(net, loss, opt)
    with pytest.raises(ValueError, match="Model.eval needs metrics"):
        model.eval(_batches())
    with pytest.raises(ValueError, match="initial_epoch"):
        model.train(2, _batches(), initial_epoch=2)
    with pytest.raises(ValueError, match="epoch must be"):
        model.train(0, _batches())
    with pytest.raises(TypeError, match="train_dataset must be"):
        model.train(1, 42)
    with pytest.raises(ValueError, match="valid_frequency"):
        Model(net, loss, opt, metrics={"accuracy"}).fit(1, _batches(), _batches(), valid_frequency=0)


def test_a_generator_is_rejected_on_its_second_epoch():
    net, loss, opt = _classifier()
    batches = iter(_batches(n=32))
    with pytest.raises(ValueError, match="no batches in epoch 2.*used only once"):
        Model(net, loss, opt).train(2, batches)
