"""Smoke test of ``benchmarks/bench_memory_comm.py --quick``: it exits 0 and prints its ratios;
the byte and call ratios are exact functions of the shapes, so they are asserted."""
import os
import re
import sys

from mpi_jobs import REPO, run_process

SCRIPT = os.path.join(REPO, "benchmarks", "bench_memory_comm.py")


def test_bench_memory_comm_prints_the_savings():
    done, _ = run_process([sys.executable, SCRIPT, "--quick"], timeout=240)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    state = float(re.search(r"optimizer state bytes per rank: .* = ([0-9.]+)", out).group(1))
    assert 0.125 <= state < 0.14          # 1/8, plus the small parameters kept whole
    both = float(re.search(r"parameters \+ state per rank: .* = ([0-9.]+)", out).group(1))
    assert both < 0.43
    # level3 slices the weights too: 1/8 plus the parameters under the 64 KB threshold
    level3 = float(re.search(r"level3 parameters \+ state: .* = ([0-9.]+)", out).group(1))
    assert 0.125 <= level3 < 0.14
    # level3 during a step: the slices plus one gathered weight (784 x 512 of 2.68 MB)
    gathered = float(re.search(r"level3 peak parameter bytes in a step: .* = ([0-9.]+)",
                               out).group(1))
    assert gathered < 0.75
    mlp, resnet = [float(v) for v in re.findall(r"peak traced memory of a step: .* = ([0-9.]+)",
                                                 out)]
    assert mlp < 0.9 and resnet < 0.8
    rss = [float(v) for v in re.findall(r"peak RSS growth of a step: .* = ([0-9.]+)", out)]
    assert len(rss) == 2 and rss[1] < 0.9       # ResNet stages, separate processes
    assert re.search(r"step time: .* = [0-9.]+", out)
    assert "GradAccumulation(k=4) 1 call(s) / 4 separate steps 4 = 0.250" in out
    assert "default buckets 1, set_comm_fusion ids (0, 1, 2) 3, comm_fusion openstate=False 6" \
        in out
    assert "accumulated gradient bytes per rank: 6,532 / 26,128 = 0.250   (reduce-scatters " \
        "per step: 4 / 1)" in out
