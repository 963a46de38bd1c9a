"""The step time of the models repository's Wide&Deep at its upstream size (issue 15): a step of
batch 1000 per rank, vocab 20000, emb_dim 80, 39 fields, deep layers [1024, 512, 256, 128]
with the float16 MLP must take < 2 s on 2 CPU ranks.

The programs are the test version of upstream's (``python_tests/model_zoo_wide_deep/``),
built and trained as their entry programs do (``set_up`` then ``get_WideDeep_net``, then
``Model.train`` in non-sink mode), three jobs one after the other under the launcher:

* ``standalone``: ``train_and_eval.py`` in one process (dense tables, Adam and FTRL);
* ``distribute``: ``train_and_eval_distribute.py`` on 2 ranks (data parallel, all-reduced
  gradients, batch 1000 on each rank);
* ``auto_parallel_hdm``: ``train_and_eval_auto_parallel.py --host_device_mix=1`` on 2 ranks over
  the virtual GPU (seed 001's command: tables row / column sliced and on the host, lazy Adam
  and FTRL on the host, the MLP on the device; batch 1000 on each rank, 2000 in the model).

A step is what a ``step_begin``/``step_end`` callback sees (the input batches come from a
rotating set of ``--batches`` synthetic ones, already made). The first ``--warmup`` steps are
left out (the first traces the auto-parallel plan). On the slowest rank, each step is followed,
in the same job, by the **reference**: the float32 MatMul forward and backward of the first
layer at the same batch in NumPy (x @ W, x^T @ g, g @ W^T for x (batch, 3120), W (3120, 1024)):
the arithmetic that dominates the step, timed under the same machine load, interleaved with
the steps. ``step / reference`` is what the framework adds to it; on a machine shared with other
work, it is the steadier figure, and ``distribute / standalone`` compares 2 ranks with one
process at the same per-rank batch. Every process runs one BLAS thread.

    python benchmarks/bench_wide_deep_model_zoo.py                # upstream size (~2-4 min)
    python benchmarks/bench_wide_deep_model_zoo.py --steps 10
    python benchmarks/bench_wide_deep_model_zoo.py --quick        # tiny sizes, for the smoke test
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = 2.0
SIZES = {"upstream": {"batch": 1000, "vocab": 20000, "emb_dim": 80, "layers": [1024, 512, 256, 128]},
         "quick": {"batch": 100, "vocab": 400, "emb_dim": 8, "layers": [32, 16, 8, 4]}}
# mode: (ranks, entry module, command-line settings, environment)
MODES = {"standalone": (1, "train_and_eval", ["--device_target=CPU"], {}),
         "distribute": (2, "train_and_eval_distribute", ["--device_target=CPU"], {}),
         "auto_parallel_hdm": (2, "train_and_eval_auto_parallel",
                               ["--device_target=GPU", "--dropout_flag=True", "--host_device_mix=1"],
                               {"MINITORCH_DIST_VIRTUAL_GPU": "1"})}
THREADS = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def reference_seconds(batch, in_dim, out_dim, rng):
    """One float32 forward and backward of a (batch, in_dim) x (in_dim, out_dim) MatMul."""
    x = rng.standard_normal((batch, in_dim), dtype=np.float32)
    w = rng.standard_normal((in_dim, out_dim), dtype=np.float32)
    g = rng.standard_normal((batch, out_dim), dtype=np.float32)
    start = time.perf_counter()
    _ = x @ w
    _ = x.T @ g
    _ = g @ w.T
    return time.perf_counter() - start


# ---- one rank of a job ------------------------------------------------------------------

def _batches(size, count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = rng.integers(0, size["vocab"], (size["batch"], 39)).astype(np.int32)
        wts = rng.random((size["batch"], 39), dtype=np.float32)
        labels = (rng.random((size["batch"], 1)) < 0.3).astype(np.float32)
        out.append((ids, wts, labels))
    return out


def worker(args):
    """Train ``warmup + steps`` steps of ``args.worker``; print this rank's times as JSON."""
    sys.path.insert(0, os.path.join(ROOT, "python_tests"))
    import importlib
    import minitorch_dist as ms
    import minitorch_dist.dataset as ds
    from minitorch_dist.train.callback import Callback
    from model_zoo_wide_deep.src.config import get_config

    size = SIZES[args.size]
    _, module_name, settings, _ = MODES[args.worker]
    entry = importlib.import_module(f"model_zoo_wide_deep.{module_name}")
    config = get_config([*settings, f"--batch_size={size['batch']}", f"--vocab_size={size['vocab']}",
                         f"--emb_dim={size['emb_dim']}", f"--deep_layer_dim={size['layers']}"])
    entry.set_up(config)
    from minitorch_dist.communication.management import get_rank
    rank = get_rank() if args.worker != "standalone" else 0
    ms.set_seed(1)
    train_net, _ = entry.get_WideDeep_net(config)
    train_net.set_train()
    total = args.warmup + args.steps
    batches = _batches(size, args.batches, seed=100 + rank)
    data = ds.GeneratorDataset(lambda: (batches[i % len(batches)] for i in range(total)),
                               ["ids", "weights", "labels"], shuffle=False)
    rng = np.random.default_rng(rank)
    in_dim = 39 * size["emb_dim"]

    class Timer(Callback):
        def __init__(self):
            self.steps, self.refs, self.losses, self._start = [], [], [], None

        def step_begin(self, run_context):
            self._start = time.perf_counter()

        def step_end(self, run_context):
            self.steps.append(time.perf_counter() - self._start)
            self.losses.append(float(run_context.original_args().net_outputs[0].asnumpy()))
            self.refs.append(reference_seconds(size["batch"], in_dim, size["layers"][0], rng))

    timer = Timer()
    ms.Model(train_net).train(1, data, callbacks=[timer], dataset_sink_mode=False)
    print("BENCH_RESULT " + json.dumps({"rank": rank, "steps": timer.steps, "refs": timer.refs,
                                        "losses": timer.losses}), flush=True)


# ---- the driver -------------------------------------------------------------------------

def run_job(mode, args):
    """Launch one mode; returns the per-rank results."""
    ranks, _, _, env_extra = MODES[mode]
    env = dict(os.environ, **THREADS, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "minitorch_dist.run", "-n", str(ranks), "--timeout", str(args.timeout),
               os.path.abspath(__file__), "--worker", mode, "--size", args.size, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--batches", str(args.batches)]
    # in a scratch directory: the auto-parallel program saves its strategy file in the current one
    with tempfile.TemporaryDirectory(prefix="bench_wide_deep_zoo_") as scratch:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout + 30,
                              cwd=scratch)
    results = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
               if line.startswith("BENCH_RESULT ")]
    if done.returncode != 0 or len(results) != ranks:
        raise SystemExit(f"bench_wide_deep_model_zoo: the {mode} job failed (exit {done.returncode})\n"
                         f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return results


def summarize(results, warmup):
    """Per timed step, the slowest rank's step and reference; their medians and ranges."""
    steps = np.max([r["steps"][warmup:] for r in results], axis=0)
    refs = np.max([r["refs"][warmup:] for r in results], axis=0)
    return {"step": float(np.median(steps)), "step_min": float(steps.min()), "step_max": float(steps.max()),
            "ref": float(np.median(refs)), "ratio_ref": float(np.median(steps / refs)), "count": len(steps),
            "losses_agree": all(r["losses"] == results[0]["losses"] for r in results)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few steps (smoke test)")
    parser.add_argument("--size", choices=sorted(SIZES), default="upstream")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per mode")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps per mode")
    parser.add_argument("--batches", type=int, default=4, help="rotating synthetic batches")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--timeout", type=int, default=400, help="seconds per job")
    parser.add_argument("--worker", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.steps, args.warmup, args.batches = "quick", 3, 1, 2
    if args.worker:
        return worker(args)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or args.steps < 1 or args.warmup < 0 or args.batches < 1:
        parser.error(f"expected --modes from {list(MODES)} (got {unknown}), --steps >= 1, --warmup >= 0, "
                     "--batches >= 1")
    size = SIZES[args.size]
    print(f"Wide&Deep (models repository, test version) step: batch {size['batch']} per rank, vocab "
          f"{size['vocab']}, emb_dim {size['emb_dim']}, 39 fields, deep layers {size['layers']}, float16 MLP; "
          f"{args.warmup} warm-up + {args.steps} timed steps per mode, 1 BLAS thread per process")
    print(f"reference: float32 MatMul forward+backward of the first layer ({size['batch']} x {39 * size['emb_dim']}"
          f" x {size['layers'][0]}), after every step in the same job")
    summaries = {}
    for mode in modes:
        load = os.getloadavg()[0]
        summary = summarize(run_job(mode, args), args.warmup)
        summaries[mode] = summary
        ranks = MODES[mode][0]
        verdict = "meets the target" if summary["step"] < TARGET_S else "MISSES the target"
        print(f"step {mode} ({ranks} rank{'s' if ranks > 1 else ''}): median {summary['step']:.3f} s "
              f"[{summary['step_min']:.3f}, {summary['step_max']:.3f}] over {summary['count']} steps; "
              f"target < {TARGET_S:.1f} s: step/target {summary['step'] / TARGET_S:.2f} ({verdict}); "
              f"reference {summary['ref'] * 1e3:.3g} ms: step/reference {summary['ratio_ref']:.2f}; "
              f"load before {load:.1f}")
        if mode == "auto_parallel_hdm":     # one model over both ranks: the same loss on each
            print(f"auto_parallel_hdm ranks' losses {'agree' if summary['losses_agree'] else 'DIFFER'}")
    if "standalone" in summaries:
        for mode in ("distribute", "auto_parallel_hdm"):
            if mode in summaries:
                print(f"ratio {mode} / standalone step (same per-rank batch): "
                      f"{summaries[mode]['step'] / summaries['standalone']['step']:.2f}")
    print("The machine may be shared: absolute times drift with its load; step/reference, measured "
          "under the same load, is the steadier figure.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
