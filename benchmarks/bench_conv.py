"""Convolutional training steps against PyTorch (CPU), same threads, side by side in one run.

Models (``--models``, default all):

* ``stack``: a ResNet-style CIFAR stack: six 3x3 convolutions (3->64, then 64->64), each
  followed by BatchNorm and ReLU, at 32x32, batch 32; global average pooling, Dense(64, 10),
  softmax cross-entropy; SGD. Target <= 1.0.
* ``alexnet``: AlexNet (torchvision's layout, 224x224, batch 16), momentum SGD.
  Target <= 1.2.
* ``resnet18``: ResNet-18 at CIFAR size (3x3 stem, no max pool, 4 stages of 2 basic blocks,
  1x1 projection shortcuts), batch 16, momentum SGD. Target <= 1.1.
* ``seed004``: seed 004's pipeline ResNet (``examples/pipeline_resnet.py`` at its default
  size: bottleneck ResNet-50 layout, width 8, one block after each down-sampling block,
  "same" padding), one process, batch 32, 32x32, momentum SGD. Target <= 1.1.

Both frameworks get the same initial weights and the same batches (a rotating set of 4) and
run the same number of threads: ``--threads N`` goes to ``ms.set_context(num_threads=N)`` and
``torch.set_num_threads(N)``. Each round times a few steps of each, in an order that rotates
every round; the figure is the median over rounds of (our time / PyTorch's time), with
[min, max].

    python benchmarks/bench_conv.py --threads 1
    python benchmarks/bench_conv.py --threads 2 --models stack alexnet resnet18

Not in the default list, for the GPU comparison: ``mlp``, seed 000's MLP as ``nn.Dense``
layers (784-512-512-10, batch 64, SGD), and ``cnn``, SINGA's MNIST CNN (batch 64, momentum
SGD).

On a GPU (issue 29, item 5): ``--device GPU`` builds our networks with the GPU as the default
device (CuPy: cuBLAS and cuDNN where CuPy offers them) and moves PyTorch's twins to CUDA.
Every timed block ends with both devices synchronized. Target: ResNet-18 at batch 128 <= 1.5
times PyTorch eager.

    python benchmarks/bench_conv.py --device GPU --batch 128 --models resnet18
    python benchmarks/bench_conv.py --device GPU --models stack seed004 mlp cnn

It needs a CUDA GPU that both CuPy and PyTorch see. ``--dry-run`` runs the same code path on
the virtual GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``) with PyTorch on the CPU: a check of the
script, whose ratios measure nothing about a GPU.
"""
import argparse
import statistics
import time

import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn, ops

# issue 29 (one thread, quiet machine): stack 0.9, ResNet-18 1.0, seed 004 0.8; AlexNet keeps
# the earlier issue's 1.2
TARGETS = {"stack": 0.9, "alexnet": 1.2, "resnet18": 1.0, "seed004": 0.8}
GPU_TARGETS = {"resnet18": 1.5}     # issue 29 item 5: against PyTorch eager on CUDA, ...
GPU_TARGET_BATCH = 128              # ... at this batch


# ------------------------------------------------------------------------------- our models
class ConvBNReLU(nn.Cell):
    """3x3 (or k x k) convolution, BatchNorm, ReLU."""

    def __init__(self, cin, cout, k=3, stride=1, pad=1, relu=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=pad,
                              has_bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU() if relu else None

    def construct(self, x):
        y = self.bn(self.conv(x))
        return self.relu(y) if self.relu is not None else y


class Stack(nn.Cell):
    """Six ConvBNReLU at 64 channels, global average pooling, Dense(64, 10)."""

    def __init__(self):
        super().__init__()
        self.body = nn.SequentialCell([ConvBNReLU(3, 64)] + [ConvBNReLU(64, 64) for _ in range(5)])
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(64, 10)

    def construct(self, x):
        return self.fc(self.mean(self.body(x), (2, 3)))


def singa_cnn():
    """SINGA's MNIST CNN (``examples/mnist_cnn.py``): conv 20@5x5, pool, conv 50@5x5, pool,
    dense 500, dense 10."""
    conv = lambda cin, cout: nn.Conv2d(cin, cout, 5, pad_mode="valid", has_bias=True)  # noqa: E731
    return nn.SequentialCell([conv(1, 20), nn.ReLU(), nn.MaxPool2d(2, 2), conv(20, 50), nn.ReLU(),
                              nn.MaxPool2d(2, 2), nn.Flatten(), nn.Dense(800, 500), nn.ReLU(),
                              nn.Dense(500, 10)])


def mlp():
    """Seed 000's MLP (784-512-512-10) as ``nn.Dense`` layers."""
    return nn.SequentialCell([nn.Flatten(), nn.Dense(784, 512), nn.ReLU(), nn.Dense(512, 512),
                              nn.ReLU(), nn.Dense(512, 10)])


class BasicBlock(nn.Cell):
    """ResNet's basic block; a 1x1 projection on the shortcut when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = ConvBNReLU(cin, cout, stride=stride)
        self.b = ConvBNReLU(cout, cout, relu=False)
        self.down = ConvBNReLU(cin, cout, k=1, stride=stride, pad=0, relu=False) \
            if stride != 1 or cin != cout else None
        self.relu = nn.ReLU()

    def construct(self, x):
        short = self.down(x) if self.down is not None else x
        return self.relu(self.b(self.a(x)) + short)


class ResNet18(nn.Cell):
    """ResNet-18 for 32x32 inputs."""

    def __init__(self, classes=10):
        super().__init__()
        blocks, cin = [ConvBNReLU(3, 64)], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.body = nn.SequentialCell(blocks)
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(512, classes)

    def construct(self, x):
        return self.fc(self.mean(self.body(x), (2, 3)))


class AlexNet(nn.Cell):
    """torchvision's AlexNet (without dropout, so both frameworks compute the same step)."""

    def __init__(self, classes=1000):
        super().__init__()
        conv = lambda cin, cout, k, s, p: nn.Conv2d(cin, cout, k, stride=s, pad_mode="pad",  # noqa: E731
                                                    padding=p, has_bias=True)
        self.features = nn.SequentialCell([
            conv(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            conv(64, 192, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            conv(192, 384, 3, 1, 1), nn.ReLU(), conv(384, 256, 3, 1, 1), nn.ReLU(),
            conv(256, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2)])
        self.flatten = nn.Flatten()
        self.classifier = nn.SequentialCell([nn.Dense(256 * 6 * 6, 4096), nn.ReLU(),
                                             nn.Dense(4096, 4096), nn.ReLU(),
                                             nn.Dense(4096, classes)])

    def construct(self, x):
        return self.classifier(self.flatten(self.features(x)))


# ------------------------------------------------------------------------------- PyTorch twins
def torch_twin(torch, net):
    """The same network in PyTorch, built from our cells, with our initial weights."""
    tnn = torch.nn

    def convert(cell):
        if isinstance(cell, nn.Conv2d):
            w = cell.weight.asnumpy()
            m = tnn.Conv2d(w.shape[1], w.shape[0], w.shape[2:], stride=cell.stride,
                           padding=cell.padding[0],
                           bias=cell.bias is not None)
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(w))
                if cell.bias is not None:
                    m.bias.copy_(torch.from_numpy(cell.bias.asnumpy()))
            return m
        if isinstance(cell, nn.BatchNorm2d):
            return tnn.BatchNorm2d(cell.gamma.shape[0], eps=cell.eps, momentum=1.0 - cell.momentum)
        if isinstance(cell, nn.Dense):
            m = tnn.Linear(cell.in_channels, cell.out_channels)
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(cell.weight.asnumpy()))
                m.bias.copy_(torch.from_numpy(cell.bias.asnumpy()))
            return m
        if isinstance(cell, nn.ReLU):
            return tnn.ReLU()
        if isinstance(cell, nn.MaxPool2d):
            if cell.pad_mode != "valid":
                raise TypeError(f"MaxPool2d with pad_mode={cell.pad_mode!r} has no twin here")
            return tnn.MaxPool2d(cell.kernel_size, cell.stride)
        if isinstance(cell, nn.Flatten):
            return tnn.Flatten()
        raise TypeError(type(cell).__name__)

    class Twin(tnn.Module):
        def __init__(self, cell):
            super().__init__()
            self.cell = cell
            self.parts = tnn.ModuleDict()
            for name, sub in cell.cells_and_names():
                if name and isinstance(sub, (nn.Conv2d, nn.BatchNorm2d, nn.Dense, nn.ReLU,
                                             nn.MaxPool2d, nn.Flatten)):
                    self.parts[name.replace(".", "_")] = convert(sub)

        def run(self, cell, prefix, x):
            key = prefix.replace(".", "_")
            if key in self.parts:
                return self.parts[key](x)
            if isinstance(cell, nn.SequentialCell):
                for i, sub in enumerate(cell):
                    x = self.run(sub, f"{prefix}.{i}" if prefix else str(i), x)
                return x
            sub = lambda name: getattr(cell, name)   # noqa: E731
            at = lambda name: f"{prefix}.{name}" if prefix else name   # noqa: E731
            if isinstance(cell, ConvBNReLU):
                y = self.run(cell.bn, at("bn"), self.run(cell.conv, at("conv"), x))
                return torch.relu(y) if cell.relu is not None else y
            if isinstance(cell, BasicBlock):
                short = self.run(cell.down, at("down"), x) if cell.down is not None else x
                return torch.relu(self.run(cell.b, at("b"), self.run(cell.a, at("a"), x)) + short)
            if isinstance(cell, (Stack, ResNet18)):
                return self.run(sub("fc"), at("fc"), self.run(sub("body"), at("body"), x).mean((2, 3)))
            if isinstance(cell, AlexNet):
                y = self.run(cell.features, at("features"), x)
                return self.run(cell.classifier, at("classifier"), torch.flatten(y, 1))
            raise TypeError(type(cell).__name__)

        def forward(self, x):
            return self.run(self.cell, "", x)

    return Twin(net)


# ------------------------------------------------------------------------------- steps
def our_step(net, momentum):
    """value_and_grad + SGD, as a user writes it."""
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), 0.01, momentum=momentum)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return step


def torch_step(torch, model, momentum):
    """zero_grad, forward, backward, SGD step."""
    opt = torch.optim.SGD(model.parameters(), 0.01, momentum=momentum)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


# ------------------------------------------------------------------------------- seed 004
def seed004_net():
    """Seed 004's pipeline ResNet (examples/pipeline_resnet.py, its default size), one stage."""
    import os
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    if here not in sys.path:
        sys.path.insert(0, here)
    import pipeline_resnet
    return pipeline_resnet.resnet50(32, 10)


def seed004_twin(torch, net):
    """PyTorch twin of seed 004's ResNet: its cells run functionally with copies of our
    weights; "same" padding (TensorFlow's, odd padding after) is an explicit pad."""
    import pipeline_resnet as pr
    F = torch.nn.functional
    from minitorch_dist.ops.conv_geometry import same_pads as _same_pads
    params, bns = torch.nn.ParameterDict(), torch.nn.ModuleDict()
    for name, cell in net.cells_and_names():
        key = name.replace(".", "_")
        if isinstance(cell, nn.Conv2d):
            params[key] = torch.nn.Parameter(torch.from_numpy(cell.weight.asnumpy().copy()))
        elif isinstance(cell, nn.BatchNorm2d):
            bn = torch.nn.BatchNorm2d(cell.gamma.shape[0], eps=cell.eps, momentum=1.0 - cell.momentum)
            with torch.no_grad():
                bn.weight.copy_(torch.from_numpy(cell.gamma.asnumpy()))
                bn.bias.copy_(torch.from_numpy(cell.beta.asnumpy()))
            bns[key] = bn
        elif isinstance(cell, nn.Dense):
            params[key + "_w"] = torch.nn.Parameter(torch.from_numpy(cell.weight.asnumpy().copy()))
            params[key + "_b"] = torch.nn.Parameter(torch.from_numpy(cell.bias.asnumpy().copy()))

    def same(x, k, s, value=0.0):
        top, bottom = _same_pads(x.shape[2], k, s, 1)
        left, right = _same_pads(x.shape[3], k, s, 1)
        return F.pad(x, (left, right, top, bottom), value=value)

    def conv(cell, name, x):
        k, s = cell.kernel_size[0], cell.stride[0]
        return F.conv2d(same(x, k, s), params[name.replace(".", "_")], stride=s)

    def cbr(block, name, x, i, relu=True):
        y = bns[f"{name}_bn{i}"](conv(getattr(block, f"conv{i}"), f"{name}.conv{i}", x))
        return torch.relu(y) if relu else y

    def block(b, name, x):
        y = cbr(b, name.replace(".", "_"), x, 1)
        y = cbr(b, name.replace(".", "_"), y, 2)
        y = bns[f"{name.replace('.', '_')}_bn3"](conv(b.conv3, f"{name}.conv3", y))
        if isinstance(b, pr.ResidualBlockWithDown):
            short = bns[f"{name.replace('.', '_')}_bn_down_sample"](
                conv(b.conv_down_sample, f"{name}.conv_down_sample", x))
        else:
            short = x
        return torch.relu(y + short)

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params, self.bns = params, bns

        def forward(self, x):
            x = torch.relu(bns["head_bn1"](conv(net.head.conv1, "head.conv1", x)))
            x = F.max_pool2d(same(x, 3, 2, -float("inf")), 3, 2)
            for i in range(1, 5):
                layer = getattr(net, f"layer{i}")
                x = block(layer.a, f"layer{i}.a", x)
                for j, b in enumerate(layer.blocks):
                    x = block(b, f"layer{i}.blocks.{j}", x)
            x = x.mean((2, 3))
            return F.linear(x, params["fc_w"], params["fc_b"])

    return Twin()


MODELS = {  # name: (cell class, input shape without batch, batch, classes, momentum, steps)
    "stack": (Stack, (3, 32, 32), 32, 10, 0.0, 5),
    "alexnet": (AlexNet, (3, 224, 224), 16, 1000, 0.9, 1),
    "resnet18": (ResNet18, (3, 32, 32), 16, 10, 0.9, 1),
    "mlp": (mlp, (1, 28, 28), 64, 10, 0.0, 20),
    "cnn": (singa_cnn, (1, 28, 28), 64, 10, 0.9, 5),
    "seed004": (seed004_net, (3, 32, 32), 32, 10, 0.9, 5),
}


def compare(torch, name, rounds, device="CPU", batch=None):
    """Median over rounds of our step time / PyTorch's, with all the round ratios. On
    ``device="GPU"`` our network starts there and PyTorch's twin runs on CUDA where it can
    (on the CPU for a dry run on the virtual GPU); every timed block ends synchronized."""
    cls, shape, default_batch, classes, momentum, steps = MODELS[name]
    batch = batch or default_batch
    ms.set_context(device_target=device)
    ms.set_seed(0)
    net = cls()
    twin = seed004_twin(torch, net) if name == "seed004" else torch_twin(torch, net)
    where = "cuda" if device == "GPU" and torch.cuda.is_available() else "cpu"
    twin.to(where).train()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((batch,) + shape).astype(np.float32) for _ in range(4)]
    ys = [rng.integers(0, classes, batch) for _ in range(4)]
    ours = [(ms.Tensor(x), ms.Tensor(y.astype(np.int32))) for x, y in zip(xs, ys)]
    theirs = [(torch.from_numpy(x).to(where), torch.from_numpy(y).to(where))
              for x, y in zip(xs, ys)]
    ours_done, theirs_done = _synchronizer(ms.get_device(device)), \
        (torch.cuda.synchronize if where == "cuda" else (lambda: None))
    done = {"ours": ours_done, "torch": theirs_done}
    contenders = {"ours": (our_step(net, momentum), ours),
                  "torch": (torch_step(torch, twin, momentum), theirs)}
    losses = {k: float(np.asarray(fn(*b[0]).asnumpy() if k == "ours" else fn(*b[0]).item()))
              for k, (fn, b) in contenders.items()}     # also the warm-up
    for fn, b in contenders.values():
        fn(*b[1])
    ratios, names, counter = [], list(contenders), 0
    for r in range(rounds):
        times = {}
        for k in names[r % 2:] + names[:r % 2]:
            fn, batches = contenders[k]
            start = time.perf_counter()
            for i in range(steps):
                fn(*batches[(counter + i) % len(batches)])
            done[k]()
            times[k] = time.perf_counter() - start
        counter += steps
        ratios.append(times["ours"] / times["torch"])
    return statistics.median(ratios), ratios, losses


def _synchronizer(device):
    """A call that waits for everything queued on ``device`` (nothing to wait for on the host
    or the virtual GPU, whose arrays are host arrays)."""
    if device.is_host or device.virtual:
        return lambda: None
    return device.xp.cuda.Device().synchronize


def _check_gpu(torch, dry_run):
    """None when a GPU comparison can run as asked, else what stops it."""
    try:
        gpu = ms.get_device("GPU")
    except ValueError as err:
        return str(err)
    if dry_run:
        return None if gpu.virtual else "--dry-run is for the virtual GPU; a real GPU is here: drop it"
    if gpu.virtual or not torch.cuda.is_available():
        return ("--device GPU needs a CUDA GPU that both CuPy and PyTorch see (ours: "
                f"{gpu}{', virtual' if gpu.virtual else ''}; PyTorch CUDA available: "
                f"{torch.cuda.is_available()}); --dry-run checks the script on the virtual GPU "
                "(MINITORCH_DIST_VIRTUAL_GPU=1) with PyTorch on the CPU")
    return None


def main(argv=None):
    """Run the comparisons and print each ratio with its target."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS),
                        default=["stack", "alexnet", "resnet18", "seed004"])
    parser.add_argument("--device", choices=["CPU", "GPU"], default="CPU",
                        help="where both frameworks train (GPU: CuPy and PyTorch CUDA)")
    parser.add_argument("--batch", type=int, default=None,
                        help="batch size for every model (default: each model's own)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --device GPU: the virtual GPU and PyTorch on the CPU, to check "
                             "the script (its ratios measure no GPU)")
    args = parser.parse_args(argv)
    if args.dry_run and args.device != "GPU":
        parser.error("--dry-run goes with --device GPU")
    if args.batch is not None and args.batch < 1:
        parser.error(f"--batch must be at least 1, got {args.batch}")
    import torch
    if args.device == "GPU":
        problem = _check_gpu(torch, args.dry_run)
        if problem:
            parser.exit(2, f"bench_conv.py: {problem}\n")
    torch.set_num_threads(args.threads)
    ms.set_context(num_threads=args.threads)
    print(f"threads {args.threads} (torch {torch.get_num_threads()}), numpy {np.__version__}, "
          f"torch {torch.__version__}, device {args.device}"
          + (" (DRY RUN: virtual GPU, PyTorch on the CPU; not a GPU measurement)"
             if args.dry_run else ""))
    targets = GPU_TARGETS if args.device == "GPU" else TARGETS
    rows = []
    try:
        for name in args.models:
            med, ratios, losses = compare(torch, name, args.rounds, args.device, args.batch)
            target = None if args.dry_run else targets.get(name)
            if target is not None and args.device == "GPU" and args.batch != GPU_TARGET_BATCH:
                verdict = f"(the target, <= {target}, is for --batch {GPU_TARGET_BATCH})"
            elif target is None:
                verdict = "no target"
            else:
                verdict = f"target <= {target}  {'pass' if med <= target else 'MISS'}"
            print(f"{name:9s} ours / pytorch = {med:5.2f}  [{min(ratios):.2f}, {max(ratios):.2f}]  "
                  f"{verdict}   (first loss {losses['ours']:.4f} vs {losses['torch']:.4f})",
                  flush=True)
            rows.append((name, med, ratios))
    finally:
        ms.set_context(device_target="CPU")
    return rows


if __name__ == "__main__":
    main()
