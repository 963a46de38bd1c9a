"""Callbacks: the base class, LossMonitor's exact output, TimeMonitor, ModelCheckpoint
naming and retention, ProgressBar, History and LambdaCallback."""
import io
import os
import re

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.train import (Callback, CallbackList, CallbackParams, CheckpointConfig, History,
                                  LambdaCallback, LossMonitor, Model, ModelCheckpoint, ProgressBar,
                                  RunContext, TimeMonitor, load_checkpoint)


def _context(**params):
    return RunContext(CallbackParams(**params))


def _model(seed=0):
    ms.set_seed(seed)
    net = nn.Dense(2, 2)
    return Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                 nn.SGD(net.trainable_params(), 0.1), metrics={"accuracy"})


def _batches(steps, batch=4):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(steps * batch, 2)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
    return [(x[i:i + batch], y[i:i + batch]) for i in range(0, len(x), batch)]


# ---- base classes ---------------------------------------------------------------------------------
def test_new_style_hooks_call_the_old_names():
    calls = []

    class Old(Callback):
        def __getattribute__(self, name):
            if name in ("begin", "epoch_begin", "step_begin", "step_end", "epoch_end", "end"):
                return lambda ctx: calls.append(name)
            return object.__getattribute__(self, name)

    cb, ctx = Old(), _context()
    for prefix in ("on_train", "on_eval"):
        for hook in ("begin", "epoch_begin", "step_begin", "step_end", "epoch_end", "end"):
            getattr(cb, f"{prefix}_{hook}")(ctx)
    assert calls == ["begin", "epoch_begin", "step_begin", "step_end", "epoch_end", "end"] * 2


def test_run_context_and_params():
    params = CallbackParams(cur_step_num=3)
    ctx = RunContext(params)
    assert ctx.original_args() is params and params.cur_step_num == 3
    params.net_outputs = 1.5
    assert params["net_outputs"] == 1.5
    with pytest.raises(AttributeError, match="no attribute 'nope'.*cur_step_num"):
        params.nope
    assert not ctx.get_stop_requested()
    ctx.request_stop()
    assert ctx.get_stop_requested()
    with pytest.raises(TypeError, match="RunContext needs a dict"):
        RunContext([1])


def test_callback_list_rejects_non_callbacks_and_exits_all():
    with pytest.raises(TypeError, match=r"callbacks\[1\] must be a Callback"):
        CallbackList([LossMonitor(), print])
    with pytest.raises(TypeError, match="a Callback or a list"):
        CallbackList("LossMonitor")
    exited = []

    class Tracked(Callback):
        def __init__(self, name):
            self.name = name

        def __exit__(self, *exc):
            exited.append(self.name)

    with pytest.raises(RuntimeError):
        with CallbackList([Tracked("a"), Tracked("b")]):
            raise RuntimeError("training failed")
    assert exited == ["b", "a"]


# ---- LossMonitor ----------------------------------------------------------------------------------
def test_loss_monitor_prints_mindspore_format(capsys):
    monitor = LossMonitor()
    for step in (1, 2, 3):
        monitor.on_train_step_end(_context(cur_epoch_num=2, cur_step_num=step + 3, batch_num=3,
                                           net_outputs=ms.Tensor(np.float32(2.3025851))))
    assert capsys.readouterr().out == ("epoch: 2 step: 1, loss is 2.3025851\n"
                                       "epoch: 2 step: 2, loss is 2.3025851\n"
                                       "epoch: 2 step: 3, loss is 2.3025851\n")


def test_loss_monitor_per_print_times_and_tuple_outputs(capsys):
    monitor = LossMonitor(per_print_times=2)
    for step in range(1, 6):
        loss = (ms.Tensor(np.array([1.0, 2.0], np.float32)), ms.Tensor([0.0]))   # first item, averaged
        monitor.on_train_step_end(_context(cur_epoch_num=1, cur_step_num=step, batch_num=5,
                                           net_outputs=loss))
    assert capsys.readouterr().out == "epoch: 1 step: 2, loss is 1.5\nepoch: 1 step: 4, loss is 1.5\n"
    silent = LossMonitor(per_print_times=0)
    silent.on_train_step_end(_context(cur_epoch_num=1, cur_step_num=1, batch_num=1,
                                      net_outputs=ms.Tensor(1.0)))
    assert capsys.readouterr().out == ""
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="per_print_times"):
            LossMonitor(bad)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_loss_monitor_stops_on_invalid_loss(bad):
    ctx = _context(cur_epoch_num=3, cur_step_num=9, batch_num=4, net_outputs=ms.Tensor(np.float32(bad)))
    with pytest.raises(ValueError, match=r"epoch: 3 step: 1\. Invalid loss (nan|inf), terminating"):
        LossMonitor().on_train_step_end(ctx)


def test_loss_monitor_prints_eval_results_in_fit(capsys):
    LossMonitor().on_train_epoch_end(_context(cur_epoch_num=2, metrics={"accuracy": 0.5}))
    assert capsys.readouterr().out == "Eval result: epoch 2, metrics: {'accuracy': 0.5}\n"


# ---- TimeMonitor ----------------------------------------------------------------------------------
def test_time_monitor_prints_epoch_and_step_time(capsys):
    _model().train(2, _batches(3), callbacks=TimeMonitor())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    pattern = re.compile(r"Train epoch time: (\d+\.\d{3}) ms, per step time: (\d+\.\d{3}) ms$")
    for line in lines:
        match = pattern.match(line)
        assert match, line
        assert float(match.group(2)) == pytest.approx(float(match.group(1)) / 3, abs=2e-3)
    with pytest.raises(ValueError, match="data_size"):
        TimeMonitor(0)


# ---- ModelCheckpoint ------------------------------------------------------------------------------
def _ckpt_files(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".ckpt"))


def test_model_checkpoint_names_files_and_keeps_the_newest(tmp_path):
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=2)
    cb = ModelCheckpoint(prefix="net", directory=str(tmp_path), config=config)
    _model().train(2, _batches(3), callbacks=cb)
    assert _ckpt_files(tmp_path) == ["net-2_2.ckpt", "net-2_3.ckpt"]
    assert cb.latest_ckpt_file_name == str(tmp_path / "net-2_3.ckpt")


def test_model_checkpoint_step_interval_and_final_save(tmp_path):
    cb = ModelCheckpoint(directory=str(tmp_path), config=CheckpointConfig(save_checkpoint_steps=4))
    _model().train(2, _batches(3), callbacks=[cb])
    # step 4 (epoch 2, step 1), then the last step at the end of training
    assert _ckpt_files(tmp_path) == ["CKP-2_1.ckpt", "CKP-2_3.ckpt"]
    cb2 = ModelCheckpoint(directory=str(tmp_path), config=CheckpointConfig(save_checkpoint_steps=2))
    assert cb2.prefix == "CKP_1"   # the directory already holds CKP files
    _model().train(1, _batches(3), callbacks=cb2)
    assert "CKP_1-1_2.ckpt" in _ckpt_files(tmp_path) and "CKP_1-1_3.ckpt" in _ckpt_files(tmp_path)
    assert ModelCheckpoint(directory=str(tmp_path)).prefix == "CKP_2"


def test_model_checkpoint_saves_train_network_with_optimizer_state(tmp_path):
    config = CheckpointConfig(save_checkpoint_steps=3, append_info=["epoch_num", "step_num", {"lr": 0.1}])
    model = _model()
    model.train(1, _batches(3), callbacks=ModelCheckpoint(directory=str(tmp_path), config=config))
    loaded = load_checkpoint(str(tmp_path / "CKP-1_3.ckpt"))
    assert {"weight", "bias", "global_step"} <= set(loaded)
    assert int(loaded["global_step"].asnumpy()[0]) == 3
    assert int(loaded["epoch_num"].asnumpy()) == 1 and int(loaded["step_num"].asnumpy()) == 3
    np.testing.assert_array_equal(loaded["weight"].asnumpy(), model.predict_network.weight.asnumpy())


def test_model_checkpoint_async_save_finishes_by_train_end(tmp_path):
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=3, async_save=True)
    _model().train(2, _batches(2), callbacks=ModelCheckpoint(directory=str(tmp_path), config=config))
    files = _ckpt_files(tmp_path)
    assert "CKP-2_2.ckpt" in files and 3 <= len(files) <= 4   # a save in flight is not yet listed
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    load_checkpoint(str(tmp_path / "CKP-2_2.ckpt"))


def test_checkpoint_config_validation(tmp_path):
    with pytest.raises(ValueError, match="both 0"):
        CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=0)
    with pytest.raises(ValueError, match="both 0"):
        CheckpointConfig(keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=0)
    with pytest.raises(ValueError, match="save_checkpoint_steps"):
        CheckpointConfig(save_checkpoint_steps=-1)
    with pytest.raises(ValueError, match="append_info"):
        CheckpointConfig(append_info=["epochs"])
    config = CheckpointConfig(save_checkpoint_steps=10, save_checkpoint_seconds=5)
    assert config.save_checkpoint_seconds == 0           # steps take priority
    assert config.get_checkpoint_policy()["save_checkpoint_steps"] == 10
    with pytest.raises(ValueError, match="prefix"):
        ModelCheckpoint(prefix="a/b", directory=str(tmp_path))
    with pytest.raises(TypeError, match="CheckpointConfig"):
        ModelCheckpoint(directory=str(tmp_path), config={"save_checkpoint_steps": 1})


# ---- ProgressBar, History, LambdaCallback ---------------------------------------------------------
def test_progress_bar_is_off_without_a_terminal(capsys):
    bar = ProgressBar()
    _model().train(1, _batches(2), callbacks=bar)
    captured = capsys.readouterr()
    assert not bar.enabled and captured.out == "" and captured.err == ""


def test_progress_bar_forced_draws_steps_and_loss():
    out = io.StringIO()
    _model().train(2, _batches(3), callbacks=ProgressBar(force=True, file=out, refresh_seconds=0))
    text = out.getvalue()
    assert "epoch 1/2" in text and "epoch 2/2" in text
    assert "3/3" in text and "loss=" in text


def test_history_records_losses_and_fit_metrics():
    history = History()
    model = _model()
    data = _batches(3)
    model.fit(3, data, valid_dataset=data, valid_frequency=2, callbacks=history)
    assert history.epoch == [1, 2, 3]
    assert len(history.history["net_output"]) == 3
    assert len(history.history["accuracy"]) == 1          # evaluated after epoch 2 only


def test_lambda_callback():
    seen = []
    cb = LambdaCallback(on_train_epoch_end=lambda ctx: seen.append(ctx.original_args().cur_epoch_num))
    _model().train(2, _batches(1), callbacks=cb)
    assert seen == [1, 2]
    with pytest.raises(TypeError, match="unknown hook"):
        LambdaCallback(on_batch_end=print)
