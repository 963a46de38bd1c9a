"""The example scripts run as users run them (a subprocess each, with a timeout)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("sklearn", reason="the examples train on scikit-learn's digits")


def run_example(name, *args, timeout=300, env=None, temp=None):
    """Run an example (with ``temp`` as its temporary folder); it must succeed, print no
    Python warning and leave nothing in ``temp``. Returns its standard output."""
    full_env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", **(env or {}))
    if temp is not None:
        temp.mkdir()
        full_env["TMPDIR"] = str(temp)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                          capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert not re.search(r"\w+Warning\b", proc.stderr), proc.stderr
    assert temp is None or list(temp.iterdir()) == [], f"{name} left files in {temp}"
    return proc.stdout


def test_mnist_cnn_reaches_97_percent_on_held_out_digits(tmp_path):
    # its digits folder is removed when it ends
    out = run_example("mnist_cnn.py", "--out-dir", str(tmp_path), temp=tmp_path / "tmp")
    accuracies = [float(a) for a in re.findall(r"evaluation accuracy = ([0-9.]+)", out)]
    losses = [float(a) for a in re.findall(r"training loss = ([0-9.]+)", out)]
    assert len(accuracies) >= 2 and losses[-1] < losses[0]
    assert accuracies[-1] >= 0.97, out
    assert (tmp_path / "mnist_cnn_loss.png").stat().st_size > 1000


def test_seed_000_single_process_loss_falls_and_matmuls_run_on_the_host(tmp_path):
    # its digits folder (mkdtemp before issue 30: 270 of them piled up) is removed at exit
    out = run_example("host_device_mlp.py", "--epochs", "3", env={"MINITORCH_DIST_VIRTUAL_GPU": "1"},
                      temp=tmp_path / "tmp")
    losses = [float(x) for x in re.findall(r"step: 0, loss is ([0-9.]+)", out)]
    assert len(losses) == 3 and losses[-1] < losses[0], out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("layer")}
    # the report names scope and type, as seed 000's check reads it: "layer1.matmul (MatMul)  CPU"
    assert all(rows[f"layer{i}.{op}"][1:3] == [f"({kind})", "CPU"] for i in (1, 2, 3)
               for op, kind in (("matmul", "MatMul"), ("add", "Add")))
    assert "GPU:0" in out   # the rest ran on the (virtual) device


# every example of examples/ (and one of SINGA's, for each way they parse)
SCRIPTS = ["cifar10_synthetic.py", "host_device_mlp.py", "host_embedding_table.py", "mnist_cnn.py",
           "memory_and_communication.py", "operator_parallel_functional.py",
           "pipeline_resnet.py", "pipeline_resnet50_cifar.py",
           "sharding_quickstart.py", "singa_mnist_dist.py", "singa_mnist_multiprocess.py",
           "singa/mnist_multiprocess.py", "wide_deep/train_and_eval.py",
           "wide_deep/generate_synthetic_data.py"]


def test_every_example_is_in_the_help_check():
    top = {name for name in os.listdir(os.path.join(ROOT, "examples")) if name.endswith(".py")}
    assert sorted(top - set(SCRIPTS)) == []


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
    assert parser.parse_args(["--data-path", "d"]).data_dir == "d"
    text = open(os.path.join(ROOT, "examples", "operator_parallel_functional.py")).read()
    assert '"--data_path", "--data-path", "--data-dir"' in text
    # every example that reads a data folder takes all four spellings (issue 30)
    for name in ("host_device_mlp.py", "mnist_cnn.py", "operator_parallel_functional.py",
                 "pipeline_resnet.py", "pipeline_resnet50_cifar.py", "singa_mnist_dist.py",
                 "wide_deep/src/config.py", "wide_deep/generate_synthetic_data.py"):
        text = open(os.path.join(ROOT, "examples", name)).read()
        assert all(f'"{spelling}"' in text for spelling in
                   ("--data_path", "--data-path", "--data-dir", "--data_dir")), name


def test_a_data_folder_that_is_not_there_is_refused_by_name(tmp_path):
    """``--data_path`` (beside the seeds' ``$DATA_PATH``) must name a folder: a clear usage
    error, before anything is written or trained."""
    missing = str(tmp_path / "no_such_folder")
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    started = {name: subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", name),
                                       "--data-dir", missing], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
               for name in ("host_device_mlp.py", "pipeline_resnet.py")}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, f"{name}: {out}\n{err}"
        assert f"--data_path {missing} is not a directory" in err and "Traceback" not in err
