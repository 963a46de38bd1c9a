"""Instructions per training step of the seed MLP: minitorch_dist against its bare GEMMs.

Wall-clock ratios swing with the machine's load; instruction counts do not. Each contender
runs in its own process under ``valgrind --tool=callgrind``, started with instrumentation
off (imports, model building and warm-up run at a few times native speed); after warm-up the
child waits, this script switches instrumentation on (``callgrind_control -i on``), and
counting covers only one ``exec`` of the measured loop (``--toggle-collect=builtin_exec``). Contenders, all on the same batch-64 data:

  * ``minitorch_dist``: ``bench_training_step``'s seed MLP step (value_and_grad + SGD);
  * ``numpy by hand``: the same step written directly in NumPy (``NumpyMLP``);
  * ``gemms only``: just the step's eight matrix products, into preallocated outputs.

    python benchmarks/bench_step_overhead.py [--steps 10] [--warmup 3]

The ratio ``minitorch_dist / gemms only`` is the step's overhead over its bare GEMMs
(target <= 1.05). Under valgrind OpenBLAS's kernels count more instructions per flop than
they would natively, so read the absolute overhead (instructions per step beyond the GEMMs)
as well as the ratio. BLAS runs on one thread.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENDERS = ("minitorch_dist", "numpy by hand", "gemms only")
LOOP = "for i in range(steps):\n    step(*batches[i % len(batches)])\n"


def _setup(which):
    """(step function, batches) for one contender, after importing everything it uses."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import numpy as np
    import bench_training_step as bench
    step, batches, net = bench.seed_mlp_contender(which, 4)
    if step is not None:
        return step, batches
    return gemms_only_step(np, net, bench.BATCH), [(x.reshape(bench.BATCH, -1),) for x, _ in batches]


def gemms_only_step(np, net, batch):
    """The step's eight matrix products (3 forward, 3 weight gradients, 2 input gradients)."""
    W = [layer.weight.asnumpy() for layer in (net.layer1, net.layer2, net.layer3)]
    f32 = np.float32
    h = [np.empty((batch, 512), f32), np.empty((batch, 512), f32), np.empty((batch, 10), f32)]
    gW = [np.empty(w.shape, f32) for w in W]
    gh = [np.empty((batch, 512), f32), np.empty((batch, 512), f32)]

    def step(x):
        np.matmul(x, W[0], out=h[0])
        np.matmul(h[0], W[1], out=h[1])
        np.matmul(h[1], W[2], out=h[2])
        np.matmul(h[1].T, h[2], out=gW[2])
        np.matmul(h[2], W[2].T, out=gh[1])
        np.matmul(h[0].T, gh[1], out=gW[1])
        np.matmul(gh[1], W[1].T, out=gh[0])
        np.matmul(x.T, gh[0], out=gW[0])

    return step


def child(which, steps, warmup, go_file):
    step, batches = _setup(which)
    for i in range(warmup):
        step(*batches[i % len(batches)])
    if go_file:      # under valgrind: wait, running, until instrumentation is on
        print(f"READY {os.getpid()}", flush=True)
        while not os.path.exists(go_file):
            pass
    exec(LOOP, {"step": step, "batches": batches, "steps": steps})   # the only counted region


def count(which, steps, warmup):
    """Instructions counted by callgrind inside the measured loop of one contender."""
    return callgrind_events(which, steps, warmup)["Ir"]


def callgrind_events(which, steps, warmup, tool_args=()):
    """Every event callgrind counted inside the measured loop of one contender, by name
    (``Ir``; with ``tool_args=("--cache-sim=yes",)`` also the simulated cache misses
    ``D1mr``, ``DLmr``, ...: ``bench_step_memory_traffic.py`` asks for them)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        go_file = os.path.join(tmp, "go")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out",
               "--instr-atstart=no", "--collect-atstart=no", "--toggle-collect=builtin_exec",
               *tool_args,
               sys.executable, os.path.abspath(__file__), "--child", which, "--steps", str(steps),
               "--warmup", str(warmup), "--go-file", go_file]
        with subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as proc:
            ready = proc.stdout.readline().split()
            if ready[:1] == ["READY"]:
                subprocess.run(["callgrind_control", "-i", "on", ready[1]], check=True,
                               capture_output=True)
                open(go_file, "w").close()
            stderr = proc.communicate()[1]
    names = re.search(r"Events\s*:\s*([\w ]+)\n", stderr)
    found = re.search(r"Collected\s*:\s*([\d ,]+)\n", stderr)
    if proc.returncode != 0 or not names or not found:
        raise RuntimeError(f"callgrind run for {which!r} failed (exit {proc.returncode}):\n"
                           + stderr[-3000:])
    values = [int(v.replace(",", "")) for v in found.group(1).split()]
    return dict(zip(names.group(1).split(), values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--only", choices=CONTENDERS, action="append", default=None,
                        help="count only this contender (repeatable); instruction counts do "
                             "not depend on the load, so earlier counts of the others hold")
    parser.add_argument("--child", choices=CONTENDERS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--go-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error(f"--steps must be >= 1 and --warmup >= 0, got {args.steps} and {args.warmup}")
    if args.child:
        child(args.child, args.steps, args.warmup, args.go_file)
        return None
    if shutil.which("valgrind") is None:
        sys.exit("bench_step_overhead.py counts instructions with valgrind, which is not "
                 "installed (apt-get install valgrind)")
    per_step = {}
    for which in args.only or CONTENDERS:
        per_step[which] = count(which, args.steps, args.warmup) / args.steps
        print(f"  {which:<16} {per_step[which] / 1e6:10.2f} M instructions per step", flush=True)
    if len(per_step) < len(CONTENDERS):
        return per_step
    ours, gemms = per_step["minitorch_dist"], per_step["gemms only"]
    print(f"\nminitorch_dist / gemms only    = {ours / gemms:.3f}  (target <= 1.05)")
    print(f"minitorch_dist / numpy by hand = {ours / per_step['numpy by hand']:.3f}")
    print(f"overhead beyond the GEMMs      = {(ours - gemms) / 1e6:.2f} M instructions per step")
    return per_step


if __name__ == "__main__":
    main()
