"""SINGA's distributed MNIST CNN (seed 003): data parallel training with ``DistOpt``.

Every rank holds the whole CNN and trains on its own contiguous shard of the data; ``DistOpt``
makes the gradients agree before each update, in one of five ways (``--dist-option``):
fp32, fp16, partialUpdate, sparseTopK, sparseThreshold. Launch it like SINGA's mnist_dist.py::

    python -m minitorch_dist.run -n 2 examples/singa_mnist_dist.py [--epochs 3]
    mpiexec --allow-run-as-root -n 2 python examples/singa_mnist_dist.py   # SINGA's form, as root
    python examples/singa_mnist_dist.py                  # one process: a world of one
    python examples/singa_mnist_multiprocess.py 2        # SINGA's multiprocessing launch

As root (in containers) plain Open MPI needs ``mpiexec --allow-run-as-root -n 2 ...``; the
launcher adds that flag itself.

By default the data are scikit-learn's 8x8 digits upsampled to 28x28 (nothing downloads);
``--data-dir`` reads real MNIST IDX files. Rank 0 prints the seed's lines every epoch, with
the loss and the correct counts summed over ranks by ``DistOpt.all_reduce`` (the training
loss is, as in SINGA, the sum of the per-batch mean losses of all ranks), and at the end::

    SUMMARY option=fp32 world=2 steps=220 eval_acc=0.952514 bytes_per_step=1724320

where ``bytes_per_step`` is what this rank put on the wire per training step.
"""
import argparse
import math
import os
import sys

if any(int(os.environ.get(v) or 1) > 1 for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")   # several ranks share the cores: one BLAS thread each

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402
from minitorch_dist.train.callback.progress_bar import terminal_output  # noqa: E402

import minitorch_dist as ms  # noqa: E402
import minitorch_dist.dataset as ds  # noqa: E402
from minitorch_dist import log as ms_log, nn  # noqa: E402
from minitorch_dist.parallel import DistOpt  # noqa: E402
from mnist_cnn import CNN as SingaCNN  # noqa: E402  (a sibling example: same folder)

DIST_OPTIONS = ("fp32", "fp16", "partialUpdate", "sparseTopK", "sparseThreshold")
# sparseTopK: the fraction of entries sent; sparseThreshold: the smallest |gradient| sent
DEFAULT_SPARS = {"sparseTopK": 0.05, "sparseThreshold": 1e-2}
IMG_SIZE, NUM_CLASSES = 28, 10


class CNN(SingaCNN):
    """SINGA's CNN (from mnist_cnn.py) with SINGA's model API: a loss, an optimizer and
    ``train_one_batch``."""

    def __init__(self, num_classes=NUM_CLASSES, num_channels=1):
        super().__init__(num_classes, num_channels)
        self.softmax_cross_entropy = nn.CrossEntropyLoss()
        self.optimizer = None

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer

    def train_one_batch(self, x, y, dist_option="fp32", spars=0):
        out = self(x)
        loss = self.softmax_cross_entropy(out, y)
        # the five ways DistOpt can agree on the gradients (see docs/distributed.md, DistOpt)
        if dist_option == "fp32":
            self.optimizer(loss)
        elif dist_option == "fp16":
            self.optimizer.backward_and_update_half(loss)
        elif dist_option == "partialUpdate":
            self.optimizer.backward_and_partial_update(loss)
        elif dist_option == "sparseTopK":
            self.optimizer.backward_and_sparse_update(loss, topK=True, spars=spars)
        elif dist_option == "sparseThreshold":
            self.optimizer.backward_and_sparse_update(loss, topK=False, spars=spars)
        else:
            raise ValueError(f"train_one_batch: dist_option must be one of {DIST_OPTIONS}, "
                             f"got {dist_option!r}")
        return out, loss


def data_partition(dataset_x, dataset_y, global_rank, world_size):
    """Rank ``global_rank``'s contiguous share (the last ``N % world_size`` rows are dropped)."""
    data_per_rank = dataset_x.shape[0] // world_size
    idx_start = global_rank * data_per_rank
    idx_end = (global_rank + 1) * data_per_rank
    return dataset_x[idx_start:idx_end], dataset_y[idx_start:idx_end]


def load_dataset(data_dir=None):
    """``(train_x, train_y, test_x, test_y)``: float32 NCHW images normalised like MNIST, int32
    labels. From MNIST IDX files in ``data_dir``, else the digits upsampled to 28x28."""
    if data_dir is None:
        parts = [ds.load_digits(split) for split in ("train", "test")]
        parts = [(ds.upsample_to_mnist(x), y) for x, y in parts]
    else:
        from minitorch_dist.dataset.mnist import read_mnist
        parts = [read_mnist(data_dir, prefix) for prefix in ("train", "t10k")]
        if any(p is None for p in parts):
            raise SystemExit(f"--data-dir {data_dir}: MNIST train-* and t10k-* IDX files needed")
    arrays = []
    for images, labels in parts:
        x = images.transpose(0, 3, 1, 2).astype(np.float32) / 255.0   # NHWC uint8 -> NCHW
        arrays += [(x - 0.1307) / 0.3081, labels.astype(np.int32)]
    return tuple(arrays)


def train_mnist_cnn(nccl_id=None, local_rank=None, world_size=None, dist_option="fp32",
                    spars=None, max_epoch=10, batch_size=32, lr=0.005, data_dir=None,
                    max_steps=None, buff_size=4194304, verbose=True):
    """The whole training of one rank; returns rank-independent results as a dict.

    With ``nccl_id`` (a ``UniqueId``, SINGA's ``NcclIdHolder``) this process joins the
    multiprocessing launch as ``local_rank`` of ``world_size``; without, it joins the MPI job
    it was started in (or is a world of one).
    """
    if spars is None:
        spars = DEFAULT_SPARS.get(dist_option, 0)
    # the same seed on every rank (DistOpt also broadcasts rank 0's parameters)
    seed = 0
    ms.set_seed(seed)
    np.random.seed(seed)

    model = CNN()
    sgd = nn.SGD(model.trainable_params(), lr, momentum=0.9, weight_decay=1e-5)
    sgd = DistOpt(sgd, nccl_id=nccl_id, local_rank=local_rank, world_size=world_size,
                  buffSize=buff_size)
    model.set_optimizer(sgd)
    rank, world = sgd.global_rank, sgd.world_size
    say = print if verbose and rank == 0 else (lambda *a, **k: None)

    train_x, train_y, test_x, test_y = load_dataset(data_dir)
    train_x, train_y = data_partition(train_x, train_y, sgd.global_rank, sgd.world_size)
    test_x, test_y = data_partition(test_x, test_y, sgd.global_rank, sgd.world_size)
    num_train_batch = train_x.shape[0] // batch_size
    if num_train_batch == 0:
        raise ValueError(f"--batch-size {batch_size} exceeds the {train_x.shape[0]} training "
                         f"samples of each of the {world} ranks")
    idx = np.arange(train_x.shape[0], dtype=np.int32)

    steps, eval_acc, last_loss = 0, 0.0, float("nan")
    for epoch in range(max_epoch):
        say(f"Starting Epoch {epoch}:", flush=True)
        model.set_train(True)
        np.random.shuffle(idx)       # the same permutation on every rank (same seed)
        train_correct, train_loss, seen = 0, 0.0, 0
        # a progress bar when the output is a terminal (off in logs and under mpiexec)
        for b in tqdm(range(num_train_batch), desc=f"epoch {epoch}", unit="step", leave=False,
                      disable=not (verbose and rank == 0 and terminal_output())):
            if max_steps is not None and steps >= max_steps:
                break
            batch = idx[b * batch_size: (b + 1) * batch_size]
            x, y = train_x[batch], train_y[batch]
            out, loss = model.train_one_batch(ms.Tensor(x), ms.Tensor(y), dist_option, spars)
            train_correct += int((out.asnumpy().argmax(axis=1) == y).sum())
            train_loss += float(loss.asnumpy())
            seen += len(y)
            steps += 1
        totals = sgd.all_reduce(np.array([train_loss, train_correct, seen], np.float64))
        last_loss = float(totals[0])
        say(f"Training loss = {totals[0]:f}, training accuracy = {totals[1] / totals[2]:f}",
            flush=True)

        model.set_train(False)
        test_correct = 0
        with ms.no_grad():
            for b in range(0, test_x.shape[0], batch_size):
                out = model(ms.Tensor(test_x[b:b + batch_size])).asnumpy()
                test_correct += int((out.argmax(axis=1) == test_y[b:b + batch_size]).sum())
        totals = sgd.all_reduce(np.array([test_correct, test_x.shape[0]], np.float64))
        eval_acc = float(totals[0] / totals[1])
        say(f"Evaluation accuracy = {eval_acc:f}", flush=True)
        if max_steps is not None and steps >= max_steps:
            break

    option_stats = sgd.comm_stats()["by_option"].get(dist_option, {})
    bytes_per_step = option_stats.get("bytes_sent", 0) / max(1, option_stats.get("steps", 0))
    say(f"SUMMARY option={dist_option} world={world} steps={steps} eval_acc={eval_acc:f} "
        f"bytes_per_step={bytes_per_step:.0f}", flush=True)
    return {"eval_acc": eval_acc, "train_loss": last_loss, "steps": steps,
            "bytes_per_step": bytes_per_step, "world_size": world}


# ---- command line -----------------------------------------------------------------------------
def build_parser(description=__doc__):
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(parser)
    return parser


def add_training_arguments(parser):
    parser.add_argument("--dist-option", "--dist_option", default="fp32", choices=DIST_OPTIONS,
                        help="how DistOpt exchanges gradients (default fp32)")
    parser.add_argument("--spars", type=float, default=None,
                        help="sparseTopK: fraction sent, 0 < spars <= 1 (default 0.05); "
                             "sparseThreshold: smallest |gradient| sent, > 0 (default 1e-2)")
    parser.add_argument("--epochs", type=int, default=10, help="(SINGA: 10)")
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32, help="per rank (default 32)")
    parser.add_argument("--lr", type=float, default=0.005, help="SGD learning rate (SINGA: 0.005)")
    parser.add_argument("--data-dir", "--data_dir", "--data_path", "--data-path", default=None,
                        help="MNIST IDX files (default: scikit-learn's digits, upsampled)")
    parser.add_argument("--max-steps", "--max_steps", type=int, default=None,
                        help="stop after this many training steps (quick runs)")
    parser.add_argument("--buff-size", "--buff_size", type=int, default=4194304,
                        help="DistOpt buffSize in bytes: fusion bucket and partialUpdate chunk")


def options_from_args(parser, args):
    """The keyword arguments of ``train_mnist_cnn``, or ``parser.error`` (exit 2) if invalid."""
    for name in ("epochs", "batch_size", "buff_size", "max_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"--lr must be a positive number, got {args.lr}")
    spars = args.spars
    if args.dist_option == "sparseTopK" and spars is not None and not 0 < spars <= 1:
        parser.error(f"--spars {spars} is out of range for sparseTopK: expected a fraction "
                     "with 0 < spars <= 1")
    if args.dist_option == "sparseThreshold" and spars is not None \
            and not (spars > 0 and math.isfinite(spars)):
        parser.error(f"--spars {spars} is out of range for sparseThreshold: expected a "
                     "magnitude threshold > 0")
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        parser.error(f"--data-dir {args.data_dir} is not a directory")
    return {"dist_option": args.dist_option, "spars": spars, "max_epoch": args.epochs,
            "batch_size": args.batch_size, "lr": args.lr, "data_dir": args.data_dir,
            "max_steps": args.max_steps, "buff_size": args.buff_size}


def main(argv=None):
    parser = build_parser()
    options = options_from_args(parser, parser.parse_args(argv))
    ms_log.rank0_progress_only()   # under the launcher: rank 0's lines only (as SINGA prints)
    train_mnist_cnn(**options)


if __name__ == "__main__":
    sys.exit(main())
