"""Pipeline parallelism on real MPI ranks: throughput, 1F1B against GPipe, memory per rank.

The model is balanced and compute-bound: 8 ``nn.Dense(1024, 1024)`` layers with a ReLU
between them, 4 on each of 2 pipeline stages (``pipeline_stage`` 0 and 1), MSE loss, momentum
SGD, batch 256 cut into 8 micro-batches of 32. Every process runs one BLAS thread
(OMP/OPENBLAS/MKL_NUM_THREADS=1, the baseline's too), and each training step draws the next
batch from a rotating set of random batches (a fixed batch converges; its tiny gradients
and denormals distort timings).

The figures:

1. **throughput** = samples/s of the 2 pipeline ranks (1F1B, ``TrainOneStepCell`` over
   ``nn.PipelineCell``) ÷ samples/s of one process doing the same work: the whole
   unpipelined model on the same 8 micro-batches of 32 rows, one forward and backward each
   (``ms.value_and_grad``), the gradients accumulated, then one update (**accum**).
   Target >= 1.6. The bound is ``2 × (1 - bubble)`` with the simulator's bubble
   ``(p-1)/(m+p-1) = 1/9``: 1.78, reached only with equal stages and a runtime that cost
   nothing. Beside it, the ratio to one process taking a **plain** step on the whole batch
   of 256 (plain ``TrainOneStepCell``, no micro-batches, learning rate × 8: the pipelined
   loss is the *sum* of the 8 micro-batch MSEs, MindSpore's semantics, so both take the
   very same update); no target, since a 256-row product is faster per row than a 32-row
   one and no pipeline changes that. GPipe's ratios are printed too.
   The same ratios for **interleaved 1F1B**: the same 8 layers cut in quarters on stages
   0, 1, 0, 1 (``pipeline_interleave``, 2 chunks per rank), whose fill and drain cost half
   as much (simulated bubble 1/17, bound 1.88) for 3 stage borders instead of 1.
   Two figures explain the gap: **micro-batching cost** = accum's step time ÷ the plain
   step's, and **pipeline efficiency** = samples/s of the 2 ranks ÷ (2 × accum's samples/s),
   whose bound is ``1 - bubble`` (0.889).
2. **1F1B ÷ GPipe**: the step time ratio (the same bubble: expect ~1.0), and on stage 0 the
   peak activation bytes and the peak number of micro-batches alive, each schedule's, next
   to the schedule simulator's prediction (``generate_schedule(kind, 2, 8).simulate()
   .peak_activations``: 2 for 1F1B, 8 for GPipe). The predicted bytes ratio is the ratio of
   those counts, as every micro-batch of a stage keeps the same arrays.
3. **parameter memory**: ``parameter_bytes_held ÷ parameter_bytes_model`` of each stage's
   rank (a rank releases the other stage's parameters; expect 0.5 each).

4. **where the time goes** (1F1B): per rank and step, the time computing ``F`` and ``B``,
   blocked on messages (a receive not there yet, a send not complete, named by the action
   that waited), posting messages, and outside the schedule (optimizer, loss broadcast),
   from ``PipelineCell.stats`` (``action_seconds``, ``waited_seconds``); then the schedule
   simulator fed those F and B times per stage: its makespan plus the largest time outside
   the schedule, against the measured step. A ratio near 1 says the runtime executes the
   schedule without adding time, so what is left is the schedule's bubble and the compute.

How the memory is measured (``PipelineCell.stats`` after a step, from
``minitorch_dist/parallel/pipeline/runner.py``): after the forward of a micro-batch the runtime
walks that micro-batch's tape from its roots (the ``Send`` tokens, or the loss on the last
stage) and adds up the ``nbytes`` of every array a primitive saved for its backward (each
memory block once per micro-batch: a view counts as its base); the backward of that
micro-batch subtracts them again. ``peak_activation_bytes`` is the high-water mark of that
live total over the step, ``peak_live_microbatches`` the high-water mark of the number of
micro-batches whose tape was alive. Measured, not simulated. The stage's own parameter
arrays are left out of the count although a primitive may save them (``MatMul`` keeps its
weight for the input gradient): the process holds them once, however many micro-batches are
alive. So the bytes are live activations proper.

The driver and the report are here; the model and the jobs each process runs are in
``pipeline_jobs.py``.

How it is timed: one command runs, ``--repeats`` times, four jobs in a rotating order
(accum, plain, 1F1B, GPipe, interleaved; then plain, 1F1B, GPipe, interleaved, accum;
...), each
in fresh processes: the two one-process jobs as plain processes, the pipelines on 2 ranks
through ``python -m minitorch_dist.run``, every job under a timeout. Each job does warm-up
steps, then its timed steps in blocks (between barriers on the ranks); its step time is the
median block's time per step.
The ratios are taken within a repeat (jobs that ran seconds apart), and the medians and
[min, max] ranges of the ratios over the repeats are printed. Absolute times are shown only
to explain the ratios: the machine is shared and they drift.

The allocator: every job, the one-process ones too, runs in the launcher's environment
(``rank_environment`` in ``minitorch_dist/launch/mpiexec.py``), so all four are compared under the same
setting: one BLAS thread, and glibc keeping freed blocks of up to 256 MiB for reuse
(``MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824``, unless the caller
set them). ``--system-malloc`` removes those two variables from every job (glibc's own
dynamic thresholds) to show their effect. The header prints the setting as the jobs
reported it from their environment.

    python benchmarks/bench_pipeline.py [--quick] [--system-malloc] [--repeats 5] [--steps 16]
                                        [--json PATH]
    (about 80 s; --quick: tiny sizes, a few seconds, for the smoke test)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
YIELD_VARIABLE = "OMPI_MCA_mpi_yield_when_idle"
if __name__ == "__main__":      # driver and workers; not when a test imports this file
    for _name in THREAD_VARIABLES:
        os.environ[_name] = "1"     # one BLAS thread in every process, before NumPy starts

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(SCRIPT))
# the jobs run in pipeline_jobs.py; malloc_setting is re-exported for the tests
from pipeline_jobs import (INTERLEAVED, MARK, N_BATCHES, STAGES,  # noqa: E402
                           malloc_setting, worker)  # noqa: F401

TARGET_THROUGHPUT = 1.6
SCHEDULES = ("1f1b", "gpipe")


# ============================================================================ driver
def schedule_check(result, micro):
    """Where one 1F1B job's time went: per rank the compute of F and B (blocked time taken
    out), the waits, the posting and what runs outside the schedule; and the simulator's
    makespan for those F and B times, plus the largest outside time, against the measured
    step. The simulator's B is whole while the runtime sends a stage's input gradient
    halfway through it (split backward), so the prediction errs high."""
    from minitorch_dist.parallel.pipeline import generate_schedule
    ranks, cost_f, cost_b = [], {}, {}
    for r in result["ranks"]:
        t = r["time"]
        actions, waited = t["actions"], t["waited"]
        cost_f[r["stage"]] = (actions.get("F", 0.0) - waited.get("F", 0.0)) / micro
        cost_b[r["stage"]] = (actions.get("B", 0.0) - waited.get("B", 0.0)) / micro
        posting = sum(actions.get(k, 0.0) - waited.get(k, 0.0)
                      for k in actions if k not in ("F", "B"))
        ranks.append({"rank": r["rank"], "stage": r["stage"], "step": t["step"],
                      "F": cost_f[r["stage"]] * micro, "B": cost_b[r["stage"]] * micro,
                      "waited": sum(waited.values()), "waited_by_kind": waited,
                      "posting": posting, "outside": t["step"] - sum(actions.values())})
    sim = generate_schedule("1f1b", STAGES, micro).simulate(
        forward_cost=lambda stage: cost_f[stage], backward_cost=lambda stage: cost_b[stage])
    predicted = sim.makespan + max(r["outside"] for r in ranks)
    measured = max(r["step"] for r in ranks)
    return {"ranks": ranks, "makespan": sim.makespan, "bubble": sim.bubble_fraction,
            "predicted": predicted, "measured": measured,
            "measured_over_predicted": measured / predicted}


def child_env(system_malloc, mpi_yield=False):
    """Every job's environment: the launcher's (``rank_environment``), the one-process jobs'
    too, so that all four run under the same allocator setting; ``system_malloc`` drops it.
    ``mpi_yield`` asks Open MPI to yield the core while a rank waits instead of spinning
    (``OMPI_MCA_mpi_yield_when_idle=1``; the one-process jobs never wait)."""
    from minitorch_dist.run import MALLOC_VARIABLES, rank_environment
    env = rank_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    for name in THREAD_VARIABLES:
        env[name] = "1"             # even where the caller's environment asks for more
    if mpi_yield:
        env[YIELD_VARIABLE] = "1"
    if system_malloc:          # the launcher then adds none either
        env["MINITORCH_DIST_SYSTEM_MALLOC"] = "1"
        for name in MALLOC_VARIABLES:
            env.pop(name, None)
    return env


def run_job(name, args, timeout):
    """Run one job in fresh processes; its result dict."""
    sizes = ["--layers", str(args.layers), "--width", str(args.width), "--batch",
             str(args.batch), "--micro", str(args.micro), "--steps", str(args.steps),
             "--warmup", str(args.warmup), "--blocks", str(args.blocks)]
    worker_args = [SCRIPT, "--worker", name] + sizes
    if name in ("baseline", "accum"):
        command = [sys.executable] + worker_args
    else:
        command = [sys.executable, "-m", "minitorch_dist.run", "-n", str(STAGES), "--timeout",
                   str(timeout)] + worker_args
    # the launcher kills its job at `timeout` (exit 124); this one is the backstop
    done = subprocess.run(command, cwd=REPO, env=child_env(args.system_malloc, args.mpi_yield),
                          capture_output=True, text=True, timeout=timeout + 30)
    results = [json.loads(line[len(MARK):]) for line in done.stdout.splitlines()
               if line.startswith(MARK)]
    if done.returncode != 0 or len(results) != 1:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench_pipeline: job {name!r} failed (exit code {done.returncode}, "
                         f"{len(results)} result line(s))")
    return results[0]


def predictions(micro):
    """The simulator's bubble and per-rank peak micro-batches alive, per schedule."""
    from minitorch_dist.parallel.pipeline import generate_schedule
    out = {}
    for kind in SCHEDULES + (INTERLEAVED,):
        sim = (generate_schedule("interleaved_1f1b", STAGES, micro, chunks=2) if kind == INTERLEAVED
               else generate_schedule(kind, STAGES, micro)).simulate()
        out[kind] = {"bubble": sim.bubble_fraction,
                     "peak_activations": {int(r): int(n) for r, n in sim.peak_activations.items()}}
    return out


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(s, digits=2):
    return f"{s['median']:.{digits}f}  [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def stage_stats(result, stage):
    return next(r for r in result["ranks"] if r["stage"] == stage)["stats"]


def activation_figures(stats):
    """A stage's measured peak activation bytes and peak live micro-batches."""
    return {"peak_bytes": stats["peak_activation_bytes"],
            "peak_live": stats["peak_live_microbatches"]}


def allocator_setting(repeats):
    """The allocator setting every job reported; the comparison is unfair if they differ."""
    settings = {r["malloc"] for rep in repeats for r in rep["results"].values()}
    if len(settings) != 1:
        raise SystemExit(f"bench_pipeline: the jobs ran under different allocator settings: "
                         f"{sorted(settings)}")
    return settings.pop() or "glibc's defaults, no MALLOC_ variables"


def driver(args):
    from minitorch_dist.run import find_mpiexec
    try:
        import mpi4py
        find_mpiexec()
    except (ImportError, FileNotFoundError) as exc:
        raise SystemExit(f"bench_pipeline: needs mpi4py and mpiexec ({exc})")
    begin = time.monotonic()
    timeout = 60 if args.quick else 240
    predicted = predictions(args.micro)
    bubble = predicted["1f1b"]["bubble"]
    bound = STAGES * (1 - bubble)

    names = ["accum", "baseline"] + list(SCHEDULES) + [INTERLEAVED]
    loads = []                                # 1-minute load average before each job
    repeats = []
    for rep in range(args.repeats):           # rotating order: drift hits every job alike
        shift = rep % len(names)
        order = names[shift:] + names[:shift]
        got = {}
        for name in order:
            loads.append(os.getloadavg()[0])
            got[name] = run_job(name, args, timeout)
        step = {name: statistics.median(got[name]["step_s"]) for name in names}
        repeats.append({"order": order, "step_s": step,
                        "throughput_1f1b": step["accum"] / step["1f1b"],
                        "throughput_gpipe": step["accum"] / step["gpipe"],
                        "plain_1f1b": step["baseline"] / step["1f1b"],
                        "plain_gpipe": step["baseline"] / step["gpipe"],
                        "throughput_interleaved": step["accum"] / step[INTERLEAVED],
                        "plain_interleaved": step["baseline"] / step[INTERLEAVED],
                        "time_1f1b_over_gpipe": step["1f1b"] / step["gpipe"],
                        "microbatching_cost": step["accum"] / step["baseline"],
                        "pipeline_efficiency": step["accum"] / (STAGES * step["1f1b"]),
                        "check_1f1b": schedule_check(got["1f1b"], args.micro),
                        "results": got})
    last = repeats[-1]["results"]
    losses = [(name, r) for rep in repeats for name, r in rep["results"].items()
              if not np.isfinite(r.get("loss", 0.0))
              or any(not np.isfinite(x["loss"]) for x in r.get("ranks", []))]
    if losses:
        print(f"  note: non-finite loss in {sorted({name for name, _ in losses})}: the "
              "timings of diverged training are not meaningful")
    memory = {(kind, stage): activation_figures(stage_stats(last[kind], stage))
              for kind in SCHEDULES for stage in range(STAGES)}
    for rep in repeats:                        # measured memory must not vary between repeats
        for (kind, stage), want in memory.items():
            have = activation_figures(stage_stats(rep["results"][kind], stage))
            if have != want:
                print(f"  note: stage {stage} {kind} memory differs between repeats: "
                      f"{have} vs {want}")
    pred = {k: predicted[k]["peak_activations"] for k in SCHEDULES}
    s0 = {k: memory[(k, 0)] for k in SCHEDULES}
    figures = {
        "throughput_1f1b": spread([r["throughput_1f1b"] for r in repeats]),
        "throughput_gpipe": spread([r["throughput_gpipe"] for r in repeats]),
        "plain_1f1b": spread([r["plain_1f1b"] for r in repeats]),
        "plain_gpipe": spread([r["plain_gpipe"] for r in repeats]),
        "throughput_interleaved": spread([r["throughput_interleaved"] for r in repeats]),
        "plain_interleaved": spread([r["plain_interleaved"] for r in repeats]),
        "bound_interleaved": STAGES * (1 - predicted[INTERLEAVED]["bubble"]),
        "time_1f1b_over_gpipe": spread([r["time_1f1b_over_gpipe"] for r in repeats]),
        "microbatching_cost": spread([r["microbatching_cost"] for r in repeats]),
        "pipeline_efficiency": spread([r["pipeline_efficiency"] for r in repeats]),
        "measured_over_schedule": spread([r["check_1f1b"]["measured_over_predicted"]
                                          for r in repeats]),
        "waited_fraction": {str(stage): spread([
            next(x for x in r["check_1f1b"]["ranks"] if x["stage"] == stage)["waited"]
            / r["check_1f1b"]["measured"] for r in repeats]) for stage in range(STAGES)},
        "bound": bound, "bubble": bubble,
        "stage0_peak_bytes": {k: s0[k]["peak_bytes"] for k in SCHEDULES},
        "stage0_peak_live_microbatches": {k: s0[k]["peak_live"] for k in SCHEDULES},
        "stage1_peak_live_microbatches": {k: memory[(k, 1)]["peak_live"] for k in SCHEDULES},
        "predicted_peak_microbatches": pred,
        "predicted_bytes_1f1b_over_gpipe": pred["1f1b"][0] / pred["gpipe"][0],
    }
    figures["stage0_bytes_1f1b_over_gpipe"] = (figures["stage0_peak_bytes"]["1f1b"]
                                               / figures["stage0_peak_bytes"]["gpipe"])
    held = {stage: stage_stats(last["1f1b"], stage) for stage in range(STAGES)}
    figures["parameter_fraction"] = {str(stage): held[stage]["parameter_bytes_held"]
                                     / held[stage]["parameter_bytes_model"]
                                     for stage in range(STAGES)}
    model_bytes = last["baseline"]["parameter_bytes_model"]
    allocator = allocator_setting(repeats)

    # ---- report ----------------------------------------------------------------------
    print(f"pipeline benchmark: python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"mpi4py {mpi4py.__version__}, cpus {os.cpu_count()}, C++ kernels "
          f"{'on' if last['baseline']['cpp'] else 'off'}, 1 BLAS thread per process"
          f"{', QUICK' if args.quick else ''}")
    print(f"MPI waits: " + (f"{YIELD_VARIABLE}=1 in every job (--mpi-yield)" if args.mpi_yield
                            else "Open MPI's default (a waiting rank spins; --mpi-yield "
                                 "yields instead)"))
    busy = statistics.median(loads)
    cpus = os.cpu_count() or 1
    # the average trails: the previous job's processes (up to 2) are still in it
    print(f"machine load (1-minute average before each job, the benchmark's own processes "
          f"included): median {busy:.1f}, [{min(loads):.1f}, {max(loads):.1f}] on {cpus} cpus"
          + ("  -- BUSY: other processes compete for the cores, and the 2-rank jobs, which "
             "need both, lose the most" if busy > max(cpus, STAGES) + 0.5 else ""))
    print(f"allocator in every job: {allocator} ("
          + ("--system-malloc)" if args.system_malloc
             else "minitorch_dist.run's rank_environment; --system-malloc removes them)"))
    print(f"model: {args.layers} x Dense({args.width}, {args.width}) (+ReLU), "
          f"{args.layers // STAGES} per stage on {STAGES} stages, {model_bytes:,} parameter "
          f"bytes; MSE, momentum SGD; batch {args.batch} = {args.micro} micro-batches of "
          f"{args.batch // args.micro}; {N_BATCHES} rotating batches")
    print(f"each job: {args.warmup} warm-up steps, then {args.steps // args.blocks * args.blocks}"
          f" steps in {args.blocks} blocks (median block); {args.repeats} repeats of the jobs "
          f"in rotating order")
    print(f"  accum = 1 process, the same {args.micro} micro-batches, gradients accumulated, "
          f"one update; plain = 1 process, whole batch; 1f1b/gpipe/interleaved = {STAGES} "
          "ranks")

    print("\n1. throughput (per repeat; step times only to explain the ratios)")
    for i, rep in enumerate(repeats):
        st = rep["step_s"]
        print(f"  repeat {i}: step ms accum {st['accum'] * 1e3:6.1f}  plain "
              f"{st['baseline'] * 1e3:6.1f}  1F1B {st['1f1b'] * 1e3:6.1f}  GPipe "
              f"{st['gpipe'] * 1e3:6.1f}  interleaved {st[INTERLEAVED] * 1e3:6.1f}   1F1B / "
              f"accum {rep['throughput_1f1b']:.2f}  / plain {rep['plain_1f1b']:.2f}   "
              f"({', '.join(rep['order'])})")
    print(f"  bound over accum: {STAGES} x (1 - bubble {bubble:.4f}) = {bound:.2f} (simulator, "
          "F = B = 1, free messages)")

    print("\n2. 1F1B vs GPipe: peak activations on each rank, measured from the live tapes "
          "(PipelineCell.stats),\n   simulator = peak micro-batches alive from "
          f"generate_schedule(kind, {STAGES}, {args.micro}).simulate()")
    for stage in range(STAGES):
        for kind in SCHEDULES:
            m = memory[(kind, stage)]
            print(f"  stage {stage} {kind:<5}: peak activation bytes {m['peak_bytes']:>12,}  "
                  f"live micro-batches {m['peak_live']} (simulator {pred[kind][stage]})")

    print("\n3. parameter memory per rank (PipelineCell.stats)")
    for stage in range(STAGES):
        print(f"  stage {stage}: held {held[stage]['parameter_bytes_held']:,} of "
              f"{held[stage]['parameter_bytes_model']:,} B")

    middle = sorted(repeats, key=lambda r: r["throughput_1f1b"])[len(repeats) // 2]
    check = middle["check_1f1b"]
    print(f"\n4. where the 2 ranks' time goes: 1F1B, mean ms per step, the median repeat "
          f"({repeats.index(middle)}; PipelineCell.stats)")
    for r in check["ranks"]:
        waits = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in sorted(r["waited_by_kind"].items())
                          if v >= 5e-5)
        print(f"  rank {r['rank']} (stage {r['stage']}): step {r['step'] * 1e3:.1f} = computing "
              f"F {r['F'] * 1e3:.1f} + B {r['B'] * 1e3:.1f}, blocked on messages "
              f"{r['waited'] * 1e3:.1f} (in {waits or 'none'}), posting "
              f"{r['posting'] * 1e3:.1f}, outside the schedule {r['outside'] * 1e3:.1f} "
              "(optimizer, loss broadcast, slicing)")
    print(f"  simulator, 1F1B fed these F and B times: makespan {check['makespan'] * 1e3:.1f}"
          f" ms (bubble {check['bubble']:.3f}) + outside -> {check['predicted'] * 1e3:.1f} ms;"
          f" measured {check['measured'] * 1e3:.1f} ms: measured / simulated = "
          f"{check['measured_over_predicted']:.3f}")

    ok = figures["throughput_1f1b"]["median"] >= TARGET_THROUGHPUT
    print("\nsummary: median  [min, max] over repeats"
          + ("\n  QUICK run: sizes too small and too few steps for the timing ratios to mean "
             "anything" if args.quick else "")
          + "\n  (timings are noisy on a shared machine: read the ratios)")
    print(f"  samples/s 2 pipeline ranks 1F1B / 1 process accumulating = "
          f"{fmt(figures['throughput_1f1b'])}  (target >= {TARGET_THROUGHPUT}, bound "
          f"{bound:.2f})  {'PASS' if ok else 'MISS'}")
    print(f"  samples/s 2 pipeline ranks 1F1B / 1 process plain step = "
          f"{fmt(figures['plain_1f1b'])}  (reported beside it, no target)")
    print(f"  samples/s 2 pipeline ranks GPipe / 1 process accumulating = "
          f"{fmt(figures['throughput_gpipe'])}")
    print(f"  samples/s 2 pipeline ranks GPipe / 1 process plain step = "
          f"{fmt(figures['plain_gpipe'])}")
    print(f"  samples/s 2 pipeline ranks interleaved 1F1B (2 chunks each) / 1 process "
          f"accumulating = {fmt(figures['throughput_interleaved'])}  (bound "
          f"{figures['bound_interleaved']:.2f})")
    print(f"  samples/s 2 pipeline ranks interleaved 1F1B (2 chunks each) / 1 process plain "
          f"step = {fmt(figures['plain_interleaved'])}")
    print(f"  step time 1 process accumulating / plain step = "
          f"{fmt(figures['microbatching_cost'])}  (the price of {args.batch // args.micro}-row "
          "micro-batches, no pipeline)")
    print(f"  samples/s 2 pipeline ranks 1F1B / (2 x 1 process accumulating) = "
          f"{fmt(figures['pipeline_efficiency'])}  (bound 1 - bubble = {1 - bubble:.3f})")
    print(f"  step time 1F1B / GPipe = {fmt(figures['time_1f1b_over_gpipe'], 3)}")
    print(f"  1F1B step measured / simulated from its own F and B times = "
          f"{fmt(figures['measured_over_schedule'], 3)}  (1.0: the runtime adds nothing to "
          "the schedule; below 1: the split backward's early send)")
    for stage in range(STAGES):
        print(f"  1F1B stage {stage} time blocked on messages / step = "
              f"{fmt(figures['waited_fraction'][str(stage)], 3)}")
    print(f"  stage 0 peak activation bytes 1F1B / GPipe = "
          f"{figures['stage0_bytes_1f1b_over_gpipe']:.3f}  (simulator "
          f"{pred['1f1b'][0]}/{pred['gpipe'][0]} = "
          f"{figures['predicted_bytes_1f1b_over_gpipe']:.3f})")
    lm = figures["stage0_peak_live_microbatches"]
    print(f"  stage 0 peak live micro-batches 1F1B / GPipe = {lm['1f1b']}/{lm['gpipe']} = "
          f"{lm['1f1b'] / lm['gpipe']:.3f}  (simulator {pred['1f1b'][0]}/{pred['gpipe'][0]})")
    for stage in range(STAGES):
        print(f"  stage {stage} parameter bytes held / model = "
              f"{figures['parameter_fraction'][str(stage)]:.3f}")
    elapsed = time.monotonic() - begin
    print(f"  ({elapsed:.0f} s in all)")

    if args.json:
        config = {k: getattr(args, k) for k in ("layers", "width", "batch", "micro", "steps",
                                                 "warmup", "blocks", "repeats", "quick",
                                                 "system_malloc", "mpi_yield")}
        with open(args.json, "w") as out:
            json.dump({"config": config, "allocator": allocator, "figures": figures,
                   "load_average": loads,
                       "seconds": elapsed,
                       "last_loss": {name: r["loss"] for name, r in last.items()},
                       "repeats": [{k: v for k, v in r.items() if k != "results"}
                                   for r in repeats],
                       "memory": {f"{kind} stage {stage}": m
                                  for (kind, stage), m in memory.items()},
                       "stats": {f"{kind} stage {stage}": stage_stats(last[kind], stage)
                                 for kind in SCHEDULES for stage in range(STAGES)}},
                      out, indent=1)
    return figures


def parse_args(argv=None):
    """The command line, with the sizes of a full (or ``--quick``) run filled in."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 4 layers of 64, batch 32, few steps")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of the four jobs")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per job")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first")
    parser.add_argument("--blocks", type=int, default=None, help="blocks of timed steps")
    parser.add_argument("--system-malloc", action="store_true",
                        help="run every job without the launcher's MALLOC_* variables")
    parser.add_argument("--mpi-yield", action="store_true",
                        help="every job with OMPI_MCA_mpi_yield_when_idle=1: a waiting rank "
                             "yields its core instead of spinning (Open MPI only)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    for name in ("layers", "width", "batch", "micro"):
        parser.add_argument(f"--{name}", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = (dict(layers=4, width=64, batch=32, micro=8, repeats=1, steps=4, warmup=1,
                     blocks=2) if args.quick else
                dict(layers=8, width=1024, batch=256, micro=8, repeats=5, steps=16, warmup=2,
                     blocks=4))
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.layers % STAGES or args.batch % args.micro or args.micro < STAGES:
        parser.error(f"layers must split over {STAGES} stages, micro divide the batch, "
                     f"micro >= {STAGES}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args)
    else:
        return driver(args)


if __name__ == "__main__":
    main()
