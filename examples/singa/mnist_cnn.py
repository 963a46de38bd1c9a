"""The CNN of SINGA's distributed-training guide (seed 003), written for SINGA, run here.

The model, ``data_partition`` and the body of ``train_mnist_cnn`` are the guide's code;
only the imports differ (``from singa import ...`` -> ``from minitorch_dist.singa import
...``), plus a data loader (``mnist_data.py``) and flags for small runs. The same function
serves the guide's three launches:

    python examples/singa/mnist_cnn.py                     # one process (a world of one)
    python -m minitorch_dist.run -n 2 examples/singa/mnist_dist.py   # MPI (as root, plain
                                             # mpiexec needs --allow-run-as-root)
    python examples/singa/mnist_multiprocess.py 2          # multiprocessing + NcclIdHolder

Rank 0 prints the guide's lines every epoch; the loss is, as in SINGA, the sum of the
per-batch mean losses of all ranks. Flags: ``--epochs`` (10), ``--batch-size`` (32 per
rank), ``--batches-per-epoch`` (all), ``--dist-option`` (fp32, fp16, partialUpdate,
sparseTopK, sparseThreshold) with ``--spars``, ``--no-graph``, ``--data-dir`` (MNIST IDX
files; default scikit-learn's digits), ``--save-params FILE`` (rank 0 writes the final
parameters as ``.npz``). Without a GPU, ``device.create_cuda_gpu_on`` uses the host
(``MINITORCH_DIST_VIRTUAL_GPU=1`` gives an emulated GPU instead) and ``use_graph=True`` runs
eagerly: the facade says each once, shown here as one ``note:`` line on rank 0.
"""
import argparse
import os
import sys
import warnings

if any(int(os.environ.get(v) or 1) > 1 for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")   # several ranks share the cores: one BLAS thread each

import numpy as np  # noqa: E402

# SINGA: from singa import device, tensor, layer, model, opt
from minitorch_dist.singa import device, tensor, layer, model, opt  # noqa: E402

from mnist_data import load_dataset  # noqa: E402   (the data loader, a sibling file)

# The facade's notes about what this machine lacks (no CUDA GPU, no graph compiler) are
# warnings meant to be read once: shown as one line each (not Python's two-line warning
# with its source line), on rank 0 only, where every rank would say the same. Other
# warnings keep Python's format.
_FACADE_NOTES = ("device.create_cuda_gpu_on(", "singa Model.compile(use_graph=True)")
_show_warning = warnings.showwarning


def _show_facade_note(message, category, filename, lineno, file=None, line=None):
    if not str(message).startswith(_FACADE_NOTES):
        return _show_warning(message, category, filename, lineno, file, line)
    if int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or 0) == 0:
        print(f"note: {message}", file=file or sys.stderr, flush=True)


warnings.showwarning = _show_facade_note

IMG_SIZE = 28
num_classes = 10
DIST_OPTIONS = ("fp32", "fp16", "partialUpdate", "sparseTopK", "sparseThreshold")


# ---- the guide's model --------------------------------------------------------------------
class CNN(model.Model):

    def __init__(self, num_classes=10, num_channels=1):
        super(CNN, self).__init__()
        self.conv1 = layer.Conv2d(num_channels, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.linear1 = layer.Linear(500)
        self.linear2 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.conv1(x)
        y = self.pooling1(y)
        y = self.conv2(y)
        y = self.pooling2(y)
        y = self.flatten(y)
        y = self.linear1(y)
        y = self.relu(y)
        y = self.linear2(y)
        return y

    def train_one_batch(self, x, y, dist_option='fp32', spars=0):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        # the options of distributed training (the guide's "Optimizations" section)
        if dist_option == 'fp32':
            self.optimizer(loss)
        elif dist_option == 'fp16':
            self.optimizer.backward_and_update_half(loss)
        elif dist_option == 'partialUpdate':
            self.optimizer.backward_and_partial_update(loss)
        elif dist_option == 'sparseTopK':
            self.optimizer.backward_and_sparse_update(loss,
                                                      topK=True,
                                                      spars=spars)
        elif dist_option == 'sparseThreshold':
            self.optimizer.backward_and_sparse_update(loss,
                                                      topK=False,
                                                      spars=spars)
        return out, loss


def data_partition(dataset_x, dataset_y, global_rank, world_size):
    data_per_rank = dataset_x.shape[0] // world_size
    idx_start = global_rank * data_per_rank
    idx_end = (global_rank + 1) * data_per_rank
    return dataset_x[idx_start:idx_end], dataset_y[idx_start:idx_end]


def reduce_variable(variable, dist_opt, reducer):
    """Sum a host number over the ranks through a 1-element device tensor (SINGA's idiom)."""
    reducer.copy_from_numpy(np.array([variable], dtype=np.float32))
    dist_opt.all_reduce(reducer.data)
    dist_opt.wait()
    return float(tensor.to_numpy(reducer)[0])


def correct_count(out, y):
    """Rows whose largest logit is the labelled class (``y`` one-hot)."""
    return int(np.sum(np.argmax(tensor.to_numpy(out), 1) == np.argmax(y, 1)))


# ---- the guide's training function ---------------------------------------------------------
def train_mnist_cnn(nccl_id=None, local_rank=None, world_size=None, max_epoch=10,
                    batch_size=32, graph=True, dist_option='fp32', spars=0, data_dir=None,
                    batches_per_epoch=None, save_params=None):
    # create the model
    model = CNN()

    sgd = opt.SGD(lr=0.005, momentum=0.9, weight_decay=1e-5)
    if nccl_id is None:         # MPI, or a plain process (a world of one)
        sgd = opt.DistOpt(sgd)
    else:                       # the multiprocessing launch
        sgd = opt.DistOpt(sgd, nccl_id=nccl_id, local_rank=local_rank, world_size=world_size)
    model.set_optimizer(sgd)
    dev = device.create_cuda_gpu_on(sgd.local_rank)

    # the same random seed on every rank (before compile, which creates the parameters)
    seed = 0
    dev.SetRandSeed(seed)
    np.random.seed(seed)

    # load and partition the data for training/validation
    train_x, train_y, test_x, test_y = load_dataset(data_dir)
    train_x, train_y = data_partition(train_x, train_y,
                                      sgd.global_rank, sgd.world_size)
    test_x, test_y = data_partition(test_x, test_y,
                                    sgd.global_rank, sgd.world_size)
    num_train_batch = train_x.shape[0] // batch_size
    num_test_batch = test_x.shape[0] // batch_size
    if num_train_batch == 0 or num_test_batch == 0:
        raise ValueError(f"--batch-size {batch_size} exceeds the {test_x.shape[0]} test or "
                         f"{train_x.shape[0]} training samples of each of the "
                         f"{sgd.world_size} ranks")
    if batches_per_epoch is not None:
        num_train_batch = min(num_train_batch, batches_per_epoch)
    idx = np.arange(train_x.shape[0], dtype=np.int32)

    # initialise the model's parameters (on every rank: DistOpt then agrees on rank 0's)
    tx = tensor.Tensor((batch_size, 1, IMG_SIZE, IMG_SIZE), dev, tensor.float32)
    ty = tensor.Tensor((batch_size, num_classes), dev, tensor.int32)
    model.compile([tx], is_train=True, use_graph=graph, sequential=True)
    reducer = tensor.Tensor((1,), dev, tensor.float32)
    say = print if sgd.global_rank == 0 else (lambda *args, **kwargs: None)

    for epoch in range(max_epoch):
        say('Starting Epoch %d:' % epoch)
        np.random.shuffle(idx)       # the same permutation on every rank (same seed)

        # training: backpropagation and distributed SGD
        train_correct, train_loss = 0, 0.0
        model.train()
        for b in range(num_train_batch):
            x = train_x[idx[b * batch_size: (b + 1) * batch_size]]
            y = train_y[idx[b * batch_size: (b + 1) * batch_size]]
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            # Train the model
            out, loss = model(tx, ty, dist_option, spars)
            train_correct += correct_count(out, y)
            train_loss += float(tensor.to_numpy(loss)[0])
        train_correct = reduce_variable(train_correct, sgd, reducer)
        train_loss = reduce_variable(train_loss, sgd, reducer)
        say('Training loss = %f, training accuracy = %f' %
            (train_loss, train_correct / (num_train_batch * batch_size * sgd.world_size)),
            flush=True)

        # evaluation
        test_correct = 0
        model.eval()
        for b in range(num_test_batch):
            x = test_x[b * batch_size: (b + 1) * batch_size]
            y = test_y[b * batch_size: (b + 1) * batch_size]
            tx.copy_from_numpy(x)
            out = model(tx)
            test_correct += correct_count(out, y)
        test_correct = reduce_variable(test_correct, sgd, reducer)
        say('Evaluation accuracy = %f' %
            (test_correct / (num_test_batch * batch_size * sgd.world_size)), flush=True)

    if save_params and sgd.global_rank == 0:
        np.savez(save_params, **{name: tensor.to_numpy(p)
                                 for name, p in model.get_params().items()})
    dev.PrintTimeProfiling()
    return model


# ---- command line (flags for small runs; the guide's scripts take none) ---------------------
def build_parser(description=__doc__, prog=None):
    parser = argparse.ArgumentParser(description=description, prog=prog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10, help="(the guide: 10)")
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32, help="per rank (default 32)")
    parser.add_argument("--batches-per-epoch", "--batches_per_epoch", type=int, default=None,
                        help="train on at most this many batches per epoch (quick runs)")
    parser.add_argument("--dist-option", "--dist_option", default="fp32", choices=DIST_OPTIONS)
    parser.add_argument("--spars", type=float, default=None,
                        help="sparseTopK: fraction sent (default 0.05); sparseThreshold: "
                             "smallest |gradient| sent (default 0.01)")
    parser.add_argument("--no-graph", "--no_graph", action="store_true",
                        help="model.compile(use_graph=False) (execution is eager either way)")
    parser.add_argument("--data-dir", "--data_dir", "--data_path", default=None,
                        help="MNIST IDX files (default: scikit-learn's digits, upsampled)")
    parser.add_argument("--save-params", "--save_params", default=None, metavar="FILE",
                        help="rank 0 saves the final parameters to FILE (.npz)")
    return parser


def parse_options(argv=None, parser=None):
    """``train_mnist_cnn``'s keyword arguments from the command line (exit 2 if invalid)."""
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "batches_per_epoch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    spars = args.spars
    if spars is None:
        spars = {"sparseTopK": 0.05, "sparseThreshold": 0.01}.get(args.dist_option, 0)
    elif args.dist_option == "sparseTopK" and not 0 < spars <= 1:
        parser.error(f"--spars {spars} is out of range for sparseTopK: expected 0 < spars <= 1")
    elif args.dist_option == "sparseThreshold" and not spars > 0:
        parser.error(f"--spars {spars} is out of range for sparseThreshold: expected > 0")
    return {"max_epoch": args.epochs, "batch_size": args.batch_size,
            "graph": not args.no_graph, "dist_option": args.dist_option, "spars": spars,
            "data_dir": args.data_dir, "batches_per_epoch": args.batches_per_epoch,
            "save_params": args.save_params}


if __name__ == '__main__':
    train_mnist_cnn(**parse_options())
    sys.exit(0)
