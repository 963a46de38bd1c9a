"""The Wide&Deep example never invents data in place of a path the user gave.
Synthetic data is used without ``--data_path`` or with ``--synthetic_data 1``, and the
example says which data it uses."""
import importlib.util
import os
import sys

import pytest

from mpi_jobs import REPO, launch, needs_mpi, run_process

EXAMPLE = os.path.join(REPO, "examples", "wide_deep")
SCRIPT = os.path.join(EXAMPLE, "train_and_eval.py")
SMALL = ["--train_rows", "600", "--test_rows", "100", "--epochs", "1", "--batch_size", "100",
         "--eval_batch_size", "100", "--print_every", "0"]


def _config_module():
    sys.path.insert(0, EXAMPLE)
    try:
        spec = importlib.util.spec_from_file_location("wide_deep_config_for_failures",
                                                      os.path.join(EXAMPLE, "src", "config.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(EXAMPLE)


def test_a_missing_data_path_is_refused_and_not_created(tmp_path):
    missing = tmp_path / "nonexistent" / "criteo"
    done, _ = run_process([sys.executable, SCRIPT, "--data_path", str(missing), *SMALL],
                          timeout=120, env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 1
    assert f"--data_path {missing} does not exist" in done.stderr
    assert "--synthetic_data 1" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "nonexistent").exists()


def test_an_empty_folder_is_refused_and_left_empty(tmp_path):
    done, _ = run_process([sys.executable, SCRIPT, "--data_path", str(tmp_path), *SMALL],
                          timeout=120, env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 1
    assert "has no train.txt and no test.txt" in done.stderr
    assert os.listdir(tmp_path) == []


def test_synthetic_data_on_request_says_so(tmp_path):
    data = tmp_path / "data"
    done, _ = run_process([sys.executable, SCRIPT, "--data_path", str(data), "--synthetic_data",
                           "1", *SMALL], timeout=240, env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"data: synthetic Criteo set in {data}")
    assert (data / "train.txt").exists()
    again, _ = run_process([sys.executable, SCRIPT, "--data_path", str(data), *SMALL],
                           timeout=240, env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert again.returncode == 0, again.stderr       # files present: used as given
    assert again.stdout.startswith(f"data: Criteo files in {data}")


def test_no_data_path_means_the_default_synthetic_set():
    config = _config_module()
    parsed = config.parse_config([])
    assert parsed.synthetic_data is True and parsed.data_path == config.DEFAULT_DATA_PATH
    given = config.parse_config(["--data_path", "/somewhere"])
    assert given.synthetic_data is False
    with pytest.raises(SystemExit, match="/somewhere does not exist"):
        config.check_data_path(given)


@needs_mpi
def test_a_missing_data_path_under_the_launcher_is_reported_once(tmp_path):
    missing = str(tmp_path / "criteo")
    done, seconds = launch(2, SCRIPT, "--data_path", missing, *SMALL, launcher_timeout=90,
                           env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 1
    assert done.stderr.count(f"--data_path {missing} does not exist") == 1, done.stderr
    assert "MPI_ABORT" not in done.stderr and not os.path.exists(missing)
