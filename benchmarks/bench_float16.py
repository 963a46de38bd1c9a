"""float16 against float32 step time on the CPU, side by side in one run.

Two workloads, each run in float16 and in float32 in interleaved rounds (the order rotates
every round); the figure is the median over rounds of (float16 time / float32 time):

* **Wide&Deep's MatMul**: ``MatMul(transpose_b=True)`` of a 1000x3120 batch by a 1024x3120
  weight (the first layer of MindSpore's Wide&Deep MLP), forward and both backward products
  (a fixed upstream gradient is fed to ``ms.grad``'s tape through ``Tensor.backward``).
  Target <= 1.5.
* **SINGA's CNN step** (``examples/singa/mnist_cnn.py``'s model, SINGA's ``-p float16``):
  the model compiled on a float16 input with ``opt.SGD(..., dtype=float16)`` under
  ``DistOpt`` (a world of one), one ``model(tx, ty)`` training step on batch 32 of the next
  of 8 random batches. Target <= 1.5.

    python benchmarks/bench_float16.py [--rounds 7] [--threads 1] [--only matmul|cnn]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def matmul_step(dtype, rng):
    """One forward+backward of Wide&Deep's first MatMul in ``dtype``; returns a callable."""
    import minitorch_dist as ms
    from minitorch_dist import ops
    x = ms.Tensor(rng.standard_normal((1000, 3120)).astype(dtype), requires_grad=True)
    w = ms.Tensor((rng.standard_normal((1024, 3120)) * 0.02).astype(dtype), requires_grad=True)
    g = ms.Tensor(rng.standard_normal((1000, 1024)).astype(dtype))
    matmul = ops.MatMul(transpose_b=True)

    def step():
        x.grad = w.grad = None
        matmul(x, w).backward(g)
    return step


def singa_cnn_step(dtype, batch=32):
    """One training step of SINGA's MNIST CNN with parameters and data in ``dtype``."""
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "singa"))
    from minitorch_dist.singa import device, tensor, opt
    from mnist_cnn import CNN
    net = CNN()
    sgd = opt.DistOpt(opt.SGD(lr=0.005, momentum=0.9, weight_decay=1e-5, dtype=dtype))
    net.set_optimizer(sgd)
    dev = device.create_cuda_gpu_on(sgd.local_rank)
    dev.SetRandSeed(0)
    np.random.seed(0)
    tx = tensor.Tensor((batch, 1, 28, 28), dev, dtype)
    ty = tensor.Tensor((batch, 10), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=False, sequential=True)
    net.train()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((batch, 1, 28, 28)).astype(dtype) for _ in range(8)]
    ys = [np.eye(10, dtype=np.int32)[rng.integers(0, 10, batch)] for _ in range(8)]
    state = {"i": 0}

    def step():
        i = state["i"] = (state["i"] + 1) % len(xs)
        tx.copy_from_numpy(xs[i])
        ty.copy_from_numpy(ys[i])
        net(tx, ty, "fp32", 0)
    return step


def ratio(make, rounds, steps):
    """Median over rounds of float16 time / float32 time, and all the round ratios."""
    contenders = {"float16": make(np.float16), "float32": make(np.float32)}
    for step in contenders.values():      # warm-up: buffers, pools, first-call costs
        for _ in range(2):
            step()
    ratios = []
    names = list(contenders)
    for r in range(rounds):
        times = {}
        for name in names[r % 2:] + names[:r % 2]:
            start = time.perf_counter()
            for _ in range(steps):
                contenders[name]()
            times[name] = time.perf_counter() - start
        ratios.append(times["float16"] / times["float32"])
    return statistics.median(ratios), ratios


def main(argv=None):
    """Run the benchmark and print each ratio with its target."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per process (ms.set_context(num_threads=...))")
    parser.add_argument("--only", choices=("matmul", "cnn"), default=None)
    args = parser.parse_args(argv)
    import minitorch_dist as ms
    if args.threads:
        ms.set_context(num_threads=args.threads)
    from minitorch_dist.backend import threads
    print(f"threads: {threads.get_num_threads()}, numpy {np.__version__}")
    rows = []
    if args.only in (None, "matmul"):
        rng = np.random.default_rng(0)
        med, all_r = ratio(lambda dt: matmul_step(dt, rng), args.rounds, 3)
        rows.append(("Wide&Deep MatMul fwd+bwd, float16 / float32", med, all_r, 1.5))
    if args.only in (None, "cnn"):
        med, all_r = ratio(singa_cnn_step, args.rounds, 10)
        rows.append(("SINGA CNN step (-p float16), float16 / float32", med, all_r, 1.5))
    for name, med, all_r, target in rows:
        verdict = "pass" if med <= target else "MISS"
        print(f"{name:48s} {med:6.2f}  [{min(all_r):.2f}, {max(all_r):.2f}]  "
              f"target <= {target}  {verdict}")
    return rows


if __name__ == "__main__":
    main()
