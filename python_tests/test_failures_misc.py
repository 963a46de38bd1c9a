"""Issue 17 items 7 and 12: inputs that used to be accepted silently are clear errors (or
documented behaviour), optional-dependency benchmarks skip with a one-line reason, and the
package metadata is in the current format."""
import os
import subprocess
import sys

import pytest

from mpi_jobs import REPO, child_env

HIDE_TORCH = '''import sys
class _HideTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None
sys.meta_path.insert(0, _HideTorch())
'''


def test_bench_host_device_without_torch_says_why_in_one_line(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH)
    env = child_env({"PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])})
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_host_device.py"),
                           "--rows", "100"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "bench_host_device: skipped: it compares against PyTorch, which is not installed "
        "(pip install torch; the CPU build is enough)"]
    assert "Traceback" not in done.stderr


def test_license_metadata_is_an_spdx_expression():
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    assert any(r.startswith("setuptools>=") and int(r.split(">=")[1].split(".")[0]) >= 77
               for r in requires)


def test_readme_test_command_does_not_reinstall():
    with open(os.path.join(REPO, "README.md")) as handle:
        text = handle.read()
    assert "```bash\npython -m pytest -q\n```" in text
    assert 'pip install -e ".[dev]" && python -m pytest' not in text
    with open(os.path.join(REPO, ".ci", "run")) as handle:
        ci = handle.read()
    assert "python -m pytest -q" in ci and '"$status" -eq 5' in ci
