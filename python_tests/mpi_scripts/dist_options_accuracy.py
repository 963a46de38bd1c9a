"""Every DistOpt option, side by side: held-out accuracy and bytes per step on the digits.

    python -m minitorch_dist.run -n 2 --timeout 120 dist_options_accuracy.py [--epochs 30]

In one job, a 64-128-10 MLP on scikit-learn's 8x8 digits is trained from the same
initialisation, with the same shuffles and for the same epochs, once per option (fp32,
fp16, partialUpdate, sparseTopK, sparseThreshold), each by ``DistOpt(SGD(momentum))`` with a
fresh optimizer. Rank 0 prints one line per option::

    OPTION sparseTopK spars=0.01 eval_acc=0.977654 bytes_per_step=768 ratio=0.0200 world=2 epochs=30

``eval_acc`` is the accuracy on the whole held-out split (each rank scores its share, the
counts are summed), ``bytes_per_step`` what one rank put on the wire per training step
(``DistOpt.comm_stats()["by_option"]``), ``ratio`` that divided by fp32's. partialUpdate
uses a ``buffSize`` of 1/``--partial-chunks`` of the model, so it averages that share of the
parameters per step (with the default 4 MB buffer the whole small model would be averaged,
which is exactly fp32).
"""
import argparse
import math
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before NumPy starts its BLAS pool

import numpy as np  # noqa: E402

OPTIONS = ("fp32", "fp16", "partialUpdate", "sparseTopK", "sparseThreshold")


def load_data():
    from minitorch_dist.dataset import load_digits
    arrays = []
    for split in ("train", "test"):
        x, y = load_digits(split, as_mnist_shape=False)
        arrays += [(x / 16.0).astype(np.float32), y.astype(np.int32)]
    return arrays


def shard(x, y, rank, world):
    per_rank = len(x) // world
    return x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]


def build_mlp(seed):
    import minitorch_dist as ms
    from minitorch_dist import nn
    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10))


def exchange(opt, loss, option, spars):
    """SINGA's ``train_one_batch`` dispatch."""
    if option == "fp32":
        opt(loss)
    elif option == "fp16":
        opt.backward_and_update_half(loss)
    elif option == "partialUpdate":
        opt.backward_and_partial_update(loss)
    else:
        opt.backward_and_sparse_update(loss, topK=option == "sparseTopK", spars=spars)


def train_one_option(option, spars, args, data):
    import minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.parallel import DistOpt

    net = build_mlp(args.seed)
    params = net.trainable_params()
    model_bytes = sum(p.size * 4 for p in params)
    buff_size = 4194304
    if option == "partialUpdate":
        buff_size = math.ceil(model_bytes / args.partial_chunks)
    opt = DistOpt(nn.SGD(params, args.lr, momentum=0.9, weight_decay=1e-5), buffSize=buff_size)
    rank, world = opt.global_rank, opt.world_size
    train_x, train_y, test_x, test_y = data
    train_x, train_y = shard(train_x, train_y, rank, world)
    test_x, test_y = shard(test_x, test_y, rank, world)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(args.seed)      # the same shuffles for every option and rank
    batches = len(train_x) // args.batch_size
    for _ in range(args.epochs):
        order = rng.permutation(len(train_x))
        for b in range(batches):
            pick = order[b * args.batch_size:(b + 1) * args.batch_size]
            loss = loss_fn(net(ms.Tensor(train_x[pick])), ms.Tensor(train_y[pick]))
            exchange(opt, loss, option, spars)
    with ms.no_grad():
        correct = int((net(ms.Tensor(test_x)).asnumpy().argmax(axis=1) == test_y).sum())
    counts = opt.all_reduce(np.array([correct, len(test_y)], np.float64))
    stats = opt.comm_stats()["by_option"][option]
    return float(counts[0] / counts[1]), stats["bytes_sent"] / stats["steps"], world


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topk-spars", type=float, default=0.01, help="fraction sent")
    parser.add_argument("--threshold-spars", type=float, default=0.01, help="smallest |g| sent")
    parser.add_argument("--partial-chunks", type=int, default=4,
                        help="partialUpdate averages 1/N of the parameters per step")
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=OPTIONS)
    args = parser.parse_args()

    from minitorch_dist.communication import get_rank, init
    init()
    data = load_data()
    spars_of = {"sparseTopK": args.topk_spars, "sparseThreshold": args.threshold_spars}
    fp32_bytes = None
    for option in args.options:
        spars = spars_of.get(option)
        acc, per_step, world = train_one_option(option, spars, args, data)
        if option == "fp32":
            fp32_bytes = per_step
        ratio = f"{per_step / fp32_bytes:.4f}" if fp32_bytes else "-"
        if get_rank() == 0:
            print(f"OPTION {option} spars={'-' if spars is None else spars} eval_acc={acc:f} "
                  f"bytes_per_step={per_step:.0f} ratio={ratio} world={world} "
                  f"epochs={args.epochs}", flush=True)


if __name__ == "__main__":
    main()
