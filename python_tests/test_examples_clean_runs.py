"""A normal run of an example prints no Python warning and leaves nothing behind in the
temporary folder, and the docstring examples that write files remove their folders (issue 30).

Each example runs once, as a user starts it but with the smallest sizes its options allow, in
a fresh ``TMPDIR``. An option MindSpore documents as a no-op here (the seeds'
``dataset_sink_mode=True``) is a one-line "minitorch_dist: note: ..." (``log.note``), never a
Python warning with its source line.
"""
import doctest
import glob
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

from mpi_jobs import REPO, child_env

pytest.importorskip("sklearn", reason="the examples train on scikit-learn's digits")

EXAMPLES = os.path.join(REPO, "examples")

# (script, its arguments; "{tmp}" is a scratch folder of the test, not the temporary folder)
CASES = [
    ("pipeline_resnet.py", ["--epochs", "1", "--width", "2", "--blocks", "0,0,0,0",
                            "--num-samples", "32", "--synthetic-samples", "32"]),
    # --save names a folder that does not exist yet (docs/pipeline.md's `--save out/`: it
    # stopped with FileNotFoundError before issue 30)
    ("pipeline_resnet50_cifar.py", ["--reference", "1", "--epochs", "1", "--samples", "8",
                                    "--batch-size", "8", "--width", "2", "--blocks", "1,1,1,1",
                                    "--save", "{tmp}/saved/out"]),
    ("wide_deep/train_and_eval.py", ["--host_device_mix", "1", "--data_path", "{tmp}/wd",
                                     "--synthetic_data", "1", "--train_rows", "300",
                                     "--test_rows", "100", "--epochs", "1", "--batch_size", "100",
                                     "--eval_batch_size", "100", "--output_path", "{tmp}/out"]),
    ("host_embedding_table.py", ["--steps", "2", "--vocab", "20000", "--capacity", "1MiB"]),
    ("singa_mnist_dist.py", ["--epochs", "1", "--max-steps", "2"]),
    ("cifar10_synthetic.py", ["{tmp}/cifar", "--num-train", "20", "--num-test", "10"]),
    # one process: its ranked sections on thread ranks, the others on the virtual GPU
    ("memory_and_communication.py", []),
]


def run_clean(script, args, tmp_path):
    """Run ``script`` with a fresh temporary folder; returns (process, what was left there)."""
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    env = child_env({"TMPDIR": str(temp), "MPLBACKEND": "Agg"})
    env.pop("PYTHONWARNINGS", None)             # Python's default filters, as a user has
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, script),
                           *[arg.format(tmp=tmp_path) for arg in args]], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    return done, sorted(path.name for path in temp.iterdir())


@pytest.mark.parametrize("script,args", CASES, ids=[script for script, _ in CASES])
def test_a_normal_run_prints_no_warning_and_leaves_no_temporary_files(script, args, tmp_path):
    done, left = run_clean(script, args, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if re.search(r"\w+Warning\b", line)]
    assert warnings == [], done.stderr[-3000:]
    assert left == [], f"{script} left {left} in its temporary folder"


def test_a_noted_no_op_is_one_note_line():
    """The seeds pass ``dataset_sink_mode=True``: one note line, no warning, no source line."""
    code = ("import numpy as np, minitorch_dist as ms; from minitorch_dist import nn; "
            "net = nn.Dense(2, 1); model = ms.Model(net, nn.MSELoss(), "
            "nn.SGD(net.trainable_params(), 0.1)); "
            "data = [(np.ones((2, 2), np.float32), np.ones((2, 1), np.float32))]; "
            "model.train(1, data, dataset_sink_mode=True); "
            "model.train(1, data, dataset_sink_mode=True)")
    env = child_env()
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "minitorch_dist: note: Model: dataset_sink_mode=True is accepted and changes nothing: "
        "data is fed one batch per step, as MindSpore does on CPU (sink_size then does not "
        "apply)"], done.stderr


# ---- docstring examples -------------------------------------------------------------------
def _docstring_lines(path):
    with open(path) as handle:
        return [(number, line) for number, line in enumerate(handle, 1)
                if line.lstrip().startswith((">>> ", "... "))]


def test_no_docstring_example_makes_a_folder_it_does_not_remove():
    """``tempfile.mkdtemp()`` in a doctest leaks a folder on every run of the suite; the
    examples use ``TemporaryDirectory`` and clean it up."""
    found = []
    for top in ("minitorch_dist", "examples"):
        for folder, _, names in os.walk(os.path.join(REPO, top)):
            if os.path.relpath(folder, REPO).startswith(os.path.join("examples", "singa")):
                continue        # SINGA's own examples: their doctests are not run
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    found += [f"{os.path.relpath(path, REPO)}:{number}"
                              for number, line in _docstring_lines(path) if "mkdtemp(" in line]
    assert found == []


def test_no_notebook_makes_a_folder_it_does_not_remove():
    """A learner runs a notebook many times: ``mkdtemp`` in a code cell leaves a folder in the
    temporary folder each time (``TemporaryDirectory`` goes with the kernel)."""
    found = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "notebooks", "*.ipynb"))):
        with open(path) as handle:
            cells = json.load(handle)["cells"]
        found += [f"{os.path.basename(path)} cell {number}" for number, cell in enumerate(cells)
                  if cell["cell_type"] == "code" and "mkdtemp(" in "".join(cell["source"])]
    assert found == []


# the modules whose docstring examples write files
WRITERS = ["minitorch_dist.dataset.cifar10", "minitorch_dist.dataset.criteo",
           "minitorch_dist.dataset.criteo_synthetic", "minitorch_dist.dataset.idx",
           "minitorch_dist.dataset.mind_dataset", "minitorch_dist.dataset.mnist",
           "minitorch_dist.dataset.tfrecord", "minitorch_dist.dataset.tfrecord_io",
           "minitorch_dist.mindrecord.filereader", "minitorch_dist.mindrecord.filewriter",
           "minitorch_dist.profiler", "minitorch_dist.train.checkpoint"]


def test_docstring_examples_that_write_files_remove_them(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in WRITERS:
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        assert result.attempted and not result.failed, name
    assert sorted(path.name for path in tmp_path.iterdir()) == []
