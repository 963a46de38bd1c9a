"""Time one training step side by side: minitorch_dist, PyTorch (CPU) and hand-written NumPy.

Two models from the seeds, batch 64, on a rotating set of random batches (a fixed batch
converges and produces denormal gradients, which distorts timings):
  * MLP 784-512-512-10 with SGD (seed 000's network: MatMul + Add per layer);
  * SINGA's MNIST CNN (conv 20@5x5, maxpool 2, conv 50@5x5, maxpool 2, dense 500, dense 10)
    with momentum SGD.
Frameworks are interleaved round by round, in a rotating order, so machine noise hits all
of them alike; the median over rounds of each one's mean step time is reported and the
ratios are what to read.

    python benchmarks/bench_training_step.py [--rounds 15] [--steps 20] [--threads N]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.common.initializer import initializer

BATCH = 64
N_BATCHES = 8


# ---------------------------------------------------------------------------- minitorch_dist
class SeedDense(nn.Cell):
    """Seed 000's Dense: weight [in, out], MatMul then Add."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight = ms.Parameter(initializer("normal", [in_channels, out_channels], ms.float32))
        self.bias = ms.Parameter(initializer("zeros", [out_channels], ms.float32))
        self.matmul = ops.MatMul()
        self.add = ops.Add()

    def construct(self, x):
        return self.add(self.matmul(x, self.weight), self.bias)


class SeedMLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.layer1 = SeedDense(784, 512)
        self.relu1 = nn.ReLU()
        self.layer2 = SeedDense(512, 512)
        self.relu2 = nn.ReLU()
        self.layer3 = SeedDense(512, 10)

    def construct(self, x):
        x = self.relu1(self.layer1(self.flatten(x)))
        x = self.relu2(self.layer2(x))
        return self.layer3(x)


class SingaCNN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, pad_mode="valid", has_bias=True)
        self.conv2 = nn.Conv2d(20, 50, 5, pad_mode="valid", has_bias=True)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.pool2 = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.linear1 = nn.Dense(800, 500)
        self.linear2 = nn.Dense(500, 10)

    def construct(self, x):
        y = self.pool1(self.relu(self.conv1(x)))
        y = self.pool2(self.relu(self.conv2(y)))
        y = self.relu(self.linear1(self.flatten(y)))
        return self.linear2(y)


class UnfusedSGD(nn.SGD):
    """SGD that updates one parameter at a time in NumPy (``nn/optim/fused.py`` skips an
    optimizer whose ``_fused_ready`` says no): the path before the fused C++ update."""

    def _fused_ready(self):
        return False


def minitorch_step(net, optimizer):
    loss_fn = nn.CrossEntropyLoss()

    def forward_fn(data, label):
        return loss_fn(net(data), label)

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        return loss

    return step


def python_engine_step(net, optimizer):
    """``minitorch_step`` with the backward engine's Python twins (``autograd._native`` None
    during the step) instead of its C++ loops (``cpp/engine.cpp``)."""
    from minitorch_dist import autograd
    inner = minitorch_step(net, optimizer)

    def step(x, y):
        native, autograd._native = autograd._native, None
        try:
            return inner(x, y)
        finally:
            autograd._native = native

    return step


def seed_mlp_copy(mt_mlp):
    """A new ``SeedMLP`` that starts from ``mt_mlp``'s weights."""
    twin = SeedMLP()
    for mine, theirs in zip(twin.trainable_params(), mt_mlp.trainable_params()):
        mine.set_data(ms.Tensor(theirs.asnumpy().copy()))
    return twin


# ---------------------------------------------------------------------------- PyTorch
def torch_models(torch, mt_mlp, mt_cnn):
    tnn = torch.nn
    mlp = tnn.Sequential(tnn.Flatten(), tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512),
                         tnn.ReLU(), tnn.Linear(512, 10))
    with torch.no_grad():   # same initial weights as minitorch_dist (Linear stores W^T)
        for lin, layer in zip([mlp[1], mlp[3], mlp[5]], [mt_mlp.layer1, mt_mlp.layer2, mt_mlp.layer3]):
            lin.weight.copy_(torch.from_numpy(layer.weight.asnumpy().T.copy()))
            lin.bias.copy_(torch.from_numpy(layer.bias.asnumpy()))
    cnn = tnn.Sequential(tnn.Conv2d(1, 20, 5), tnn.ReLU(), tnn.MaxPool2d(2, 2), tnn.Conv2d(20, 50, 5),
                         tnn.ReLU(), tnn.MaxPool2d(2, 2), tnn.Flatten(), tnn.Linear(800, 500),
                         tnn.ReLU(), tnn.Linear(500, 10))
    with torch.no_grad():
        params = dict(mt_cnn.parameters_and_names())
        for tmod, name in [(cnn[0], "conv1"), (cnn[3], "conv2"), (cnn[7], "linear1"), (cnn[9], "linear2")]:
            tmod.weight.copy_(torch.from_numpy(params[f"{name}.weight"].asnumpy()))
            tmod.bias.copy_(torch.from_numpy(params[f"{name}.bias"].asnumpy()))
    return mlp, cnn


def torch_step(torch, model, optimizer):
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


# ---------------------------------------------------------------------------- NumPy by hand
def softmax_cross_entropy_in_place(z, y):
    """Mean cross-entropy of logits ``z`` (batch, classes) against labels ``y``; ``z`` is
    overwritten with the gradient of that mean with respect to the logits."""
    n = z.shape[0]
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    loss = -np.log(z[np.arange(n), y]).mean()
    z[np.arange(n), y] -= 1
    z /= n
    return loss


class NumpyMLP:
    """The MLP step written directly in NumPy, reusing its large buffers between steps."""

    def __init__(self, mt_mlp, lr=0.01):
        self.W = [layer.weight.asnumpy() for layer in (mt_mlp.layer1, mt_mlp.layer2, mt_mlp.layer3)]
        self.b = [layer.bias.asnumpy() for layer in (mt_mlp.layer1, mt_mlp.layer2, mt_mlp.layer3)]
        self.lr = lr
        f32 = np.float32
        self.h = [np.empty((BATCH, 512), f32), np.empty((BATCH, 512), f32)]
        self.z = np.empty((BATCH, 10), f32)
        self.gW = [np.empty(w.shape, f32) for w in self.W]
        self.gh = [np.empty((BATCH, 512), f32), np.empty((BATCH, 512), f32)]

    def step(self, x, y):
        W, b, h, gW, gh = self.W, self.b, self.h, self.gW, self.gh
        x = x.reshape(BATCH, -1)
        np.matmul(x, W[0], out=h[0]); h[0] += b[0]; np.maximum(h[0], 0, out=h[0])
        np.matmul(h[0], W[1], out=h[1]); h[1] += b[1]; np.maximum(h[1], 0, out=h[1])
        z = np.matmul(h[1], W[2], out=self.z); z += b[2]
        loss = softmax_cross_entropy_in_place(z, y)
        np.matmul(h[1].T, z, out=gW[2]); gb2 = z.sum(axis=0)
        np.matmul(z, W[2].T, out=gh[1]); gh[1] *= h[1] > 0
        np.matmul(h[0].T, gh[1], out=gW[1]); gb1 = gh[1].sum(axis=0)
        np.matmul(gh[1], W[1].T, out=gh[0]); gh[0] *= h[0] > 0
        np.matmul(x.T, gh[0], out=gW[0]); gb0 = gh[0].sum(axis=0)
        for p, g in zip(W + b, gW + [gb0, gb1, gb2]):
            g *= self.lr
            p -= g
        return loss


def numpy_fresh_mlp_step(mt_mlp, lr=0.01):
    """``NumpyMLP``'s step with a fresh array for every result (no ``out=``), as a framework
    makes them: the same operations, so the same bits."""
    W = [layer.weight.asnumpy() for layer in (mt_mlp.layer1, mt_mlp.layer2, mt_mlp.layer3)]
    b = [layer.bias.asnumpy() for layer in (mt_mlp.layer1, mt_mlp.layer2, mt_mlp.layer3)]
    lr = np.float32(lr)

    def step(x, y):
        x = x.reshape(BATCH, -1)
        h0 = np.maximum(x @ W[0] + b[0], 0)
        h1 = np.maximum(h0 @ W[1] + b[1], 0)
        z = h1 @ W[2] + b[2]
        loss = softmax_cross_entropy_in_place(z, y)
        gh1 = (z @ W[2].T) * (h1 > 0)
        gh0 = (gh1 @ W[1].T) * (h0 > 0)
        grads = [x.T @ gh0, h0.T @ gh1, h1.T @ z, gh0.sum(axis=0), gh1.sum(axis=0), z.sum(axis=0)]
        for p, g in zip(W + b, grads):
            p -= g * lr
        return loss

    step.params = W + b         # for the test that compares it with NumpyMLP
    return step


def seed_mlp_contender(which, count):
    """``(step, batches, net)`` for the seed MLP on ``count`` seeded batches, shared by the
    step benchmarks: ``which`` is "minitorch_dist", "numpy by hand" or "numpy fresh";
    another name gives ``step`` None and the raw ``(images, labels)`` pairs, for the caller's
    own contender."""
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    images = [rng.normal(size=(BATCH, 1, 28, 28)).astype(np.float32) for _ in range(count)]
    labels = [rng.integers(0, 10, BATCH).astype(np.int64) for _ in range(count)]
    net = SeedMLP()
    if which == "minitorch_dist":
        step = minitorch_step(net, nn.SGD(net.trainable_params(), 0.01))
        return step, [(ms.Tensor(x), ms.Tensor(y.astype(np.int32)))
                      for x, y in zip(images, labels)], net
    if which == "numpy by hand":
        return NumpyMLP(net).step, list(zip(images, labels)), net
    if which == "numpy fresh":
        return numpy_fresh_mlp_step(net), list(zip(images, labels)), net
    return None, list(zip(images, labels)), net


class NumpyCNN:
    """SINGA's CNN step written directly in NumPy (channels-last inside, im2col through
    ``sliding_window_view``, col2im as 25 shifted adds), momentum SGD like ``nn.SGD``."""

    def __init__(self, mt_cnn, lr=0.005, momentum=0.9):
        params = dict(mt_cnn.parameters_and_names())
        self.names = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                      "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]
        self.p = {k: params[k].asnumpy() for k in self.names}
        self.v = {k: np.zeros_like(a) for k, a in self.p.items()}
        self.lr, self.momentum = lr, momentum

    @staticmethod
    def _conv(x, w, b):
        """x (N, H, W, C) channels-last, w (O, C, 5, 5) -> (N, H-4, W-4, O) and the columns."""
        n, h, wd, c = x.shape
        cols = np.lib.stride_tricks.sliding_window_view(x, (5, 5), axis=(1, 2))
        cols = cols.reshape(n * (h - 4) * (wd - 4), c * 25)         # (c, kh, kw) order: a copy
        out = cols @ w.reshape(w.shape[0], -1).T
        out += b
        return out.reshape(n, h - 4, wd - 4, -1), cols

    @staticmethod
    def _pool(a):
        n, h, w, c = a.shape
        out = a.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
        return out

    @staticmethod
    def _unpool(a, pooled, grad):
        n, h, w, c = a.shape
        up = a.reshape(n, h // 2, 2, w // 2, 2, c)
        mask = up == pooled[:, :, None, :, None, :]
        return (mask * grad[:, :, None, :, None, :]).reshape(a.shape)

    def step(self, x, y):
        p = self.p
        n = x.shape[0]
        x = x.reshape(n, 28, 28, 1)                                   # one channel: NCHW == NHWC
        a1, cols1 = self._conv(x, p["conv1.weight"], p["conv1.bias"])
        np.maximum(a1, 0, out=a1)
        p1 = self._pool(a1)
        a2, cols2 = self._conv(p1, p["conv2.weight"], p["conv2.bias"])
        np.maximum(a2, 0, out=a2)
        p2 = self._pool(a2)
        f = p2.transpose(0, 3, 1, 2).reshape(n, 800)                 # flatten in NCHW order
        h = f @ p["linear1.weight"].T
        h += p["linear1.bias"]
        np.maximum(h, 0, out=h)
        z = h @ p["linear2.weight"].T
        z += p["linear2.bias"]
        loss = softmax_cross_entropy_in_place(z, y)
        g = {"linear2.weight": z.T @ h, "linear2.bias": z.sum(axis=0)}
        dh = z @ p["linear2.weight"]
        dh *= h > 0
        g["linear1.weight"], g["linear1.bias"] = dh.T @ f, dh.sum(axis=0)
        dp2 = (dh @ p["linear1.weight"]).reshape(n, 50, 4, 4).transpose(0, 2, 3, 1)
        da2 = self._unpool(a2, p2, dp2)
        da2 *= a2 > 0
        d2 = da2.reshape(-1, 50)
        g["conv2.weight"] = (d2.T @ cols2).reshape(50, 20, 5, 5)
        g["conv2.bias"] = d2.sum(axis=0)
        dcols = (d2 @ p["conv2.weight"].reshape(50, -1)).reshape(n, 8, 8, 20, 5, 5)
        dp1 = np.zeros_like(p1)
        for i in range(5):                                            # col2im
            for j in range(5):
                dp1[:, i:i + 8, j:j + 8, :] += dcols[..., i, j]
        da1 = self._unpool(a1, p1, dp1)
        da1 *= a1 > 0
        d1 = da1.reshape(-1, 20)
        g["conv1.weight"] = (d1.T @ cols1).reshape(20, 1, 5, 5)
        g["conv1.bias"] = d1.sum(axis=0)
        for k in self.names:                                          # momentum SGD
            v = self.v[k]
            v *= self.momentum
            v += g[k]
            p[k] -= self.lr * v
        return loss


# ---------------------------------------------------------------------------- timing
def mean_step_ms(step, batches, steps):
    start = time.perf_counter()
    for i in range(steps):
        step(*batches[i % len(batches)])
    return (time.perf_counter() - start) / steps * 1e3


def run(name, contenders, rounds, steps):
    for fn, batches in contenders.values():      # warm up every contender
        for i in range(5):
            fn(*batches[i % len(batches)])
    times = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(rounds):
        # rotate who goes first: a contender that runs right after PyTorch finds its OpenMP
        # threads still spinning on the second core, so a fixed order would favour some
        for k in names[r % len(names):] + names[:r % len(names)]:
            fn, batches = contenders[k]
            times[k].append(mean_step_ms(fn, batches, steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{name}: median ms per training step over {rounds} rounds x {steps} steps")
    for k, v in med.items():
        print(f"  {k:<16} {v:8.3f} ms")
    return med


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--only", choices=["mlp", "cnn"], default=None)
    parser.add_argument("--fresh", action="store_true",
                        help="add the MLP step in NumPy by hand with a fresh array for every "
                             "result (no out=), interleaved: what fresh arrays cost")
    parser.add_argument("--gemms", action="store_true",
                        help="add the MLP step's eight matrix products alone (no framework, no "
                             "element-wise work), interleaved: the floor under any MLP step "
                             "built on these GEMMs")
    parser.add_argument("--python-engine", action="store_true",
                        help="add the MLP step with the backward engine's Python twins in place "
                             "of its C++ loops (cpp/engine.cpp), interleaved")
    parser.add_argument("--unfused", action="store_true",
                        help="add a contender whose optimizer updates one parameter at a time "
                             "in NumPy (the path before the fused C++ update), interleaved")
    args = parser.parse_args(argv)

    ms.set_seed(0)
    rng = np.random.default_rng(0)
    images = [rng.normal(size=(BATCH, 1, 28, 28)).astype(np.float32) for _ in range(N_BATCHES)]
    labels = [rng.integers(0, 10, BATCH).astype(np.int64) for _ in range(N_BATCHES)]
    mt_batches = [(ms.Tensor(x), ms.Tensor(y.astype(np.int32))) for x, y in zip(images, labels)]

    mt_mlp, mt_cnn = SeedMLP(), SingaCNN()
    np_mlp = NumpyMLP(mt_mlp)
    try:
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
        print("PyTorch is not installed: comparing with hand-written NumPy only")
    if torch is not None:
        t_mlp, t_cnn = torch_models(torch, mt_mlp, mt_cnn)
        t_batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(images, labels)]
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else '-'} ({torch.get_num_threads() if torch else '-'} threads), "
          f"cpus {os.cpu_count()}, C++ kernels {'on' if _have_cpp() else 'off'}")

    results = {}
    if args.only in (None, "mlp"):
        contenders = {
            "minitorch_dist": (minitorch_step(mt_mlp, nn.SGD(mt_mlp.trainable_params(), 0.01)), mt_batches),
            "numpy (by hand)": (np_mlp.step, list(zip(images, labels))),
        }
        if args.fresh:
            contenders["numpy fresh"] = (numpy_fresh_mlp_step(mt_mlp), list(zip(images, labels)))
        if args.gemms:
            from bench_step_overhead import gemms_only_step
            products = gemms_only_step(np, mt_mlp, BATCH)
            contenders["gemms only"] = (lambda x, y: products(x.reshape(BATCH, -1)),
                                        list(zip(images, labels)))
        if args.python_engine:
            twin = seed_mlp_copy(mt_mlp)
            contenders["python engine"] = (python_engine_step(twin, nn.SGD(twin.trainable_params(), 0.01)),
                                           mt_batches)
        if args.unfused:
            twin = seed_mlp_copy(mt_mlp)
            contenders["unfused"] = (minitorch_step(twin, UnfusedSGD(twin.trainable_params(), 0.01)),
                                     mt_batches)
        if torch is not None:
            contenders["pytorch"] = (torch_step(torch, t_mlp, torch.optim.SGD(t_mlp.parameters(), 0.01)), t_batches)
        results["mlp"] = run("MLP 784-512-512-10, SGD", contenders, args.rounds, args.steps)
    if args.only in (None, "cnn"):
        contenders = {
            "minitorch_dist": (minitorch_step(mt_cnn, nn.SGD(mt_cnn.trainable_params(), 0.005, momentum=0.9)),
                               mt_batches),
            "numpy (by hand)": (NumpyCNN(mt_cnn).step, list(zip(images, labels))),
        }
        if torch is not None:
            contenders["pytorch"] = (torch_step(torch, t_cnn, torch.optim.SGD(t_cnn.parameters(), 0.005, momentum=0.9)),
                                     t_batches)
        results["cnn"] = run("SINGA CNN, momentum SGD", contenders, args.rounds, args.steps)

    print("\nratios (lower is better for minitorch_dist):")
    for model, med in results.items():
        mt = med["minitorch_dist"]
        if "pytorch" in med:
            target = 0.6 if model == "mlp" else 1.2      # the MLP's from issue 29
            print(f"  {model}: minitorch_dist / pytorch = {mt / med['pytorch']:.2f}  (target <= {target})")
        if "numpy (by hand)" in med:
            print(f"  {model}: minitorch_dist / numpy by hand = {mt / med['numpy (by hand)']:.2f}  (target <= 1.15)")
        if "numpy fresh" in med:
            print(f"  {model}: numpy fresh arrays / numpy by hand = "
                  f"{med['numpy fresh'] / med['numpy (by hand)']:.2f}")
        if "gemms only" in med and "pytorch" in med:
            print(f"  {model}: gemms only / pytorch = {med['gemms only'] / med['pytorch']:.2f}  "
                  "(the step's GEMMs alone: no step built on them is faster)")
        if "python engine" in med:
            print(f"  {model}: minitorch_dist / python engine = {mt / med['python engine']:.2f}")
        if "unfused" in med:
            print(f"  {model}: minitorch_dist / unfused optimizer = {mt / med['unfused']:.2f}")
    return results


def _have_cpp():
    try:
        from minitorch_dist import kernels
        return kernels.HAVE_CPP
    except ImportError:
        return False


if __name__ == "__main__":
    main()
