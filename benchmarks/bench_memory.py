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
* ``xception``: SINGA's Xception (``examples/singa/xceptionnet.py``, the paper's widths) at
  299x299, batch ``--xception-batch`` (16 in SINGA's example), one SGD step each: the SINGA
  facade against a PyTorch network of the same structure. Target <= 1.2 (peak over peak).

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --models stack --steps 3
    python benchmarks/bench_memory.py --models xception --xception-batch 16
"""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

TARGETS = {"stack": 1.1, "xception": 1.2}
SHAPES = {"stack": ((16, 3, 112, 112), 10), "resnet18": ((16, 3, 32, 32), 10),
          "mlp": ((256, 784), 10), "xception": ((16, 3, 299, 299), 10)}


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


def torch_xception(torch, widths=(32, 64, 128, 256, 728, 1024, 1536, 2048), middle=8,
                   classes=10):
    """examples/singa/xceptionnet.py's structure in PyTorch (same layers, same order)."""
    tnn = torch.nn

    def separable(cin, cout):
        return tnn.Sequential(tnn.Conv2d(cin, cin, 3, 1, 1, groups=cin, bias=False),
                              tnn.Conv2d(cin, cout, 1, bias=False))

    class Block(tnn.Module):
        def __init__(self, cin, cout, reps, stride=1, start_with_relu=True, grow_first=True):
            super().__init__()
            self.skip = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False),
                                       tnn.BatchNorm2d(cout)) \
                if cout != cin or stride != 1 else None
            layers, filters = [], cin
            if grow_first:
                layers += [tnn.ReLU(), separable(cin, cout), tnn.BatchNorm2d(cout)]
                filters = cout
            for _ in range(reps - 1):
                layers += [tnn.ReLU(), separable(filters, filters), tnn.BatchNorm2d(filters)]
            if not grow_first:
                layers += [tnn.ReLU(), separable(cin, cout), tnn.BatchNorm2d(cout)]
            if not start_with_relu:
                layers = layers[1:]
            if stride != 1:
                layers.append(tnn.MaxPool2d(3, stride, 1))
            self.body = tnn.Sequential(*layers)

        def forward(self, x):
            return self.body(x) + (self.skip(x) if self.skip is not None else x)

    w = widths
    return tnn.Sequential(
        tnn.Conv2d(3, w[0], 3, 2, 0, bias=False), tnn.BatchNorm2d(w[0]), tnn.ReLU(),
        tnn.Conv2d(w[0], w[1], 3, 1, 1, bias=False), tnn.BatchNorm2d(w[1]), tnn.ReLU(),
        Block(w[1], w[2], 2, 2, start_with_relu=False), Block(w[2], w[3], 2, 2),
        Block(w[3], w[4], 2, 2), *[Block(w[4], w[4], 3) for _ in range(middle)],
        Block(w[4], w[5], 2, 2, grow_first=False),
        separable(w[5], w[6]), tnn.BatchNorm2d(w[6]), tnn.ReLU(),
        separable(w[6], w[7]), tnn.BatchNorm2d(w[7]), tnn.ReLU(),
        tnn.AdaptiveAvgPool2d(1), tnn.Flatten(), tnn.Linear(w[7], classes))


def singa_xception_step(x_np, y_np):
    """One SGD step of the SINGA facade's Xception, as SINGA's example trains it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "examples", "singa"))
    from xceptionnet import Xception
    from minitorch_dist.singa import autograd, opt, tensor
    net, sgd = Xception(num_classes=10), opt.SGD(lr=0.01)
    autograd.training = True
    x, y = tensor.from_numpy(x_np), tensor.from_numpy(np.eye(10, dtype=np.float32)[y_np])

    def step(_x, _y):
        sgd(autograd.softmax_cross_entropy(net(x), y))
    return step, x, y


def run_child(framework, name, steps, batch=None):
    """Build, measure base, train, measure peak: one JSON line on stdout."""
    import minitorch_dist as ms
    import bench_conv
    ms.set_seed(0)
    ms.set_context(num_threads=1)
    shape, classes = SHAPES[name]
    shape = (batch or shape[0],) + shape[1:]
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(np.float32)
    y_np = rng.integers(0, classes, shape[0]).astype(np.int32)
    net = our_net(name) if name != "xception" else None
    if framework == "torch":
        import torch
        torch.set_num_threads(1)
        if name == "xception":
            model = torch_xception(torch)
        elif name == "mlp":
            model = torch.nn.Sequential(
                torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                torch.nn.ReLU(), torch.nn.Linear(512, 10))
        else:
            model = bench_conv.torch_twin(torch, net)
        del net
        step = bench_conv.torch_step(torch, model, 0.0 if name == "xception" else 0.9)
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np.astype(np.int64))
    elif name == "xception":
        step, x, y = singa_xception_step(x_np, y_np)
    else:
        step = bench_conv.our_step(net, 0.9)
        x, y = ms.Tensor(x_np), ms.Tensor(y_np)
    base = rss_mb()
    for _ in range(steps):
        step(x, y)
    print(json.dumps({"base": base, "peak": peak_mb()}))


def measure(framework, name, steps, batch):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", framework, name, str(steps),
                          str(batch)],
                         capture_output=True, text=True, env=env, check=True,
                         cwd=os.path.dirname(os.path.abspath(__file__)))
    record = json.loads(out.stdout.strip().splitlines()[-1])
    record["growth"] = record["peak"] - record["base"]
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["stack", "resnet18", "mlp"],
                        choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--xception-batch", type=int, default=16)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        framework, name, steps, batch = args.child
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        return run_child(framework, name, int(steps), int(batch))
    print(f"load before: {os.getloadavg()[0]:.2f}")
    print(f"{'model':10s} {'ours MB':>20s} {'PyTorch MB':>20s} {'ratio':>13s}")
    for name in args.models:
        batch = args.xception_batch if name == "xception" else SHAPES[name][0][0]
        steps = 1 if name == "xception" else args.steps
        ours, theirs = measure("ours", name, steps, batch), measure("torch", name, steps, batch)
        key = "peak" if name == "xception" else "growth"
        ratio = ours[key] / theirs[key]
        target = f"  (target <= {TARGETS[name]})" if name in TARGETS else ""
        print(f"{name:10s} {ours['growth']:8.0f} (peak {ours['peak']:6.0f}) "
              f"{theirs['growth']:8.0f} (peak {theirs['peak']:6.0f}) {ratio:13.2f}{target}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
