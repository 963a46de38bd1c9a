"""``benchmarks/bench_conv.py`` runs: its seed-004 twin imported a helper that had moved
(``ops.conv._same_pads``, now ``ops.conv_geometry.same_pads``), so the benchmark stopped
with an ImportError and nothing noticed. One round of the seed-004 model, both frameworks,
the same first loss."""
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
