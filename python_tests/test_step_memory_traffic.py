"""The seed MLP step's memory traffic stays bounded (issue 29, "a thinner step").

Counted, not timed: page faults per step (a freed block handed back to the system comes back
as zeroed pages, one fault per 4 KiB) and the step's transient traced memory (the peak above
its start), so a regression to fresh pages or to extra copies fails whatever the load.
``benchmarks/bench_step_memory_traffic.py`` prints the same counters beside NumPy and PyTorch.
"""
import importlib.util
import os
import resource
import sys
import tracemalloc

import numpy as np
import pytest

from minitorch_dist.backend import allocator

from mpi_jobs import REPO


def _load(name):
    path = os.path.join(REPO, "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


traffic = _load("bench_step_memory_traffic")
# glibc tuned by ``import minitorch_dist`` (not overridden by the environment)
tuned = sys.platform.startswith("linux") and allocator.tune_malloc()
needs_tuned_malloc = pytest.mark.skipif(not tuned, reason="glibc's allocator is not tuned here "
                                        "(not glibc, or MALLOC_*/MINITORCH_DIST_SYSTEM_MALLOC set)")


def _faults_per_step(step, batches, steps=20):
    for i in range(5):
        step(*batches[i % len(batches)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(steps):
        step(*batches[i % len(batches)])
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


@needs_tuned_malloc
def test_the_seed_mlp_step_takes_no_fresh_pages():
    # measured: 0 per step; fresh pages for its 2.7 MB of arrays would be about 1000
    assert _faults_per_step(*traffic._setup("minitorch_dist")) <= 25


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's MALLOC_ variables")
def test_the_fault_counter_sees_fresh_pages_when_blocks_go_back_to_the_system():
    # the bound above can fail: with every block over 64 KiB a fresh mapping (glibc reads
    # MALLOC_MMAP_THRESHOLD_ at start, so a process of its own), it does
    row = traffic.run_child("minitorch_dist", steps=20, malloc="mmap64k")
    assert row["minor_faults"] >= 200, row


def test_the_seed_mlp_step_holds_little_beyond_its_gradients():
    # The step's gradients (one per parameter) are handed out, so they are its floor; with
    # the activations it peaks at 1.05x the parameter bytes (2753 KiB). The step written with
    # a fresh NumPy array for every result peaks at 1.8x, and copying every gradient once
    # more would reach 2x: both fail here.
    step, batches = traffic._setup("minitorch_dist")
    param_bytes = 4 * (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10)
    for i in range(3):
        step(*batches[i])
    peak = traffic.transient_peak(step, batches, steps=3)
    assert param_bytes <= peak <= 1.3 * param_bytes, (peak, param_bytes)
    assert not tracemalloc.is_tracing()


def test_the_fresh_array_numpy_step_computes_the_hand_written_step():
    # the benchmark's "numpy fresh" contender does the same arithmetic as "numpy by hand"
    bench = _load("bench_training_step")
    import minitorch_dist as ms
    ms.set_seed(0)
    net = bench.SeedMLP()
    by_hand = bench.NumpyMLP(net)
    fresh = bench.numpy_fresh_mlp_step(net)
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.normal(size=(bench.BATCH, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, bench.BATCH)
        assert by_hand.step(x, y) == fresh(x, y)
    for mine, theirs in zip(by_hand.W + by_hand.b, fresh.params):
        np.testing.assert_array_equal(mine, theirs)
    assert not np.array_equal(fresh.params[0], net.layer1.weight.asnumpy())    # it trained


def test_the_memory_traffic_benchmark_measures_one_contender():
    row = traffic.measure(*traffic._setup("numpy by hand"), steps=2, warmup=1, traced_steps=1)
    assert set(row) == {"minor_faults", "major_faults", "user_ms", "system_ms", "wall_ms",
                        "transient_kib"}
    assert row["wall_ms"] > 0 and row["transient_kib"] < 1024     # it reuses its buffers


def test_the_cache_simulation_reports_misses_per_step(monkeypatch):
    calls = []

    def fake_events(which, steps, tool_args):
        calls.append((which, tool_args))
        return {"Ir": 8_000_000 * steps, "D1mr": 3000 * steps, "D1mw": 1000 * steps,
                "DLmr": 300 * steps, "DLmw": 100 * steps, "I1mr": 50 * steps}

    monkeypatch.setattr(traffic, "_callgrind_events", fake_events)
    monkeypatch.setattr(traffic.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(traffic, "run_child", lambda which, steps, malloc: {
        "minor_faults": 0.0, "major_faults": 0.0, "user_ms": 1.0, "system_ms": 0.0,
        "wall_ms": 1.0, "transient_kib": 1.0})
    results = traffic.main(["--only", "numpy by hand", "--cache-sim", "--steps", "1"])
    assert [which for which, _ in calls] == ["minitorch_dist", "numpy by hand"]
    assert all(f"--LL={traffic.L2_BYTES},8,64" in args for _, args in calls)
    assert results["minitorch_dist"] == {"Ir_M": 8.0, "D1_misses_k": 4.0, "L2_misses_k": 0.4,
                                         "I1_misses_k": 0.05}
    assert results["numpy by hand"]["transient_kib"] == 1.0


def test_the_memory_traffic_benchmark_refuses_bad_arguments(monkeypatch):
    with pytest.raises(SystemExit):
        traffic.main(["--steps", "0"])
    monkeypatch.setattr(traffic.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="valgrind"):
        traffic.main(["--cache-sim"])
