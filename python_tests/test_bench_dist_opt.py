"""Smoke test of ``benchmarks/bench_dist_opt.py --quick`` on real MPI ranks.

The script must exit 0 and print its summary ratios with numbers. The byte ratios come from
``DistOpt.comm_stats()`` and are exact functions of the model's shapes, so they are asserted
against their targets; the timing ratios are only checked to be positive numbers (timings on
a shared 2-core machine are too noisy for a test).
"""
import os
import re
import sys

import pytest

from mpi_jobs import REPO, needs_mpi, run_process

SCRIPT = os.path.join(REPO, "benchmarks", "bench_dist_opt.py")
N_PARAMS = 431080                        # SINGA's MNIST CNN
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def _ratio(output, label):
    match = re.search(re.escape(label) + r"\s*=\s*" + NUMBER, output)
    assert match, f"no line {label!r} in:\n{output}"
    return float(match.group(1))


@pytest.mark.mpi
@pytest.mark.slow
@needs_mpi
def test_quick_benchmark_runs_and_reports_the_ratios():
    done, _ = run_process([sys.executable, SCRIPT, "--quick"])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output

    # fp16 halves every byte of the fp32 allreduce: exactly 0.5
    assert _ratio(output, "bytes fp16 / fp32") == pytest.approx(0.5, abs=1e-4)
    # top-K at 1% sends k = round(0.01 * n) int32 indices + k float32 values: 2k/n of fp32,
    # under the 0.025 target
    topk = _ratio(output, "bytes sparseTopK(0.01) / fp32")
    assert topk == pytest.approx(2 * round(0.01 * N_PARAMS) / N_PARAMS, abs=1e-4)
    assert topk <= 0.025
    assert re.search(r"bytes sparseTopK\(0\.01\) / fp32 = \S+ +\(target <= 0\.025\) +PASS",
                     output), output

    assert _ratio(output, "time DistOpt fp32 comm / raw Allreduce") > 0
    assert _ratio(output, "samples/s 2 ranks / 1 rank") > 0
    assert _ratio(output, "samples/s 2 ranks / 1 rank, interleaved in one job") > 0
    assert re.search(r"interleaved in one job = \S+ +\(target >= 1\.9\) +(PASS|MISS)", output)
    assert _ratio(output, "2 ranks / 1 rank by CPU time") > 0
    assert re.search(r"ceiling for any 2-rank job, two 1-rank jobs at once: \d+\.\d+", output)
    for row in ("fp32", "fp16", "sparseTopK spars=0.01", "sparseThreshold", "partialUpdate"):
        assert re.search(rf"^  {re.escape(row)}", output, re.MULTILINE), output


@pytest.mark.mpi
@pytest.mark.slow
@needs_mpi
def test_bucket_launch_benchmark_runs_and_compares_three_ways():
    script = os.path.join(REPO, "benchmarks", "bench_data_parallel.py")
    done, _ = run_process([sys.executable, script, "--blocks", "1"])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    for mode, buckets in (("one bucket", 1), ("two, blocking", 2), ("two, Iallreduce", 2)):
        assert re.search(rf"^  {re.escape(mode)} +{buckets} bucket\(s\) +{NUMBER} ms +x{NUMBER}",
                         output, re.MULTILINE), output
    assert "x1.000 of one bucket" in output


def test_bucket_launch_benchmark_refuses_zero_blocks():
    script = os.path.join(REPO, "benchmarks", "bench_data_parallel.py")
    done, _ = run_process([sys.executable, script, "--blocks", "0"])
    assert done.returncode == 2 and "--blocks must be at least 1" in done.stderr
