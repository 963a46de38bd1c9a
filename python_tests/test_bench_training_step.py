"""``benchmarks/bench_training_step.py``: its hand-written NumPy baselines compute the same
training step as minitorch_dist (else the ratios compare different work), and the script
runs and prints, for the models asked for only, ratios that parse and equal its timings."""
import importlib.util
import math
import os
import re

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn

from mpi_jobs import REPO

spec = importlib.util.spec_from_file_location(
    "bench_training_step", os.path.join(REPO, "benchmarks", "bench_training_step.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _batches(count=2):
    rng = np.random.default_rng(1)
    return [(rng.normal(size=(bench.BATCH, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, bench.BATCH).astype(np.int64)) for _ in range(count)]


def _train_both(net, optimizer, by_hand):
    step = bench.minitorch_step(net, optimizer)
    for x, y in _batches():
        mt_loss = float(step(ms.Tensor(x), ms.Tensor(y.astype(np.int32))).asnumpy())
        np_loss = float(by_hand.step(x, y))
        assert np_loss == pytest.approx(mt_loss, rel=1e-4)
    return dict((name, p.asnumpy()) for name, p in net.parameters_and_names())


def test_numpy_mlp_by_hand_is_the_same_step():
    ms.set_seed(3)
    net = bench.SeedMLP()
    by_hand = bench.NumpyMLP(net)
    after = _train_both(net, nn.SGD(net.trainable_params(), 0.01), by_hand)
    for i, layer in enumerate(("layer1", "layer2", "layer3")):
        np.testing.assert_allclose(by_hand.W[i], after[f"{layer}.weight"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(by_hand.b[i], after[f"{layer}.bias"], rtol=1e-4, atol=1e-6)


def test_numpy_cnn_by_hand_is_the_same_step():
    ms.set_seed(3)
    net = bench.SingaCNN()
    by_hand = bench.NumpyCNN(net)
    after = _train_both(net, nn.SGD(net.trainable_params(), 0.005, momentum=0.9), by_hand)
    for name in by_hand.names:
        np.testing.assert_allclose(by_hand.p[name], after[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


RATIO = re.compile(r"^  (\w+): minitorch_dist / (pytorch|numpy by hand) = ([0-9.]+)  "
                   r"\(target <= [0-9.]+\)$", re.MULTILINE)
AGAINST = {"pytorch": "pytorch", "numpy by hand": "numpy (by hand)"}


def _printed_ratios(out, results):
    """The printed ratios, checked against the median times ``main`` returned."""
    printed = {(model, against): float(value) for model, against, value in RATIO.findall(out)}
    for (model, against), value in printed.items():
        times = results[model]
        assert math.isfinite(value) and value > 0, (model, against, value)
        expected = times["minitorch_dist"] / times[AGAINST[against]]
        assert value == pytest.approx(expected, abs=0.006), (model, against, value, times)
    return printed


def test_script_prints_every_ratio(capsys):
    results = bench.main(["--rounds", "1", "--steps", "1"])
    out = capsys.readouterr().out
    assert set(results) == {"mlp", "cnn"}
    contenders = {"minitorch_dist", "numpy (by hand)"}
    if importlib.util.find_spec("torch") is not None:
        contenders.add("pytorch")
    for model in ("mlp", "cnn"):
        assert set(results[model]) == contenders
        assert all(math.isfinite(t) and t > 0 for t in results[model].values())
    printed = _printed_ratios(out, results)
    assert set(printed) == {(model, against) for model in ("mlp", "cnn")
                            for against, name in AGAINST.items() if name in contenders}


def test_only_the_model_asked_for_is_run_and_printed(capsys):
    results = bench.main(["--rounds", "1", "--steps", "1", "--only", "cnn"])
    out = capsys.readouterr().out
    assert set(results) == {"cnn"}
    assert "MLP" not in out and "mlp:" not in out
    assert {model for model, _ in _printed_ratios(out, results)} == {"cnn"}


def _check_contender(capsys, flag, name, label, other_step):
    """``flag`` adds the contender ``name``, interleaved, printed as ``label``; a step made by
    ``other_step(net, optimizer)`` trains a copy of a net to the plain step's bits."""
    results = bench.main(["--rounds", "1", "--steps", "1", "--only", "mlp", flag])
    out = capsys.readouterr().out
    assert name in results["mlp"]
    ratio = re.search(rf"mlp: minitorch_dist / {label} = ([0-9.]+)", out)
    expected = results["mlp"]["minitorch_dist"] / results["mlp"][name]
    assert ratio and float(ratio.group(1)) == pytest.approx(expected, abs=0.006)
    ms.set_seed(3)
    nets = [bench.SeedMLP()]
    nets.append(bench.seed_mlp_copy(nets[0]))
    steps = [bench.minitorch_step(nets[0], nn.SGD(nets[0].trainable_params(), 0.01)),
             other_step(nets[1])]
    for x, y in _batches():
        for step in steps:
            step(ms.Tensor(x), ms.Tensor(y.astype(np.int32)))
    for a, b in zip(nets[0].trainable_params(), nets[1].trainable_params()):
        assert np.array_equal(a.asnumpy(), b.asnumpy())


def test_the_unfused_contender_trains_the_same_and_is_printed(capsys):
    """--unfused: SGD one parameter at a time in NumPy, from the same weights, interleaved;
    its updates equal the fused ones bit for bit (nn/optim/fused.py)."""
    _check_contender(capsys, "--unfused", "unfused", "unfused optimizer", lambda net:
                     bench.minitorch_step(net, bench.UnfusedSGD(net.trainable_params(), 0.01)))


def test_the_python_engine_contender_trains_the_same_and_is_printed(capsys):
    """--python-engine: the backward engine's Python twins for one contender, interleaved; the
    C++ loops are put back after each of its steps, and both train to the same bits."""
    from minitorch_dist import autograd
    native = autograd._native
    _check_contender(capsys, "--python-engine", "python engine", "python engine", lambda net:
                     bench.python_engine_step(net, nn.SGD(net.trainable_params(), 0.01)))
    assert autograd._native is native
