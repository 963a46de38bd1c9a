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
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = run_example("mnist_cnn.py", "--out-dir", str(tmp_path), env={"TMPDIR": str(temp)})
    assert list(temp.iterdir()) == []          # its digits folder is removed when it ends
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


# one script of each family (every example has --help; these cover each way they parse)
SCRIPTS = ["host_embedding_table.py", "mnist_cnn.py", "operator_parallel_functional.py",
           "pipeline_resnet.py", "sharding_quickstart.py", "singa_mnist_dist.py",
           "singa/mnist_multiprocess.py", "wide_deep/train_and_eval.py"]


def test_every_example_answers_help_without_running():
    """``--help`` prints the options and exits 0 at once (no training, no files written)."""
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    started = {name: subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", name),
                                       "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=ROOT) for name in SCRIPTS}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.startswith("usage: "), f"{name}: {out}\n{err}"
        assert "-h, --help" in out and "Warning" not in err, f"{name}: {err}"


def test_mindspore_and_other_spellings_of_options_are_both_accepted():
    """The MindSpore-derived scripts keep upstream's ``--data_path``/``--batch_size`` and
    accept ``--data-dir``/``--batch-size``; the others the other way round."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import mnist_cnn
    finally:
        sys.path.pop(0)
    parser = mnist_cnn.build_parser()
    assert parser.parse_args(["--data_path", "d"]).data_dir == "d"
    assert parser.parse_args(["--data-dir", "d", "--batch_size", "3"]).batch_size == 3
    text = open(os.path.join(ROOT, "examples", "operator_parallel_functional.py")).read()
    assert '"--data_path", "--data-path", "--data-dir"' in text
