"""Smoke test of ``benchmarks/bench_wide_deep.py --quick`` (Wide&Deep host-device against one
device against all on the CPU).

The script must exit 0 and print the three samples/s ratios, each a positive median inside its
[min, max]. What does not depend on speed is asserted exactly: the three configurations
compute the same losses from the same start (the benchmark checks this itself, and stops when
they differ, which is tested too), host-device moves exactly the bytes its formula predicts
(looked-up rows and their gradients, the device parameters for the host optimizers, the
ids) while the other two move none, the virtual GPU is named in the output with what it
means for the ratios, and so is the allocator setting the process ran under. The timing
ratios are only checked to be sane numbers: a quick run on a shared 2-core machine is too
noisy for more.
"""
import importlib.util
import json
import os
import re
import sys

import pytest

from mpi_jobs import REPO, run_process

SCRIPT = os.path.join(REPO, "benchmarks", "bench_wide_deep.py")
NUMBER = r"([0-9]+\.[0-9]+)"
RATIOS = ("samples/s host-device / one device", "samples/s host-device / all CPU",
          "samples/s one device / all CPU")
FIGURES = ("host_device_over_device", "host_device_over_cpu", "device_over_cpu")  # in the JSON


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_wide_deep", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _spread(output, label):
    match = re.search(re.escape(label) + r" = " + NUMBER + r"\s+\[" + NUMBER + ", " + NUMBER
                      + r"\]", output)
    assert match, f"no line {label!r} in:\n{output}"
    return tuple(float(g) for g in match.groups())


def test_quick_benchmark_prints_sane_ratios_and_equal_work(tmp_path):
    out_json = tmp_path / "figures.json"
    done, _ = run_process([sys.executable, SCRIPT, "--quick", "--json", str(out_json)],
                          timeout=120, env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    printed = {}
    for label in RATIOS:
        median, low, high = printed[label] = _spread(output, label)
        assert 0 < low <= median <= high, (label, median, low, high)
        assert 0.05 < median < 20, (label, median)     # the same step, run three ways
    assert "virtual GPU" in output and "memcpy" in output, output
    assert "What these ratios show" in output and "8.6x" in output, output
    assert "allocator: MALLOC_MMAP_THRESHOLD_=" in output, output    # the launcher's setting

    figures = json.loads(out_json.read_text())
    assert figures["virtual_gpu"] is True
    (size,) = figures["sizes"]
    losses = size["losses"]
    assert set(losses) == {"host_device", "device", "cpu"}
    first = losses["host_device"][0]
    assert 0.3 < first < 1.5                            # a fresh logistic loss, not 0 or nan
    for name in ("device", "cpu"):
        assert losses[name][0] == pytest.approx(first, rel=1e-6), losses
        assert losses[name] == pytest.approx(losses["host_device"], rel=1e-5), losses
    moved, predicted = size["bytes_per_step"], size["predicted_host_device_bytes"]
    assert moved["host_device"]["host_to_device"] == predicted["host_to_device"]
    assert moved["host_device"]["device_to_host"] == predicted["device_to_host"]
    batch, emb_dim = size["size"]["batch"], size["size"]["emb_dim"]
    assert predicted["rows"] == batch * 39 * (1 + emb_dim) * 4
    assert predicted["device_params"] > 0
    for name in ("device", "cpu"):
        assert moved[name] == {"host_to_device": 0, "device_to_host": 0}, moved
    assert set(size["ratios"]) == set(FIGURES)
    for label, name in zip(RATIOS, FIGURES):          # the printed spreads are the report's
        ratio = size["ratios"][name]
        assert 0 < ratio["min"] <= ratio["median"] <= ratio["max"], (name, ratio)
        assert printed[label] == pytest.approx(
            (ratio["median"], ratio["min"], ratio["max"]), abs=0.006), (label, ratio)


def test_system_malloc_restarts_without_the_launchers_allocator_setting(tmp_path):
    """The test environment has the launcher's MALLOC variables; --system-malloc must run
    the benchmark without them (glibc reads them only when a process starts)."""
    out_json = tmp_path / "figures.json"
    done, _ = run_process([sys.executable, SCRIPT, "--quick", "--repeats", "1", "--system-malloc",
                           "--json", str(out_json)], timeout=120,
                          env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "allocator: glibc defaults" in done.stdout
    assert json.loads(out_json.read_text())["allocator"] == ""


def test_different_losses_stop_the_benchmark():
    bench = _load_bench()
    same = {"host_device": [0.69, 0.6], "device": [0.69, 0.6], "cpu": [0.69, 0.6 * (1 + 1e-7)]}
    assert bench.check_same_losses(same) == pytest.approx(1e-7, rel=1e-3)
    with pytest.raises(SystemExit, match="do not compute the same step: loss of step 1"):
        bench.check_same_losses({"host_device": [0.69], "device": [0.69], "cpu": [0.70]})
    with pytest.raises(SystemExit, match="loss of step 2"):
        bench.check_same_losses({"host_device": [0.69, 0.6], "device": [0.69, 0.61],
                                 "cpu": [0.69, 0.6]})


def test_the_configurations_are_the_examples_flags():
    bench = _load_bench()
    size = bench.SIZES["quick"]
    hd, dev, cpu = (bench.config_argv(name, size) for name in bench.CONFIGS)
    assert hd[:4] == ["--device_target", "GPU", "--host_device_mix", "1"]
    assert dev[:4] == ["--device_target", "GPU", "--host_device_mix", "0"]
    assert cpu[:4] == ["--device_target", "CPU", "--host_device_mix", "0"]
    for argv in (hd, dev, cpu):
        assert argv[argv.index("--sparse") + 1] == "1", argv
    rows, ids = 10 * 39 * 9 * 4, 10 * 39 * 4
    assert bench.predicted_bytes({"batch": 10}, 8, 100) == {
        "host_to_device": rows + 100, "device_to_host": rows + ids + 200,
        "rows": rows, "ids": ids, "device_params": 100}
