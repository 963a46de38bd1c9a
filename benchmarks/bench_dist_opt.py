"""DistOpt speed and cost on real MPI ranks: bytes on the wire, communication time, scaling.

All three use SINGA's MNIST CNN (examples/mnist_cnn.py: 431,080 float32 parameters):

1. **wire**: the bytes a rank sends per step, from ``DistOpt.comm_stats()`` on 2 ranks, for
   every dist option, relative to fp32 (targets: fp16 <= 0.5, sparseTopK at 1% <= 0.025);
2. **comm**: DistOpt's fp32 exchange with an optimizer that changes nothing, against one raw
   mpi4py ``Allreduce`` of as many float32s as the model has (target <= 1.1x). The exchange
   is what ``backward_and_update`` does after backward: backward has already written the
   gradients into the fused bucket (``BucketFill``), so what is left is the allreduce of the
   bucket, in place, and the per-parameter views. The copy into the bucket, now part of
   backward, and the older path (``step(grads)``, which packs after backward) are shown too;
3. **scaling**: samples/s of DistOpt fp32 (``backward_and_update``, SINGA's ``opt(loss)``) +
   momentum SGD training at batch 32 per rank with one BLAS thread per rank, 2 ranks vs 1
   (target >= 1.9x): separate 1-rank and 2-rank jobs, and 1 and 2 ranks in alternating
   blocks of one job (``interleaved_job``: robust to load that drifts between jobs). Each
   repeat also runs the machine's ceiling, two 1-rank jobs at once, and the figure "2 ranks
   / ceiling" (target >= 0.97) is the 2-rank job's samples/s over theirs, per repeat.
   One more job alternates blocks with the weight gradients computed in their bucket slots
   and copied into them (``slots_ab``): step time, and bytes copied per step.
   ``--compare-shared`` adds, to each repeat, the 2-rank job with its bucket reduced by MPI's
   Allreduce instead of through memory the ranks share (``communication/node_shared.py``).

The driver re-launches this file under ``python -m minitorch_dist.run`` (``--worker``), each
job with a timeout, and prints what the ranks report. Timings are interleaved and medians, so
machine noise hits all sides alike: read the ratios, not the absolute times.

    python benchmarks/bench_dist_opt.py [--quick] [--repeats 7] [--steps 80] [--rounds 400]
    python benchmarks/bench_dist_opt.py --compare-shared
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: it sets the BLAS thread variables before NumPy is imported
from dist_opt_jobs import BATCH, MARK, REPO, THREAD_VARIABLES, worker  # noqa: E402

import numpy as np  # noqa: E402

SCRIPT = os.path.abspath(__file__)
TARGETS = {"fp16": 0.5, "topk": 0.025, "comm": 1.1, "scaling": 1.9, "ceiling": 0.97}


# ============================================================================ driver
def launch(n, workers, args, timeout, env_extra=None):
    """Run ``--worker workers`` on n ranks through the launcher; rank 0's result dicts."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    for name in THREAD_VARIABLES:
        env[name] = "1"
    command = [sys.executable, "-m", "minitorch_dist.run", "-n", str(n), "--timeout",
               str(timeout), SCRIPT, "--worker", workers, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--rounds", str(args.rounds),
               "--blocks", str(args.blocks)]
    # the launcher kills its job at `timeout` (exit 124); this one is the backstop
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout + 30)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench_dist_opt: {n}-rank job {workers!r} failed with exit code "
                         f"{done.returncode}")
    results = {r["job"]: r for r in (json.loads(line[len(MARK):])
                                     for line in done.stdout.splitlines() if line.startswith(MARK))}
    missing = set(workers.split(",")) - set(results)
    if missing:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench_dist_opt: {n}-rank job printed no result for {sorted(missing)}")
    return results


def verdict(value, target, lower_is_better=True):
    ok = value <= target if lower_is_better else value >= target
    return "PASS" if ok else "MISS"


def report_wire(wire):
    rows, base = wire["rows"], wire["rows"][0]["bytes"]
    print(f"\n1. bytes on the wire per step and rank (DistOpt.comm_stats, mean of "
          f"{wire['steps']} steps); model {wire['n_params']:,} params = "
          f"{4 * wire['n_params']:,} B in fp32")
    print(f"  {'option':<34}{'B/step':>11}{'/ fp32':>9}  what is sent (per step)")
    for row in rows:
        sent = ", ".join(f"{op} {v['calls']:g} call(s) {v['bytes']:,.0f} B"
                         for op, v in row["by_op"].items())
        extra = f"; period {row['period']}" if row["period"] else ""
        extra += f"; +{row['hidden']:.0f} B of counts not in comm_stats" if row["hidden"] else ""
        print(f"  {row['label']:<34}{row['bytes']:>11,.0f}{row['bytes'] / base:>9.4f}  "
              f"{sent}{extra}")
    fp16 = next(r for r in rows if r["option"] == "fp16")
    topk = next(r for r in rows if r["option"] == "sparseTopK")
    k, buckets = topk["by_op"]["allgatherv"]["bytes"] / 8, topk["by_op"]["allgatherv"]["calls"] / 2
    print(f"  top-K wire format: k = {k:,.0f} entries ({buckets:g} bucket(s)), int32 indices + "
          f"float32 values = {8 * k:,.0f} B, twice the values alone; with the counts: "
          f"{(topk['bytes'] + topk['hidden']) / base:.5f} of fp32")
    return fp16["bytes"] / base, topk["bytes"] / base


def report_comm(comm):
    med = comm["median_ms"]
    raw = med["raw MPI Allreduce"]
    print(f"\n2. fp32 exchange of {comm['elements']:,} float32s ({comm['bytes']:,} B), 2 ranks: "
          f"median ms of the slower rank over {comm['rounds']} interleaved rounds")
    for name, ms_ in med.items():
        print(f"  {name:<34}{ms_:9.3f} ms   x{ms_ / raw:.2f} of raw")
    print("  (backward writes the gradients into the bucket, so the exchange is the in-place "
          "allreduce\n   and bookkeeping; the copy is timed on its own, the older packing path "
          "beside it; see comm_job;\n   MatMul's weight gradients now skip the copy: see the "
          "slots line below)")
    print(f"  packing path step(grads) / raw: {med['DistOpt.step fp32 (packs after)'] / raw:.2f}")
    return med["DistOpt exchange, grads in bucket"] / raw


def report_scaling(pairs, title=True):
    if title:
        print(f"\n3. scaling, SINGA CNN, DistOpt backward_and_update + momentum SGD, batch "
              f"{BATCH} per rank, 1 BLAS thread per rank\n   (samples/s from the median block "
              "of steps; 1- and 2-rank jobs alternate 1,2,2,1,...)")
    ratios = []
    for i, (one, two) in enumerate(pairs):
        s1, s2 = one["samples_per_s"], two["samples_per_s"]
        ratios.append(s2 / s1)
        print(f"  repeat {i}: 1 rank {s1:8.1f}   2 ranks {s2:8.1f}   ratio {ratios[-1]:.2f}")
    print(f"  median ratio 2 ranks / 1 rank: {statistics.median(ratios):.2f}")
    return statistics.median(ratios)


def report_interleaved(results, title=True):
    if title:
        print("   the same with 1 and 2 ranks in alternating blocks of one job (rank 1 sleeps "
              "while rank 0\n   trains alone), so that both see the same machine load:")
    ratios = [r["two_per_s"] / r["one_per_s"] for r in results]
    for i, (r, ratio) in enumerate(zip(results, ratios)):
        print(f"  repeat {i}: 1 rank {r['one_per_s']:8.1f}   2 ranks {r['two_per_s']:8.1f}   "
              f"ratio {ratio:.2f}")
    print(f"  median ratio 2 ranks / 1 rank: {statistics.median(ratios):.2f}")
    cpu = statistics.median(r["cpu_ratio"] for r in results)
    print(f"  by CPU time of the training threads (2 x 1-rank CPU s / the slower rank's, per "
          f"block): {cpu:.2f}\n   (what other processes take of the cores does not count; the "
          "allreduce's busy wait does)")
    return statistics.median(ratios), cpu


def report_shared_ab(ab):
    print(f"\n   2-rank training, the bucket through shared memory against MPI's Allreduce, "
          f"alternating\n   blocks of {ab['steps_per_block']} steps in one job "
          f"({ab['blocks']} blocks each, ABBA; per pair of blocks, median):")
    print(f"  ms per step: shared {ab['shared_ms']:.2f}, MPI {ab['mpi_ms']:.2f}; "
          f"shared / MPI: wall {ab['wall_ratio']:.3f}, slower rank's CPU {ab['cpu_ratio']:.3f}"
          f"  ({ab['reductions']} shared reductions)")


def report_slots_ab(ab):
    copied = ab["copied_per_step"]
    print(f"\n   2-rank training, weight gradients computed in their bucket slots against "
          f"copied into them,\n   alternating blocks of {ab['steps_per_block']} steps in one "
          f"job ({ab['blocks']} blocks each, ABBA; per pair of blocks, median):")
    print(f"  ms per step: slots {ab['slots_ms']:.2f}, copy {ab['copy_ms']:.2f}; slots / copy: "
          f"wall {ab['wall_ratio']:.3f} [{ab['wall_range'][0]:.3f}, {ab['wall_range'][1]:.3f}],"
          f" slower rank's CPU {ab['cpu_ratio']:.3f}")
    print(f"  bytes copied into the buckets per step: {copied['slots']:,.0f} with slots, "
          f"{copied['copy']:,.0f} without (the model: {ab['bucket_bytes']:,} B)")


def run_scaling_job(n, path, args, timeout):
    """One job of a scaling repeat: an ``n``-rank ``train`` job (``path``), or the machine's
    ceiling (two 1-rank jobs at once, their samples/s summed), or a 2-rank job whose bucket
    goes through MPI's Allreduce (``"through MPI"``)."""
    if path == "ceiling":
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: launch(1, "train", args, timeout), range(2)))
        return {"samples_per_s": sum(r["train"]["samples_per_s"] for r in both)}
    if path == "through MPI":
        return launch(n, "train", args, timeout,
                      env_extra={"MINITORCH_DIST_SHARED_ALLREDUCE": "0"})["train"]
    return launch(n, path, args, timeout)[path]


def report_ceiling(pairs, ceilings, title=True):
    """Scaling against the machine's ceiling, per repeat: (2-rank samples/s / 1 rank's) /
    (two 1-rank jobs at once / the same 1 rank's) = the 2-rank job / the two 1-rank jobs.
    The ceiling is the most any 2-rank job can scale here, whatever its communication does
    (memory and caches shared by the cores, the machine's other load); measured in the same
    repeat, it sees the same load."""
    if title:
        print("\n   the machine's ceiling, in the same repeats: two 1-rank jobs at once, no "
              "communication")
    ratios = []
    for i, ((one, two), both) in enumerate(zip(pairs, ceilings)):
        ratios.append(two["samples_per_s"] / both["samples_per_s"])
        if title:
            print(f"  repeat {i}: two 1-rank jobs {both['samples_per_s']:8.1f} "
                  f"(x{both['samples_per_s'] / one['samples_per_s']:.2f} of one)   "
                  f"2 ranks / ceiling {ratios[-1]:.2f}")
        else:
            print(f"  repeat {i}: 2 ranks / ceiling {ratios[-1]:.2f}")
    print(f"  median 2 ranks / ceiling: {statistics.median(ratios):.2f}")
    return statistics.median(ratios)


def report_ceiling_in_job(results):
    """The same figure measured inside one 2-rank job (``ceiling_ab``): blocks of DistOpt
    training alternate with blocks where each rank trains on its own, so that a change in
    the machine's load between jobs does not enter the ratio."""
    print("\n   the same in alternating blocks of one 2-rank job: DistOpt on both ranks, then "
          "each rank\n   training on its own through a 1-rank DistOpt (two 1-rank trainings "
          "at once), ABBA")
    for i, r in enumerate(results):
        low, high = r["ratio_range"]
        ranks = ", ".join(f"{v:.0f}" for v in r["rank_per_s"])
        print(f"  repeat {i}: 2 ranks {r['two_per_s']:8.1f}   ceiling {r['ceiling_per_s']:8.1f}"
              f" (each rank alone: {ranks})   2 ranks / ceiling {r['ratio']:.2f} "
              f"[{low:.2f}, {high:.2f}] over {r['blocks']} pairs of blocks; waiting bound "
              f"{r['waiting_bound']:.3f}")
    median = statistics.median(r["ratio"] for r in results)
    print(f"  median 2 ranks / ceiling, in one job: {median:.2f}")
    print(f"  (waiting bound, median {statistics.median(r['waiting_bound'] for r in results):.3f}"
          ": the alone steps of the two ranks paired one by one, their mean over their max;\n"
          "   what waiting for the slower rank at every step would leave with an exchange that "
          "costs nothing)")
    return median


def driver(args):
    from minitorch_dist.run import find_mpiexec
    try:
        import mpi4py
        find_mpiexec()
    except (ImportError, FileNotFoundError) as exc:
        raise SystemExit(f"bench_dist_opt: needs mpi4py and mpiexec ({exc})")
    timeout = 60 if args.quick else 300
    start = time.monotonic()
    first = launch(2, "wire,comm", args, timeout)
    paths = ["train", "train_packing"] if args.with_packing else ["train"]
    pairs, mixed, ceilings, through_mpi, in_job = {path: [] for path in paths}, {}, [], [], []
    for rep in range(args.repeats):       # ABBA order: drift in machine load cancels out
        order = [(n, path) for n in (1, 2) for path in paths] + [(2, "ceiling")]
        if args.compare_shared:
            order.append((2, "through MPI"))
        if rep % 2:
            order.reverse()
        got = {(n, path): run_scaling_job(n, path, args, timeout) for n, path in order}
        for path in paths:
            pairs[path].append((got[1, path], got[2, path]))
        ceilings.append(got[2, "ceiling"])
        if args.compare_shared:
            through_mpi.append((got[1, "train"], got[2, "through MPI"]))
        for path in paths:
            job = path.replace("train", "interleaved")
            mixed.setdefault(path, []).append(launch(2, job, args, timeout)[job])
        in_job.append(launch(2, "ceiling_ab", args, timeout)["ceiling_ab"])
    print(f"DistOpt benchmark: python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"mpi4py {mpi4py.__version__}, cpus {os.cpu_count()}, C++ kernels "
          f"{'on' if first['wire']['cpp'] else 'off'}{', QUICK' if args.quick else ''}")
    fp16, topk = report_wire(first["wire"])
    comm = report_comm(first["comm"])
    scaling = report_scaling(pairs["train"])
    if args.with_packing:
        print("   the same with value_and_grad + DistOpt.step(grads) (packs after backward):")
        packing = report_scaling(pairs["train_packing"], title=False)
    interleaved, cpu_ratio = report_interleaved(mixed["train"])
    if args.with_packing:
        print("   the same with value_and_grad + DistOpt.step(grads) (packs after backward):")
        packing_mixed, packing_cpu = report_interleaved(mixed["train_packing"], title=False)
    ceiling = report_ceiling(pairs["train"], ceilings)
    ceiling_in_job = report_ceiling_in_job(in_job)
    slots_ab = launch(2, "slots_ab", args, timeout)["slots_ab"]
    report_slots_ab(slots_ab)
    if args.compare_shared:
        shared_ab = launch(2, "shared_ab", args, timeout)["shared_ab"]
        report_shared_ab(shared_ab)
        print("   the same 2-rank jobs with MINITORCH_DIST_SHARED_ALLREDUCE=0 (the bucket "
              "reduced by MPI's Allreduce),\n   in the same repeats:")
        mpi_scaling = report_scaling(through_mpi, title=False)
        mpi_ceiling = report_ceiling(through_mpi, ceilings, title=False)
    print("\nsummary (timings are noisy on a shared machine: re-measure on a quiet one)"
          + ("\n  QUICK run: too few steps and rounds for the timing ratios to mean anything"
             if args.quick else ""))
    print(f"  bytes fp16 / fp32 = {fp16:.4f}  (target <= {TARGETS['fp16']})  "
          f"{verdict(fp16, TARGETS['fp16'])}")
    print(f"  bytes sparseTopK(0.01) / fp32 = {topk:.4f}  (target <= {TARGETS['topk']})  "
          f"{verdict(topk, TARGETS['topk'])}")
    print(f"  time DistOpt fp32 comm / raw Allreduce = {comm:.2f}  (target <= "
          f"{TARGETS['comm']})  {verdict(comm, TARGETS['comm'])}")
    print(f"  samples/s 2 ranks / 1 rank = {scaling:.2f}  (target >= {TARGETS['scaling']})  "
          f"{verdict(scaling, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  samples/s 2 ranks / 1 rank, interleaved in one job = {interleaved:.2f}  (target >= "
          f"{TARGETS['scaling']})  "
          f"{verdict(interleaved, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  2 ranks / 1 rank by CPU time = {cpu_ratio:.2f}  (target >= {TARGETS['scaling']})  "
          f"{verdict(cpu_ratio, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  scaling / this machine's ceiling (two 1-rank jobs at once), per repeat, median = "
          f"{ceiling:.2f}  (target >= {TARGETS['ceiling']})  "
          f"{verdict(ceiling, TARGETS['ceiling'], lower_is_better=False)}")
    print(f"  2 ranks / the ceiling in alternating blocks of one job, median = "
          f"{ceiling_in_job:.2f}  (target >= {TARGETS['ceiling']})  "
          f"{verdict(ceiling_in_job, TARGETS['ceiling'], lower_is_better=False)}")
    copied = slots_ab["copied_per_step"]
    print(f"  2-rank step, weight gradients in their slots / copied in, in one job = "
          f"{slots_ab['wall_ratio']:.3f}; bytes copied into buckets per step "
          f"{copied['slots'] / max(copied['copy'], 1):.3f} of the copy path's")
    if args.compare_shared:
        print(f"  (the bucket through MPI's Allreduce instead: 2 ranks / 1 rank {mpi_scaling:.2f},"
              f" / ceiling {mpi_ceiling:.2f})")
        print(f"  2-rank step, bucket through shared memory / through MPI, in one job = "
              f"{shared_ab['wall_ratio']:.3f} (CPU {shared_ab['cpu_ratio']:.3f})")
    if args.with_packing:
        print(f"  (value_and_grad + step(grads), packing after backward: {packing:.2f}, "
              f"interleaved {packing_mixed:.2f}, by CPU time {packing_cpu:.2f})")
    print(f"  ({time.monotonic() - start:.0f} s in all)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few steps, ~30 s")
    parser.add_argument("--repeats", type=int, default=None, help="1-rank/2-rank job pairs")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per job")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps/rounds first")
    parser.add_argument("--rounds", type=int, default=None, help="communication rounds")
    parser.add_argument("--blocks", type=int, default=None, help="blocks of timed training steps")
    parser.add_argument("--with-packing", action="store_true",
                        help="also time the packing path (value_and_grad + step(grads))")
    parser.add_argument("--compare-shared", action="store_true",
                        help="also run each repeat's 2-rank job with the bucket reduced by "
                             "MPI's Allreduce (MINITORCH_DIST_SHARED_ALLREDUCE=0)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = dict(repeats=1, steps=6, warmup=2, rounds=30, blocks=2) if args.quick else \
        dict(repeats=7, steps=80, warmup=5, rounds=400, blocks=8)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.worker:
        worker(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
