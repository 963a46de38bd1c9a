"""``benchmarks/bench_conv.py`` runs: its seed-004 twin imported a helper that had moved
(``ops.conv._same_pads``, now ``ops.conv_geometry.same_pads``), so the benchmark stopped
with an ImportError and nothing noticed. One round of the seed-004 model, both frameworks,
the same first loss; the GPU comparison's code path as a dry run on the virtual GPU, and its
refusal where no CUDA GPU is."""
import os
import re
import subprocess
import sys

import pytest

from mpi_jobs import REPO, child_env

pytest.importorskip("torch")


def test_the_seed004_comparison_runs_and_both_start_from_the_same_loss():
    done = subprocess.run([sys.executable, "benchmarks/bench_conv.py", "--threads", "1",
                           "--rounds", "1", "--models", "seed004"], cwd=REPO, env=child_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = re.search(r"seed004\s+ours / pytorch =\s+([\d.]+).*first loss ([\d.]+) vs ([\d.]+)",
                      done.stdout)
    assert found, done.stdout
    assert float(found.group(1)) > 0 and found.group(2) == found.group(3)


def _bench(*args):
    """bench_conv.py with the virtual GPU on (so "GPU" exists, but no CUDA device does)."""
    env = child_env({"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    return subprocess.run([sys.executable, "benchmarks/bench_conv.py", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_gpu_comparison_runs_its_code_path_as_a_dry_run_on_the_virtual_gpu():
    done = _bench("--device", "GPU", "--dry-run", "--models", "stack", "mlp", "cnn", "--rounds", "1",
                  "--batch", "4")
    assert done.returncode == 0, done.stderr
    assert "DRY RUN" in done.stdout and "target" not in done.stdout.replace("no target", "")
    for name in ("stack", "mlp", "cnn"):
        found = re.search(rf"{name}\s+ours / pytorch =\s+([\d.]+).*first loss ([\d.]+) vs ([\d.]+)",
                          done.stdout)
        assert found, done.stdout
        assert found.group(2) == found.group(3)


def test_a_gpu_comparison_without_a_cuda_gpu_is_refused_saying_what_it_needs():
    done = _bench("--device", "GPU", "--models", "mlp")
    assert done.returncode == 2
    assert "needs a CUDA GPU that both CuPy and PyTorch see" in done.stderr
    assert "--dry-run" in done.stderr
    done = _bench("--dry-run", "--models", "mlp")
    assert done.returncode == 2 and "--dry-run goes with --device GPU" in done.stderr


def test_the_gpu_target_is_judged_only_at_its_batch(monkeypatch, capsys):
    monkeypatch.syspath_prepend(os.path.join(REPO, "benchmarks"))
    import bench_conv
    monkeypatch.setattr(bench_conv, "_check_gpu", lambda torch, dry_run: None)
    monkeypatch.setattr(bench_conv, "compare", lambda torch, name, rounds, device, batch:
                        (1.2 if batch == 128 else 1.7, [1.2], {"ours": 2.3, "torch": 2.3}))
    bench_conv.main(["--device", "CPU", "--models", "resnet18"])      # the CPU target: 1.0
    bench_conv.main(["--device", "GPU", "--models", "resnet18", "--batch", "128"])
    bench_conv.main(["--device", "GPU", "--models", "resnet18"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("resnet18")]
    assert "target <= 1.0  MISS" in lines[0]
    assert "target <= 1.5  pass" in lines[1]
    assert "the target, <= 1.5, is for --batch 128" in lines[2] and "pass" not in lines[2]
