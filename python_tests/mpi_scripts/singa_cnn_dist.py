"""Train a small SINGA-style ResNet or Xception on synthetic CIFAR-10 files, the way
SINGA's autograd examples do: ``out = model(tx)``, ``loss = autograd.softmax_cross_entropy``,
``sgd.backward_and_update(loss)`` with an ``opt.DistOpt`` that finds the parameters on the
tape (no Model).

    python singa_cnn_dist.py MODEL OUT [--steps N]                 # under mpiexec -n W
    python singa_cnn_dist.py MODEL OUT --multiprocess W            # SINGA's multiprocessing
    python singa_cnn_dist.py MODEL OUT --replicas W                # one process, W replicas

Each rank takes its contiguous share of every global batch. ``--replicas W`` is the
one-process reference with SINGA's data-parallel semantics: each replica's gradient comes
from its own share (batch norm uses that share's statistics, and replica 0's running
statistics are the ones kept), the gradients are averaged and one SGD step is applied.
Rank 0 (replica 0) writes every state (parameters and running statistics) to ``OUT``
(.npz) and prints ``DONE steps=N loss=...``.
"""
import argparse
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "singa"))

from minitorch_dist.singa import autograd, device, opt, singa_wrap as singa, tensor  # noqa: E402

GLOBAL_BATCH = 8


def build(name):
    """The small network, seeded alike on every rank."""
    device.get_default_device().SetRandSeed(0)
    if name == "resnet":
        from resnet import resnet18
        return resnet18(num_classes=10, width=4)
    from xceptionnet import Xception
    return Xception(num_classes=10, widths=(4, 8, 8, 8, 8, 8, 8, 8), middle=1)


def data(steps):
    """``steps`` global batches read back from a synthetic CIFAR-10 ``data_batch_1`` (the
    pickle format SINGA's loaders read), normalised to [0, 1]."""
    from upstream_data import write_cifar10
    folder = write_cifar10(tempfile.mkdtemp(prefix="singa-cifar-"), train=steps * GLOBAL_BATCH,
                           test=GLOBAL_BATCH, seed=1)
    with open(os.path.join(folder, "data_batch_1"), "rb") as f:
        batch = pickle.load(f, encoding="latin1")
    shutil.rmtree(folder)
    x = batch["data"].reshape(-1, 3, 32, 32).astype(np.float32) / 255
    return x, np.asarray(batch["labels"], np.int32)


def shard(x, y, step, rank, world):
    per = GLOBAL_BATCH // world
    start = step * GLOBAL_BATCH + rank * per
    return x[start:start + per], y[start:start + per]


def save(model, out, losses):
    np.savez(out, **{k: tensor.to_numpy(v) for k, v in model.get_states().items()})
    print(f"DONE steps={len(losses)} loss={' '.join('%.6f' % v for v in losses)}", flush=True)


def distributed(name, out, steps, nccl_id=None, rank=None, world=None):
    """One rank of an MPI job (nccl_id None) or of a multiprocessing launch."""
    sgd = opt.DistOpt(opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5), nccl_id=nccl_id,
                      local_rank=rank, world_size=world)
    model = build(name)
    x, y = data(steps)
    autograd.training = True
    losses = []
    for step in range(steps):
        bx, by = shard(x, y, step, sgd.global_rank, sgd.world_size)
        loss = autograd.softmax_cross_entropy(model(tensor.from_numpy(bx)),
                                              tensor.from_numpy(by))
        sgd.backward_and_update(loss)
        losses.append(float(tensor.to_numpy(loss)[0]))
    if sgd.global_rank == 0:
        save(model, out, losses)


def replicas(name, out, steps, world):
    """One process playing ``world`` data-parallel replicas (the reference)."""
    sgd = opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5)
    model = build(name)
    x, y = data(steps)
    model(tensor.from_numpy(x[:2]))     # creates the layers (evaluation mode: no state change)
    autograd.training = True
    losses = []
    for step in range(steps):
        stats = {k: tensor.to_numpy(v) for k, v in model.get_states().items()
                 if k.endswith(("running_mean", "running_var"))}
        total, first = {}, None
        for rank in reversed(range(world)):        # replica 0 last: its statistics stay
            model.set_states({**{k: tensor.to_numpy(v) for k, v in model.get_states().items()},
                              **stats})
            bx, by = shard(x, y, step, rank, world)
            loss = autograd.softmax_cross_entropy(model(tensor.from_numpy(bx)),
                                                  tensor.from_numpy(by))
            for p, g in autograd.backward(loss):
                total[id(p)] = (p, total[id(p)][1] + g.data if id(p) in total else g.data)
            first = float(tensor.to_numpy(loss)[0])
        for p, g in total.values():
            sgd.update(p, tensor.from_numpy(g / world))
        sgd.step()
        losses.append(first)
    save(model, out, losses)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["resnet", "xception"])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--multiprocess", type=int, default=0)
    parser.add_argument("--replicas", type=int, default=0)
    args = parser.parse_args()
    if args.replicas:
        replicas(args.model, args.out, args.steps, args.replicas)
    elif args.multiprocess:
        nccl_id = singa.NcclIdHolder()
        procs = [multiprocessing.Process(target=distributed, args=(
            args.model, args.out, args.steps, nccl_id, r, args.multiprocess))
            for r in range(args.multiprocess)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        sys.exit(max(p.exitcode for p in procs))
    else:
        distributed(args.model, args.out, args.steps)


if __name__ == "__main__":
    main()
