"""Optional dependencies: a benchmark that compares against a library that is not installed
skips with a one-line reason instead of a traceback."""
import os
import subprocess
import sys

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
