"""The example scripts run as users run them (a subprocess each, with a timeout)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("sklearn", reason="the examples train on scikit-learn's digits")


def run_example(name, *args, timeout=300, env=None):
    full_env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", **(env or {}))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                          capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_mnist_cnn_reaches_97_percent_on_held_out_digits(tmp_path):
    out = run_example("mnist_cnn.py", "--out-dir", str(tmp_path))
    accuracies = [float(a) for a in re.findall(r"evaluation accuracy = ([0-9.]+)", out)]
    losses = [float(a) for a in re.findall(r"training loss = ([0-9.]+)", out)]
    assert len(accuracies) >= 2 and losses[-1] < losses[0]
    assert accuracies[-1] >= 0.97, out
    assert (tmp_path / "mnist_cnn_loss.png").stat().st_size > 1000


def test_seed_000_single_process_loss_falls_and_matmuls_run_on_the_host():
    out = run_example("host_device_mlp.py", "--epochs", "3", env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    losses = [float(x) for x in re.findall(r"step: 0, loss is ([0-9.]+)", out)]
    assert len(losses) == 3 and losses[-1] < losses[0], out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("layer")}
    # the report names scope and type, as seed 000's check reads it: "layer1.matmul (MatMul)  CPU"
    assert all(rows[f"layer{i}.{op}"][1:3] == [f"({kind})", "CPU"] for i in (1, 2, 3)
               for op, kind in (("matmul", "MatMul"), ("add", "Add")))
    assert "GPU:0" in out   # the rest ran on the (virtual) device
