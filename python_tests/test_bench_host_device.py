"""``benchmarks/bench_host_device.py``: both contenders compute the same sparse step (else the
speed-up compares different work), the agreement check can fail, the step the benchmark times
never allocates anything the size of the table, the largest-table arithmetic, and tiny runs of
both modes print sane figures. Timing ratios are only checked to be finite positive numbers,
the ones the figures hold: a tiny run on a shared 2-core machine is too noisy for more."""
import importlib.util
import math
import os
import re
import tracemalloc

import numpy as np
import pytest

from minitorch_dist import kernels

from mpi_jobs import REPO

torch = pytest.importorskip("torch")

spec = importlib.util.spec_from_file_location(
    "bench_host_device", os.path.join(REPO, "benchmarks", "bench_host_device.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
TINY = ["--rows", "3000", "--dim", "8", "--batch", "32", "--fields", "5", "--batches", "4",
        "--repeats", "2", "--steps", "2", "--warmup", "1", "--threads", "2"]


def _ratio(output, label):
    match = re.search(re.escape(label) + r"\s*=\s*" + NUMBER, output)
    assert match, f"no line {label!r} in:\n{output}"
    return float(match.group(1))


def _pair(rows=3000, dim=8, batch=32, fields=5):
    args = bench.parse_args(["--rows", str(rows), "--dim", str(dim), "--batch", str(batch),
                             "--fields", str(fields), "--batches", "4"])
    batches, weights = bench.make_inputs(args)
    ours = bench.Ours(rows, dim, 0, weights)
    return ours, bench.Torch(ours.emb.embedding_table.data, weights), batches


def test_zipf_ids_lie_in_the_table_are_skewed_and_scattered():
    ids = bench.zipf_ids(np.random.default_rng(0), 1000, (4096, 26), 1.1)
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 1000
    values, counts = np.unique(ids, return_counts=True)
    assert counts.max() > 0.05 * ids.size          # rank 1 alone: about 1/zeta(1.1) of them
    top = values[np.argsort(counts)[-10:]]
    assert top.max() > 100                          # the popular ids are not the first rows
    # the folding is a bijection of the vocabulary: ranks 1..rows give every id once
    ranks = np.arange(1000, dtype=np.uint64)
    assert np.unique(ranks * np.uint64(bench.HASH_MULTIPLIER) % np.uint64(1000)).size == 1000
    with pytest.raises(ValueError, match="rows must lie in"):
        bench.zipf_ids(np.random.default_rng(0), 0, 3, 1.1)


def test_both_contenders_compute_the_same_step():
    ours, theirs, batches = _pair()
    before = ours.emb.embedding_table.data.copy()
    result = bench.check_agreement(ours, theirs, batches, steps=3)
    assert result["agree"], result
    assert result["untouched_rows_unchanged"]
    assert result["largest_change"] > 0
    assert max(result["max_rel_diff"].values()) < 1e-5
    # the touched rows really are the batches' ids: everything else kept its bits
    touched = np.unique(np.concatenate([b.reshape(-1) for b in batches[:3]]))
    other = np.setdiff1d(np.arange(before.shape[0]), touched)
    np.testing.assert_array_equal(ours.emb.embedding_table.data[other], before[other])
    assert not (ours.emb.embedding_table.data[touched] == before[touched]).all(axis=1).any()


def test_agreement_check_fails_on_a_different_update():
    ours, theirs, batches = _pair()
    theirs.opt.param_groups[0]["lr"] *= 1.01       # 1% off: far above the float32 noise
    result = bench.check_agreement(ours, theirs, batches, steps=2)
    assert not result["agree"]
    assert result["max_rel_diff"]["table"] > 10 * bench.AGREE_RTOL


def test_the_timed_step_allocates_nothing_table_sized():
    """A dense gradient, a copy of the table or a fresh moment per step would each allocate
    the table's 12.8 MB; the RowTensor path allocates a few copies of the looked-up rows."""
    rows, dim = 200_000, 16
    ours, _, batches = _pair(rows=rows, dim=dim, batch=64, fields=26)
    tensors = [ours.batch(b) for b in batches]
    for t in tensors:                                # warm-up: lazily made state, caches
        ours.step(t)
    tracemalloc.start()
    try:
        for t in tensors:
            ours.step(t)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    table_bytes = rows * dim * 4
    assert peak < table_bytes / 8, f"a step allocated {peak:,} bytes at its peak"


def test_largest_rows_arithmetic(tmp_path):
    gib = 2 ** 30
    assert bench.largest_rows(10 * gib, 0.6, 16, 0) == int(10 * gib * 0.6) // (12 * 16)
    assert bench.largest_rows(10 * gib, 0.6, 16, 2 * gib) == (6 * gib - 2 * gib) // (12 * 16)
    assert bench.largest_rows(gib, 0.5, 16, gib) == 0
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   1234 kB\n")
    assert bench.mem_available(str(meminfo)) == 1234 * 1024
    meminfo.write_text("MemTotal:       24000000 kB\n")
    with pytest.raises(RuntimeError, match="no MemAvailable"):
        bench.mem_available(str(meminfo))
    working = bench.step_working_bytes(4096, 26, 16)
    assert 4096 * 26 * 16 * 4 * 3 < working < 64 * 2 ** 20     # a few row copies, not more


def test_tiny_comparison_prints_its_figures(capsys, tmp_path):
    threads = torch.get_num_threads()
    out_json = tmp_path / "figures.json"
    figures = bench.main(TINY + ["--phases", "--json", str(out_json)])
    output = capsys.readouterr().out
    assert torch.get_num_threads() == threads          # the process is left as it was
    speedup = _ratio(output, "step time PyTorch / ours")
    assert math.isfinite(speedup) and speedup > 0
    assert speedup == pytest.approx(figures["speedup"]["median"], abs=0.006)
    assert re.search(r"\(target >= 2\)\s+(PASS|MISS)", output), output
    assert "AGREE" in output and figures["agreement"]["agree"]
    for phase in ("forward", "backward", "update", "rows alone"):
        assert figures["phases_ms"]["ours"][phase] > 0
    spread = figures["speedup"]
    assert 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert out_json.exists()


def test_tiny_largest_mode_trains_the_table_it_sized(capsys):
    args = bench.parse_args(TINY + ["--largest"])
    reserved = 12 * args.rows * args.dim + 2 * bench.step_working_bytes(32, 5, 8)
    fraction = (reserved + 4 * 2 ** 20) / bench.mem_available()    # about 4 MiB of table
    figures = bench.main(TINY + ["--largest", "--fraction", f"{fraction:.10f}"])
    output = capsys.readouterr().out
    assert figures["trained"], output
    assert figures["rows"] > args.rows
    assert figures["with_moments_bytes"] == 12 * figures["rows"] * 8
    assert figures["with_moments_bytes"] < 6 * 2 ** 20
    ratio = _ratio(output, "step time largest / 3,000-row table")
    assert math.isfinite(ratio) and ratio > 0
    assert ratio == pytest.approx(figures["time_ratio"]["median"], abs=0.006)
    assert "rows finite and moved: True" in output


def test_thread_count_matches_what_the_kernels_pick():
    assert bench.default_threads() == min(16, os.cpu_count() or 1)
    if kernels.HAVE_CPP:
        assert kernels.native.set_sparse_threads(0) == 0      # automatic unless a run set it
