"""Smoke test of ``benchmarks/bench_dist_opt.py --quick`` on real MPI ranks.

The script must exit 0 and print its summary ratios with numbers. The byte ratios come from
``DistOpt.comm_stats()`` and are exact functions of the model's shapes, so they are asserted
against their targets; the byte table has one row per option asked for, each consistent with
itself. The timing ratios are only checked to be finite positive numbers that repeat the
detailed sections' figures (timings on a shared 2-core machine are too noisy for a test).
"""
import math
import os
import re
import sys

import pytest

from mpi_jobs import REPO, needs_mpi, run_process

SCRIPT = os.path.join(REPO, "benchmarks", "bench_dist_opt.py")
N_PARAMS = 431080                        # SINGA's MNIST CNN
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


WIRE_ROWS = ("fp32", "fp16", "sparseTopK spars=0.01", "sparseThreshold spars=",
             "partialUpdate", "partialUpdate buffSize=512KiB")
# section 1: "  <option>  <bytes per step>  <bytes / fp32>  what is sent"
WIRE_ROW = re.compile(r"^  (\S.*?) +([0-9][0-9,]*) +([0-9]+\.[0-9]{4})  (?:allreduce|allgatherv)",
                      re.MULTILINE)


def _ratio(output, label):
    match = re.search(re.escape(label) + r"\s*=\s*" + NUMBER, output)
    assert match, f"no line {label!r} in:\n{output}"
    return float(match.group(1))


def _all(pattern, output):
    return [float(value) for value in re.findall(pattern, output, re.MULTILINE)]


@pytest.mark.mpi
@pytest.mark.slow
@needs_mpi
def test_quick_benchmark_runs_and_reports_the_ratios():
    done, _ = run_process([sys.executable, SCRIPT, "--quick", "--compare-shared"])
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

    # the byte table: the options asked for, in order, each ratio its bytes over fp32's
    rows = WIRE_ROW.findall(output)
    assert len(rows) == len(WIRE_ROWS), rows
    fp32_bytes = float(rows[0][1].replace(",", ""))
    assert fp32_bytes == 4 * N_PARAMS
    for (label, sent, ratio), expected in zip(rows, WIRE_ROWS):
        assert label.startswith(expected), (label, expected)
        assert float(ratio) == pytest.approx(float(sent.replace(",", "")) / fp32_bytes, abs=6e-5)
    table = {label: float(ratio) for label, _, ratio in rows}
    assert table["fp16"] == _ratio(output, "bytes fp16 / fp32")
    assert table["sparseTopK spars=0.01"] == topk

    # timings: finite, positive, and the summary repeats the sections' figures
    timings = {label: _ratio(output, label) for label in (
        "time DistOpt fp32 comm / raw Allreduce", "samples/s 2 ranks / 1 rank",
        "samples/s 2 ranks / 1 rank, interleaved in one job", "2 ranks / 1 rank by CPU time")}
    for label, value in timings.items():
        assert math.isfinite(value) and value > 0, (label, value)
    exchange = re.search(r"^  DistOpt exchange, grads in bucket +" + NUMBER + r" ms +x" + NUMBER,
                         output, re.MULTILINE)
    raw = re.search(r"^  raw MPI Allreduce +" + NUMBER + r" ms +x1\.00 of raw", output,
                    re.MULTILINE)
    assert exchange and raw, output
    assert timings["time DistOpt fp32 comm / raw Allreduce"] == float(exchange.group(2))
    assert float(exchange.group(2)) == pytest.approx(
        float(exchange.group(1)) / float(raw.group(1)), abs=0.006)
    medians = _all(r"^  median ratio 2 ranks / 1 rank: " + NUMBER + "$", output)
    through_mpi = re.search(r"through MPI's Allreduce instead: 2 ranks / 1 rank " + NUMBER
                            + ", / ceiling " + NUMBER, output)
    assert through_mpi, output
    assert medians == [timings["samples/s 2 ranks / 1 rank"],
                       timings["samples/s 2 ranks / 1 rank, interleaved in one job"],
                       float(through_mpi.group(1))], medians
    assert _all(r"per block\): " + NUMBER + "$", output) == [
        timings["2 ranks / 1 rank by CPU time"]]
    assert re.search(r"interleaved in one job = \S+ +\(target >= 1\.9\) +(PASS|MISS)", output)
    # the ceiling, per repeat: the summary repeats the section's median, and with
    # --compare-shared the 2-rank job through MPI's Allreduce is reported beside
    ceiling = _ratio(output, "per repeat, median")
    assert _all(r"^  median 2 ranks / ceiling: " + NUMBER + "$", output) == [
        ceiling, float(through_mpi.group(2))]
    assert re.search(r"per repeat, median = \S+ +\(target >= 0\.97\) +(PASS|MISS)", output)
    # the ceiling inside one job: each repeat's ratio is its 2-rank over its ceiling
    # samples/s within the quartiles it prints, and the summary repeats the median
    in_job = _ratio(output, "the ceiling in alternating blocks of one job, median")
    repeats = re.findall(r"^  repeat \d+: 2 ranks +" + NUMBER + " +ceiling +" + NUMBER
                         + r" \(each rank alone: ([0-9, ]+)\) +2 ranks / ceiling " + NUMBER
                         + r" \[" + NUMBER + ", " + NUMBER + r"\] over \d+ pairs of blocks; "
                         r"waiting bound " + NUMBER, output, re.MULTILINE)
    assert len(repeats) == 1, output
    for two, ceiling_s, alone, ratio, low, high, bound in repeats:
        assert 0 < float(low) <= float(ratio) <= float(high), repeats
        assert 0 < float(bound) <= 1, repeats     # a mean over a max
        assert len(alone.split(",")) == 2
    assert _all(r"^  median 2 ranks / ceiling, in one job: " + NUMBER + "$", output) == [in_job]
    assert re.search(r"one job, median = \S+ +\(target >= 0\.97\) +(PASS|MISS)", output)
    # the in-job comparison of the two reduction paths, and the shared one really taken
    ab = _ratio(output, "bucket through shared memory / through MPI, in one job")
    assert math.isfinite(ab) and ab > 0
    assert int(re.search(r"\((\d+) shared reductions\)", output).group(1)) > 0


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
