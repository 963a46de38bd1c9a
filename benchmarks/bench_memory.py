"""Training memory against PyTorch (CPU): peak and growth of the resident set, each framework
and model in a process of its own, side by side in one run.

A child process builds the model and one batch, measures its resident set (``base``), runs
``--steps`` training steps and reads the peak resident set of its life (``ru_maxrss``).
``growth = peak - base`` is what training adds on top of the weights and the data: saved
activations, gradients, optimizer state and workspace. The figure is our growth / PyTorch's.

Models (``--models``, default all):

* ``stack``: bench_conv.py's ResNet-style stack (six 3x3 conv + BN + ReLU, 64 channels) at
  112x112, batch 16. Target <= 1.1.
* ``resnet18``: bench_conv.py's ResNet-18 at 32x32, batch 16.
* ``mlp``: the seed MLP (784-512-512-10, batch 256).

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --models stack --steps 3
"""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

TARGETS = {"stack": 1.1}
SHAPES = {"stack": ((16, 3, 112, 112), 10), "resnet18": ((16, 3, 32, 32), 10),
          "mlp": ((256, 784), 10)}


def rss_mb():
    """The current resident set of this process, from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def our_net(name):
    import bench_conv
    from minitorch_dist import nn
    if name == "stack":
        return bench_conv.Stack()
    if name == "resnet18":
        return bench_conv.ResNet18()
    return nn.SequentialCell([nn.Dense(784, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(),
                              nn.Dense(512, 10)])


def run_child(framework, name, steps):
    """Build, measure base, train, measure peak: one JSON line on stdout."""
    import minitorch_dist as ms
    import bench_conv
    ms.set_seed(0)
    ms.set_context(num_threads=1)
    shape, classes = SHAPES[name]
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(np.float32)
    y_np = rng.integers(0, classes, shape[0]).astype(np.int32)
    net = our_net(name)
    if framework == "torch":
        import torch
        torch.set_num_threads(1)
        model = bench_conv.torch_twin(torch, net) if name != "mlp" else torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
            torch.nn.ReLU(), torch.nn.Linear(512, 10))
        del net
        step = bench_conv.torch_step(torch, model, 0.9)
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np.astype(np.int64))
    else:
        step = bench_conv.our_step(net, 0.9)
        x, y = ms.Tensor(x_np), ms.Tensor(y_np)
    base = rss_mb()
    for _ in range(steps):
        step(x, y)
    print(json.dumps({"base": base, "peak": peak_mb()}))


def measure(framework, name, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", framework, name, str(steps)],
                         capture_output=True, text=True, env=env, check=True,
                         cwd=os.path.dirname(os.path.abspath(__file__)))
    record = json.loads(out.stdout.strip().splitlines()[-1])
    record["growth"] = record["peak"] - record["base"]
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        framework, name, steps = args.child
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        return run_child(framework, name, int(steps))
    print(f"load before: {os.getloadavg()[0]:.2f}")
    print(f"{'model':10s} {'ours MB':>20s} {'PyTorch MB':>20s} {'growth ratio':>13s}")
    for name in args.models:
        ours, theirs = measure("ours", name, args.steps), measure("torch", name, args.steps)
        ratio = ours["growth"] / theirs["growth"]
        target = f"  (target <= {TARGETS[name]})" if name in TARGETS else ""
        print(f"{name:10s} {ours['growth']:8.0f} (peak {ours['peak']:6.0f}) "
              f"{theirs['growth']:8.0f} (peak {theirs['peak']:6.0f}) {ratio:13.2f}{target}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
