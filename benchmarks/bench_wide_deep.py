"""Wide&Deep samples/s: host-device against one device against the CPU alone (issue 8).

The model is the Wide&Deep example's (``examples/wide_deep/``: ``get_WideDeep_net`` of
``train_and_eval.py`` over ``src/wide_and_deep.py``), built three times from the same seed and
trained on the same batches for the same steps:

* **host-device** (``--host_device_mix 1``, MindSpore's tutorial): both embedding tables and
  their lookups on the host (``nn.EmbeddingLookup(..., target="CPU")``), both optimizers on the
  host (``optimizer_w.target = optimizer_d.target = "CPU"``: FTRL on the wide table, lazy Adam
  on the rest, the MLP's weights included), the MLP and the loss on the device ("GPU").
* **one device**: everything on the device: ``target="DEVICE"`` tables, the optimizers
  updating every parameter where it lives (the tables' sparse rows through the device's
  array module).
* **all CPU**: ``device_target="CPU"``: everything on the host, the sparse updates through the
  fused C++ kernels.

All three use sparse tables (``RowTensor`` gradients, lazy Adam, no L2 term: host-device
forces ``--sparse 1``, and the other two take it too), so they compute the same step: the
script first runs ``--check-steps`` steps of each from the same start and stops with an error
unless the losses agree (the first step to 1e-6, the others to 1e-5), because timings of
different work compare nothing.

Without CuPy the device is the **virtual GPU** (``MINITORCH_DIST_VIRTUAL_GPU=1``): its arrays
are NumPy arrays in host memory, every host<->device copy is a real memcpy and is counted, and
its "device" computes on the same CPU cores as the host. So the ratios show what the placement
itself costs here (the bytes that cross, the host kernels against the device path, the extra
copies and dispatch), not what an accelerator would gain: see the printed notes and
``docs/host_device.md``. MindSpore's own figure (its Wide&Deep README, 8 Ascend devices) is
printed for reference: host-device 236.506 ms/step against data parallel's 27.388, 8.6x
slower. There is no target for this benchmark; it is a report.

Two sizes, both by default (``--sizes``):

* ``example``: the example's defaults (emb_dim 8, MLP 312-64-32-1, batch 500, the data's
  vocabulary), where per-step overheads weigh most;
* ``mindspore``: MindSpore's Wide&Deep model (emb_dim 80, MLP 3120-1024-512-256-128-1,
  vocab_size 200000) at batch 1000 (MindSpore: 16000, too slow for 2 cores).

How it is timed: one process holds the three networks; the batches (``--batches`` of them,
rotating, drawn by ``ds.write_synthetic_criteo`` and read by the example's ``create_dataset``)
are put on each configuration's device before timing, as a prefetching input pipeline
would. Each of ``--repeats`` rounds runs ``--steps`` steps of each configuration, in an order
that rotates from round to round; a configuration's time in a round is its mean step time.
The ratios are taken within a round; the medians and [min, max] over the rounds are printed.
Absolute times are shown only to explain the ratios: the machine is shared and they drift.
BLAS and the sparse kernels run ``--threads`` threads (default 1) in every configuration.

The allocator: the script runs under the launcher's glibc setting (``MALLOC_VARIABLES`` of
``minitorch_dist/launch/mpiexec.py``: freed blocks of up to 256 MiB are kept for reuse), restarting
itself with it when the caller's environment lacks it, as the other benchmarks run their
jobs. Host-device copies the looked-up rows into fresh arrays every step; with glibc's
defaults those come from ``mmap`` and are page-faulted in again each time, which costs
host-device more than the other two (``--system-malloc`` shows it).

    python benchmarks/bench_wide_deep.py                      # both sizes (~1 min)
    python benchmarks/bench_wide_deep.py --sizes example --repeats 9
    python benchmarks/bench_wide_deep.py --system-malloc      # glibc's allocator defaults
    python benchmarks/bench_wide_deep.py --quick              # tiny sizes, for the smoke test
"""
import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDE_DEEP = os.path.join(REPO, "examples", "wide_deep")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
CONFIGS = ("host_device", "device", "cpu")
LABELS = {"host_device": "host-device", "device": "one device", "cpu": "all CPU"}
FIELDS = 39
F32 = 4
# MindSpore's Wide&Deep README (MindSpore 1.3.0, 8 x Ascend 910, batch 16000): ms per step
MINDSPORE_MS_PER_STEP = {"host_device_8p": 236.506, "data_parallel_8p": 27.388}
SIZES = {
    "example": dict(batch=500, emb_dim=8, deep_layer_dim=[64, 32], vocab_size=None, steps=30,
                    warmup=3),
    "mindspore": dict(batch=1000, emb_dim=80, deep_layer_dim=[1024, 512, 256, 128],
                      vocab_size=200000, steps=4, warmup=1),
    "quick": dict(batch=64, emb_dim=4, deep_layer_dim=[16, 8], vocab_size=None, steps=3,
                  warmup=1),
}


# ============================================================================ model and data
def load_example():
    """The example's entry point (``train_and_eval``, for ``get_WideDeep_net``), its option
    parser (``src.config.parse_config``) and its reader (``src.datasets.create_dataset``)."""
    if WIDE_DEEP not in sys.path:
        sys.path.insert(0, WIDE_DEEP)
    import train_and_eval
    from src.config import parse_config
    from src.datasets import create_dataset
    return train_and_eval, parse_config, create_dataset


def config_argv(name, size):
    """The example's command line for configuration ``name`` at ``size``."""
    device_target, host_device_mix = {"host_device": ("GPU", 1), "device": ("GPU", 0),
                                      "cpu": ("CPU", 0)}[name]
    argv = ["--device_target", device_target, "--host_device_mix", str(host_device_mix),
            "--sparse", "1", "--emb_dim", str(size["emb_dim"]),
            "--deep_layer_dim", *map(str, size["deep_layer_dim"])]
    if size["vocab_size"]:
        argv += ["--vocab_size", str(size["vocab_size"])]
    return argv


def make_batches(size, n_batches, data_dir, create_dataset):
    """``n_batches`` Criteo batches (ids, values, labels as NumPy arrays) and the vocabulary
    size, written by ``ds.write_synthetic_criteo`` and read by the example's reader."""
    import minitorch_dist.dataset as ds
    ds.write_synthetic_criteo(os.path.join(data_dir, "train.txt"), size["batch"] * n_batches,
                              seed=1, model_seed=0)
    data = create_dataset(data_dir, train_mode=True, batch_size=size["batch"], threshold=5,
                          shuffle=False)
    batches = [tuple(columns) for columns in data.create_tuple_iterator(output_numpy=True)]
    return batches[:n_batches], data.vocab_size


def build(name, size, vocab_size, batches, example, parse_config):
    """Configuration ``name``: its device, training cell and batches on that device."""
    import minitorch_dist as ms
    config = parse_config(config_argv(name, size))
    if config.vocab_size is None:
        config.vocab_size = vocab_size
    ms.set_context(device_target=config.device_target)
    ms.set_seed(1)
    train_net, _ = example.get_WideDeep_net(config)
    train_net.set_train()
    staged = [tuple(ms.Tensor(column, device=config.device_target) for column in batch)
              for batch in batches]
    return {"device": config.device_target, "net": train_net, "batches": staged,
            "config": config}


def run_steps(entry, first, count):
    """``count`` training steps on the rotating batches from batch ``first``; the wide losses
    as Tensors (read them after timing: reading copies to the host)."""
    import minitorch_dist as ms
    ms.set_context(device_target=entry["device"])
    batches = entry["batches"]
    return [entry["net"](*batches[(first + i) % len(batches)])[0] for i in range(count)]


def check_same_losses(losses, first_rtol=1e-6, rtol=1e-5):
    """``losses``: {configuration: [loss per step]}. Stop unless every configuration computed
    the same losses; returns the largest relative difference from host-device's."""
    reference = losses[CONFIGS[0]]
    worst = 0.0
    for name, values in losses.items():
        if len(values) != len(reference):
            raise SystemExit(f"bench_wide_deep: {name} ran {len(values)} check steps, "
                             f"{CONFIGS[0]} {len(reference)}")
        for step, (a, b) in enumerate(zip(values, reference)):
            diff = abs(a - b) / max(abs(b), 1e-30)
            worst = max(worst, diff)
            if diff > (first_rtol if step == 0 else rtol):
                raise SystemExit(
                    f"bench_wide_deep: the configurations do not compute the same step: loss of "
                    f"step {step + 1} is {a!r} for {LABELS.get(name, name)} and {b!r} for "
                    f"{LABELS[CONFIGS[0]]} (relative difference {diff:.2e}); the timings would "
                    "compare different work")
    return worst


def device_parameter_bytes(entry):
    """Bytes of the trainable parameters that live off the host (the host-device MLP's)."""
    return int(sum(p.data.nbytes for p in entry["net"].trainable_params()
                   if p.device.name != "CPU"))


def predicted_bytes(size, emb_dim, device_params):
    """What host-device moves per step: the looked-up rows of both tables (width 1 and
    ``emb_dim``) to the device and their gradient rows back; the ids back to the host (the
    batch arrives on the device); the device parameters and their gradients to the host
    optimizer (``optimizer.target = "CPU"``) and the parameters back."""
    rows = size["batch"] * FIELDS * (1 + emb_dim) * F32
    ids = size["batch"] * FIELDS * F32
    return {"host_to_device": rows + device_params,
            "device_to_host": rows + ids + 2 * device_params,
            "rows": rows, "ids": ids, "device_params": device_params}


def breakdown(report, steps):
    """ms/step from a placement report: lookups, other primitives, table and dense updates."""
    parts = {"lookups": 0.0, "other primitives": 0.0, "table updates": 0.0,
             "dense updates": 0.0}
    for row in report:
        key = "lookups" if row["op"] == "EmbeddingLookup" else "other primitives"
        parts[key] += row["forward_ms"] + row["backward_ms"]
    for row in report.updates:
        key = "table updates" if "embedding_table" in row["name"] else "dense updates"
        parts[key] += row["update_ms"]
    return {k: v / steps for k, v in parts.items()}


# ============================================================================ one size
def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(s, digits=2):
    return f"{s['median']:.{digits}f}  [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def bench_size(label, size, args, example, parse_config, create_dataset):
    import minitorch_dist as ms
    data_dir = tempfile.mkdtemp(prefix="bench_wide_deep_")
    try:
        batches, vocab_size = make_batches(size, args.batches, data_dir, create_dataset)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    entries = {name: build(name, size, vocab_size, batches, example, parse_config)
               for name in CONFIGS}
    config = entries["host_device"]["config"]
    mlp = [FIELDS * config.emb_dim] + list(config.deep_layer_dim) + [1]
    table_bytes = config.vocab_size * (1 + config.emb_dim) * F32

    # same work: the check steps from the same start (they also warm up)
    losses = {name: [float(t.asnumpy()) for t in run_steps(entry, 0, args.check_steps)]
              for name, entry in entries.items()}
    worst = check_same_losses(losses)
    for entry in entries.values():
        run_steps(entry, args.check_steps, size["warmup"])

    repeats = []
    moved = {}
    parts = {name: [] for name in CONFIGS}
    for rep in range(args.repeats):
        shift = rep % len(CONFIGS)
        order = CONFIGS[shift:] + CONFIGS[:shift]
        seconds = {}
        for name in order:
            entry = entries[name]
            gc.collect()
            ms.reset_transfer_stats()
            ms.reset_placement_stats()
            start = time.perf_counter()
            out = run_steps(entry, rep * size["steps"], size["steps"])
            seconds[name] = (time.perf_counter() - start) / size["steps"]
            stats = ms.transfer_stats()
            parts[name].append(breakdown(ms.placement_report(), size["steps"]))
            moved[name] = {k: stats[k] / size["steps"]
                           for k in ("host_to_device", "device_to_host")}
            if not all(abs(float(t.asnumpy())) < float("inf") for t in out[-1:]):
                print(f"  note: {name}: non-finite loss; the timings are not meaningful")
        repeats.append({"order": list(order), "step_s": seconds,
                        "host_device_over_device": seconds["device"] / seconds["host_device"],
                        "host_device_over_cpu": seconds["cpu"] / seconds["host_device"],
                        "device_over_cpu": seconds["cpu"] / seconds["device"]})

    parts = {name: {key: statistics.median(p[key] for p in rounds) for key in rounds[0]}
             for name, rounds in parts.items()}
    step_ms = {name: statistics.median(r["step_s"][name] for r in repeats) * 1e3
               for name in CONFIGS}
    predicted = predicted_bytes(size, config.emb_dim,
                                device_parameter_bytes(entries["host_device"]))
    figures = {name: spread([r[name] for r in repeats])
               for name in ("host_device_over_device", "host_device_over_cpu", "device_over_cpu")}
    samples = {name: spread([size["batch"] / r["step_s"][name] for r in repeats])
               for name in CONFIGS}

    # ---- report ----------------------------------------------------------------------
    print(f"\n[{label}] model: emb_dim {config.emb_dim}, MLP {'-'.join(map(str, mlp))}, "
          f"vocab_size {config.vocab_size:,} (tables {table_bytes / 2 ** 20:.2f} MiB); batch "
          f"{size['batch']}, {len(batches)} rotating batches; {size['warmup']} warm-up + "
          f"{size['steps']} timed steps per round, {args.repeats} rounds")
    print(f"  same work: losses of the first {args.check_steps} steps, each configuration from the "
          f"same start: " + ", ".join(f"{LABELS[n]} {losses[n][0]:.8g}" for n in CONFIGS)
          + f" at step 1; largest relative difference {worst:.1e}")
    print("  bytes per step (ms.transfer_stats()):  host->device  device->host")
    for name in CONFIGS:
        print(f"    {LABELS[name]:<12}{moved[name]['host_to_device']:>26,.0f}"
              f"{moved[name]['device_to_host']:>14,.0f}")
    print(f"    host-device, predicted: rows {predicted['rows']:,} each way (batch x 39 x "
          f"(1 + {config.emb_dim}) x 4) + device parameters {predicted['device_params']:,} to "
          f"the device and twice that back (parameters and gradients for the host optimizers) + "
          f"ids {predicted['ids']:,} back = {predicted['host_to_device']:,} / "
          f"{predicted['device_to_host']:,}; the tables ({table_bytes:,} bytes) never cross")
    for i, rep in enumerate(repeats):
        st = rep["step_s"]
        print(f"  round {i}: ms/step "
              + "  ".join(f"{LABELS[n]} {st[n] * 1e3:7.2f}" for n in CONFIGS)
              + f"   ({', '.join(LABELS[n] for n in rep['order'])})")
    print("  where the time goes (ms/step, medians over the rounds, from ms.placement_report(); "
          "the rest is\n  autograd, copies outside primitives, Python):")
    for name in CONFIGS:
        rest = step_ms[name] - sum(parts[name].values())
        print(f"    {LABELS[name]:<12} step {step_ms[name]:7.2f} = "
              + "  ".join(f"{k} {v:6.2f}" for k, v in parts[name].items()) + f"  rest {rest:6.2f}")
    return {"label": label, "size": size, "vocab_size": config.vocab_size, "mlp": mlp,
            "table_bytes": table_bytes, "losses": losses, "max_relative_loss_difference": worst,
            "bytes_per_step": moved, "predicted_host_device_bytes": predicted,
            "ratios": figures, "samples_per_s": samples, "breakdown_ms": parts,
            "repeats": repeats}


# ============================================================================ driver
def device_note():
    """What the device is, and what that means for the ratios."""
    import minitorch_dist as ms
    gpu = ms.get_device("GPU")
    if "virtual" in repr(gpu):
        return gpu, True, (
            "the device is the virtual GPU: NumPy arrays in host memory, every host<->device copy\n"
            "  a real memcpy, counted; its 'device' computes on the same CPU cores as the host.")
    return gpu, False, "the device is a real GPU (CuPy)."


def allocator_setting():
    """The launcher's glibc variables that this process runs with, as text."""
    from minitorch_dist.run import MALLOC_VARIABLES
    return " ".join(f"{name}={os.environ[name]}" for name in MALLOC_VARIABLES if name in os.environ)


def restart_under_allocator(args):
    """Run this script again under the launcher's allocator setting (or, with
    ``--system-malloc``, without it) when this process was started otherwise: glibc reads
    the variables only at start-up. Returns only when nothing needs to change."""
    from minitorch_dist.run import MALLOC_VARIABLES
    env = dict(os.environ)
    if args.system_malloc:      # and no mallopt when minitorch_dist is imported either
        env["MINITORCH_DIST_SYSTEM_MALLOC"] = "1"
        for name in MALLOC_VARIABLES:
            env.pop(name, None)
    elif not any(name in env for name in MALLOC_VARIABLES):
        env.update(MALLOC_VARIABLES)
    if env != dict(os.environ):
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


def main(argv=None):
    args = parse_args(argv)
    if argv is None:
        restart_under_allocator(args)
    begin = time.monotonic()
    example, parse_config, create_dataset = load_example()   # sets MINITORCH_DIST_VIRTUAL_GPU
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import kernels
    if kernels.HAVE_CPP:
        kernels.native.set_sparse_threads(args.threads)
    gpu, virtual, note = device_note()
    ms.set_context(mode=ms.GRAPH_MODE)
    print(f"wide&deep benchmark: python {sys.version.split()[0]}, numpy {np.__version__}, cpus "
          f"{os.cpu_count()}, C++ kernels {'on' if kernels.HAVE_CPP else 'off'}, {args.threads} "
          f"BLAS/sparse-kernel thread(s); device {gpu!r}{', QUICK' if args.quick else ''}")
    print(f"  {note}")
    from minitorch_dist.run import MALLOC_VARIABLES
    launchers = all(os.environ.get(k) == v for k, v in MALLOC_VARIABLES.items())
    print(f"  allocator: {allocator_setting() or 'glibc defaults, no MALLOC_ variables'} ("
          + ("--system-malloc)" if args.system_malloc else
             ("minitorch_dist.run's setting" if launchers else "the caller's setting")
             + "; --system-malloc removes it)"))
    print("  host-device = tables, lookups and both optimizers on the host, the MLP and the loss "
          "on the device\n  (--host_device_mix 1); one device = everything on the device "
          "(target='DEVICE' tables);\n  all CPU = device_target='CPU'. Same model, seed, batches "
          "and steps; sparse tables in all three.")

    results = [bench_size(label, SIZES[label] if not args.batch else
                          dict(SIZES[label], batch=args.batch), args, example, parse_config,
                          create_dataset)
               for label in args.sizes]

    ms_ratio = MINDSPORE_MS_PER_STEP["data_parallel_8p"] / MINDSPORE_MS_PER_STEP["host_device_8p"]
    print("\nsummary: median  [min, max] over rounds (ratios of samples/s, measured side by side)"
          + ("\n  QUICK run: sizes too small and too few steps for the ratios to mean anything"
             if args.quick else ""))
    for res in results:
        r = res["ratios"]
        tag = f"  [{res['label']}] samples/s"
        print(f"{tag} host-device / one device = {fmt(r['host_device_over_device'])}")
        print(f"{tag} host-device / all CPU = {fmt(r['host_device_over_cpu'])}")
        print(f"{tag} one device / all CPU = {fmt(r['device_over_cpu'])}")
    print(f"  MindSpore's README, 8 Ascend devices: host-device / data parallel = {ms_ratio:.3f} "
          f"({MINDSPORE_MS_PER_STEP['data_parallel_8p']} / "
          f"{MINDSPORE_MS_PER_STEP['host_device_8p']}"
          " ms/step: 8.6x slower); a reference, not a target")
    if virtual:
        print("  What these ratios show: the cost of the placement itself here - the bytes that "
              "cross (copied\n  for real, listed above), the host's sparse kernels against the "
              "device's array-module path,\n  the extra copy and dispatch work. What they do not "
              "show: an accelerator's speed (one device\n  computes on the same cores as all CPU) "
              "or PCIe (a copy here is a memcpy in RAM). On a real GPU\n  the MLP runs far faster "
              "while the host's lookups, updates and copies do not, so host-device\n  falls "
              "further behind, as in MindSpore's 8.6x. Nor do they show why one trains host-device:"
              "\n  a table larger than the device still trains (examples/host_embedding_table.py).")
    elapsed = time.monotonic() - begin
    print(f"  ({elapsed:.0f} s in all)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"virtual_gpu": virtual, "threads": args.threads, "quick": args.quick,
                       "allocator": allocator_setting(),
                       "mindspore_host_device_over_data_parallel": ms_ratio,
                       "sizes": results, "seconds": elapsed}, out, indent=1)
    return results


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=["example", "mindspore"],
                        default=["example", "mindspore"], help="which model sizes to run")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: one tiny size, 2 rounds of 3 steps")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5; quick: 2)")
    parser.add_argument("--batch", type=int, default=None, help="rows per step (every size)")
    parser.add_argument("--batches", type=int, default=8, help="rotating batches")
    parser.add_argument("--check-steps", type=int, default=3,
                        help="steps whose losses must agree across the configurations")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS and sparse-kernel threads in every configuration")
    parser.add_argument("--system-malloc", action="store_true",
                        help="run without the launcher's MALLOC_* variables (glibc's defaults)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = ["quick"]
        args.batches = min(args.batches, 4)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if min(args.repeats, args.batches, args.check_steps, args.threads) < 1 or \
            (args.batch is not None and args.batch < 1):
        parser.error("--repeats, --batch, --batches, --check-steps and --threads must be >= 1")
    return args


if __name__ == "__main__":
    _threads = "1"
    for _i, _arg in enumerate(sys.argv):       # before NumPy starts its BLAS threads
        if _arg == "--threads" and _i + 1 < len(sys.argv):
            _threads = sys.argv[_i + 1]
        elif _arg.startswith("--threads="):
            _threads = _arg.split("=", 1)[1]
    for _name in THREAD_VARIABLES:
        os.environ[_name] = _threads
    main()
