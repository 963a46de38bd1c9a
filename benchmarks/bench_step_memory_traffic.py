"""Where the seed MLP step's time goes beyond its instructions: memory counters per step.

minitorch_dist executes 1.04x the instructions of the step written in NumPy by hand but
takes 1.2-1.4x its wall time. Fresh arrays every step are the usual suspect: freed blocks
that glibc gives back to the system come back as zeroed pages, one page fault per 4 KiB.
This script counts, for each contender in a process of its own (BLAS on one thread):

  * minor and major page faults per step (``getrusage``);
  * CPU time per step (user and system: page faults are system time);
  * the transient Python-traced memory of one step: the peak above its start
    (``tracemalloc``, which sees NumPy's array memory; PyTorch's allocator it does not see,
    so PyTorch shows n/a);
  * with ``--cache-sim``, data misses per step in callgrind's simulated caches, first level
    and a last level the size of one core's L2 (valgrind; ``bench_step_overhead.py`` runs it).

Contenders, on the same data and weights: ``minitorch_dist`` (value_and_grad + SGD),
``numpy by hand`` (reuses its buffers: ``out=``), ``numpy fresh`` (the same step with a new
array for every result, as a framework makes them) and ``pytorch``.

    python benchmarks/bench_step_memory_traffic.py [--steps 200] [--malloc tuned|system|mmap64k]
                                                    [--cache-sim]

``--malloc`` sets glibc's allocator in the children: ``tuned`` (what ``import
minitorch_dist`` does, ``backend/allocator.py``), ``system`` (glibc's defaults,
``MINITORCH_DIST_SYSTEM_MALLOC=1``) or ``mmap64k`` (``MALLOC_MMAP_THRESHOLD_=65536``: every
block above 64 KiB is a fresh mapping, the worst case). Wall times are printed too; read
them only on a quiet machine.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENDERS = ("minitorch_dist", "numpy by hand", "numpy fresh", "pytorch")
MALLOC_ENV = {"tuned": {}, "system": {"MINITORCH_DIST_SYSTEM_MALLOC": "1"},
              "mmap64k": {"MALLOC_MMAP_THRESHOLD_": "65536"}}
L2_BYTES = 512 << 10        # one core's L2 on this machine: the last level simulated


def _setup(which):
    """(step function, batches) for one contender."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import bench_training_step as bench
    step, batches, net = bench.seed_mlp_contender(which, 8)
    if step is not None:
        return step, batches
    import torch
    torch.set_num_threads(1)
    model, _ = bench.torch_models(torch, net, bench.SingaCNN())
    step = bench.torch_step(torch, model, torch.optim.SGD(model.parameters(), 0.01))
    return step, [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]


def measure(step, batches, steps, warmup=10, traced_steps=5):
    """The counters of ``steps`` steps after ``warmup``, per step."""
    for i in range(warmup):
        step(*batches[i % len(batches)])
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(steps):
        step(*batches[i % len(batches)])
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"minor_faults": (after.ru_minflt - before.ru_minflt) / steps,
            "major_faults": (after.ru_majflt - before.ru_majflt) / steps,
            "user_ms": (after.ru_utime - before.ru_utime) / steps * 1e3,
            "system_ms": (after.ru_stime - before.ru_stime) / steps * 1e3,
            "wall_ms": wall / steps * 1e3,
            "transient_kib": transient_peak(step, batches, traced_steps) / 1024}


def transient_peak(step, batches, steps):
    """The largest traced memory above a step's start, over ``steps`` steps (bytes)."""
    tracemalloc.start()
    try:
        peak = 0
        for i in range(steps):
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            step(*batches[i % len(batches)])
            peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
        return peak
    finally:
        tracemalloc.stop()


def run_child(which, steps, malloc):
    """The counters of one contender, measured in a new process."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for name in ("MINITORCH_DIST_SYSTEM_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        env.pop(name, None)
    env.update(MALLOC_ENV[malloc])
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", which,
                           "--steps", str(steps)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{which!r} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cache_misses(which, steps):
    """Simulated data misses per step (first level, and a last level of ``L2_BYTES``)."""
    events = _callgrind_events(which, steps, ("--cache-sim=yes", f"--LL={L2_BYTES},8,64"))
    return {"Ir_M": events["Ir"] / steps / 1e6,
            "D1_misses_k": (events["D1mr"] + events["D1mw"]) / steps / 1e3,
            "L2_misses_k": (events["DLmr"] + events["DLmw"]) / steps / 1e3,
            "I1_misses_k": events["I1mr"] / steps / 1e3}


def _callgrind_events(which, steps, tool_args):
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import bench_step_overhead
    return bench_step_overhead.callgrind_events(which, steps, warmup=3, tool_args=tool_args)


def _torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--malloc", choices=sorted(MALLOC_ENV), default="tuned")
    parser.add_argument("--only", choices=CONTENDERS, action="append", default=None)
    parser.add_argument("--cache-sim", action="store_true",
                        help="also count simulated cache misses under valgrind (minutes)")
    parser.add_argument("--child", choices=CONTENDERS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if args.child:
        print(json.dumps(measure(*_setup(args.child), args.steps)))
        return None
    if args.cache_sim and shutil.which("valgrind") is None:
        sys.exit("--cache-sim counts with valgrind, which is not installed (apt-get install valgrind)")
    contenders = [c for c in (args.only or CONTENDERS) if c != "pytorch" or _torch_available()]
    print(f"seed MLP step, batch 64, one thread, malloc {args.malloc}, load average "
          f"{os.getloadavg()[0]:.2f}, {args.steps} steps")
    results = {}
    for which in contenders:
        results[which] = row = run_child(which, args.steps, args.malloc)
        print(f"  {which:<15} minor faults/step {row['minor_faults']:8.1f}   major "
              f"{row['major_faults']:4.1f}   user {row['user_ms']:6.2f} ms   system "
              f"{row['system_ms']:5.2f} ms   wall {row['wall_ms']:6.2f} ms   transient "
              + ("    n/a" if which == "pytorch" else f"{row['transient_kib']:7.0f} KiB"), flush=True)
    if args.cache_sim:
        print(f"simulated caches (callgrind), per step; last level = {L2_BYTES >> 10} KiB:")
        for which in ("minitorch_dist", "numpy by hand"):
            results.setdefault(which, {}).update(sim := cache_misses(which, 4))
            print(f"  {which:<15} {sim['Ir_M']:6.2f} M instructions   D1 misses "
                  f"{sim['D1_misses_k']:7.1f} k   L2 misses {sim['L2_misses_k']:6.1f} k   I1 misses "
                  f"{sim['I1_misses_k']:5.1f} k", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return results


if __name__ == "__main__":
    main()
