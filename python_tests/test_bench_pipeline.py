"""Smoke test of ``benchmarks/bench_pipeline.py --quick`` on real MPI ranks.

The script must exit 0 and print every ratio with a number, the number its JSON report
holds. What does not depend on speed is asserted: the schedules compute the same losses,
stage 0 holds fewer live micro-batches under 1F1B than under GPipe (2 against 8 with 2
stages and 8 micro-batches, as the schedule simulator predicts) and fewer activation bytes,
and each rank holds half of the model's parameter bytes. The timing ratios are only checked
to be finite positive numbers: a quick run on a shared 2-core machine is too noisy for more.
Every job runs under the launcher's allocator setting (``MALLOC_VARIABLES``), and
``--system-malloc`` takes it away from every job, the pipeline ranks included.
"""
import importlib.util
import json
import math
import os
import re
import sys

import pytest

from minitorch_dist.run import MALLOC_VARIABLES, rank_environment
from mpi_jobs import REPO, needs_mpi, run_process

SCRIPT = os.path.join(REPO, "benchmarks", "bench_pipeline.py")
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
RATIOS = ("samples/s 2 pipeline ranks 1F1B / 1 process accumulating",
          "samples/s 2 pipeline ranks 1F1B / 1 process plain step",
          "samples/s 2 pipeline ranks GPipe / 1 process accumulating",
          "samples/s 2 pipeline ranks GPipe / 1 process plain step",
          "samples/s 2 pipeline ranks interleaved 1F1B (2 chunks each) / 1 process accumulating",
          "samples/s 2 pipeline ranks interleaved 1F1B (2 chunks each) / 1 process plain step",
          "step time 1 process accumulating / plain step",
          "samples/s 2 pipeline ranks 1F1B / (2 x 1 process accumulating)",
          "step time 1F1B / GPipe",
          "1F1B step measured / simulated from its own F and B times",
          "1F1B stage 0 time blocked on messages / step",
          "1F1B stage 1 time blocked on messages / step",
          "stage 0 peak activation bytes 1F1B / GPipe",
          "stage 0 peak live micro-batches 1F1B / GPipe = 2/8",
          "stage 0 parameter bytes held / model",
          "stage 1 parameter bytes held / model")
# where the JSON report keeps each printed figure (a spread's median, or the figure itself),
# and the digits it is printed with
FIGURES = (("throughput_1f1b", 2), ("plain_1f1b", 2), ("throughput_gpipe", 2),
           ("plain_gpipe", 2), ("throughput_interleaved", 2), ("plain_interleaved", 2),
           ("microbatching_cost", 2), ("pipeline_efficiency", 2), ("time_1f1b_over_gpipe", 3),
           ("measured_over_schedule", 3), (("waited_fraction", "0"), 3),
           (("waited_fraction", "1"), 3), ("stage0_bytes_1f1b_over_gpipe", 3), (None, 3),
           (("parameter_fraction", "0"), 3), (("parameter_fraction", "1"), 3))


def _ratio(output, label):
    match = re.search(re.escape(label) + r"\s*=\s*" + NUMBER, output)
    assert match, f"no line {label!r} in:\n{output}"
    return float(match.group(1))


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bound_and_predictions_come_from_the_simulator():
    predicted = _load_bench().predictions(8)
    assert predicted["1f1b"]["bubble"] == pytest.approx(1 / 9)
    assert 2 * (1 - predicted["1f1b"]["bubble"]) == pytest.approx(16 / 9)
    assert predicted["1f1b"]["peak_activations"] == {0: 2, 1: 1}
    assert predicted["gpipe"]["peak_activations"] == {0: 8, 1: 8}
    assert predicted["interleaved"]["bubble"] == pytest.approx(1 / 17)


def test_every_job_gets_the_launchers_allocator_setting_unless_system_malloc():
    bench = _load_bench()
    assert set(MALLOC_VARIABLES) <= set(bench.child_env(system_malloc=False))
    assert not set(MALLOC_VARIABLES) & set(bench.child_env(system_malloc=True))
    assert bench.child_env(False, mpi_yield=True)[bench.YIELD_VARIABLE] == "1"


@pytest.mark.mpi
@pytest.mark.slow
@needs_mpi
def test_system_malloc_reaches_every_process():
    """The launcher adds its MALLOC variables to an environment without them: the pipeline
    ranks must still run without them."""
    bench = _load_bench()
    args = bench.parse_args(["--quick", "--system-malloc"])
    for job in ("baseline", "1f1b"):
        assert bench.run_job(job, args, timeout=60)["malloc"] == "", job


@pytest.mark.mpi
@pytest.mark.slow
@needs_mpi
def test_quick_benchmark_runs_and_reports_the_ratios(tmp_path):
    out_json = tmp_path / "figures.json"
    done, seconds = run_process([sys.executable, SCRIPT, "--quick", "--json", str(out_json)],
                                timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    printed = {label: _ratio(output, label) for label in RATIOS}
    for label in RATIOS[:10]:          # timings: finite and positive, nothing more in a quick run
        assert math.isfinite(printed[label]) and printed[label] > 0, (label, printed[label])
    for label in RATIOS[10:12]:        # a fraction of the step
        assert 0 <= printed[label] < 1, (label, printed[label])
    assert printed[RATIOS[13]] == pytest.approx(2 / 8, abs=5e-4)
    assert re.search(r"target >= 1\.6, bound 1\.78\)\s+(PASS|MISS)", output), output
    assert re.search(r"\(\d+ s in all\)", output), output
    assert re.search(r"machine load \(1-minute average before each job, the benchmark's own "
                     r"processes included\): median \d", output)
    setting = _load_bench().malloc_setting(rank_environment())
    assert f"allocator in every job: {setting} (" in output, output

    report = json.loads(out_json.read_text())
    figures = report["figures"]
    for label, (key, digits) in zip(RATIOS, FIGURES):   # the printed figures are the report's
        if key is None:
            continue
        value = figures[key[0]][key[1]] if isinstance(key, tuple) else figures[key]
        value = value["median"] if isinstance(value, dict) else value
        assert printed[label] == pytest.approx(value, abs=0.6 * 10 ** -digits), (label, value)
    # accum does the pipeline's work in one process: the same summed loss after the same
    # steps (the plain step differs: it reports the mean over the whole batch)
    losses = report["last_loss"]
    assert losses["accum"] == pytest.approx(losses["1f1b"], rel=1e-4), losses
    assert losses["gpipe"] == pytest.approx(losses["1f1b"], rel=1e-4), losses
    assert losses["interleaved"] == pytest.approx(losses["1f1b"], rel=1e-4), losses
    assert figures["bound_interleaved"] == pytest.approx(2 * (1 - 1 / 17))
    live = figures["stage0_peak_live_microbatches"]
    assert (live["1f1b"], live["gpipe"]) == (2, 8)
    predicted = figures["predicted_peak_microbatches"]
    assert (predicted["1f1b"]["0"], predicted["gpipe"]["0"]) == (2, 8)
    assert figures["stage1_peak_live_microbatches"] == {"1f1b": 1, "gpipe": 8}
    peak = figures["stage0_peak_bytes"]
    assert 0 < peak["1f1b"] < peak["gpipe"]
    assert figures["stage0_bytes_1f1b_over_gpipe"] == pytest.approx(2 / 8, rel=0.01)
    for stage in ("0", "1"):
        assert figures["parameter_fraction"][stage] == pytest.approx(0.5, abs=0.01)
    for key in ("1f1b stage 0", "1f1b stage 1"):      # the runtime's own timings
        stats = report["stats"][key]
        spent, waited = stats["action_seconds"], stats["waited_seconds"]
        assert {"F", "B", "end"} <= set(spent), spent
        for kind, seconds in waited.items():            # blocked time is part of its action's
            assert 0 <= seconds <= spent[kind] + 1e-9, (key, kind, waited, spent)
    for stage in ("0", "1"):
        blocked = figures["waited_fraction"][stage]
        assert 0 <= blocked["min"] <= blocked["max"] < 1, blocked
    assert re.search(r"rank 0 \(stage 0\): step [0-9.]+ = computing F [0-9.]+ \+ B [0-9.]+, "
                     r"blocked on messages", output), output
    for name in ("throughput_1f1b", "plain_1f1b", "time_1f1b_over_gpipe", "pipeline_efficiency",
                 "measured_over_schedule"):
        spread = figures[name]
        assert 0 < spread["min"] <= spread["median"] <= spread["max"], (name, spread)
