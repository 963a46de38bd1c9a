"""MindSpore 2.6's operator-parallel tutorial, functional style, on 8 ranks.

The network of MindSpore's ``distributed_operator_parallel`` sample (784-512-512-10 MatMuls,
the first two sharded ``((2, 4), (4, 1))`` and ``((1, 8), (8, 1))``) is built under
``no_init_parameters`` (each rank draws only its slices) and trained by a hand-written
``train_step`` (``value_and_grad`` + the optimizer) wrapped in ``AutoParallel``::

    python -m minitorch_dist.run -n 8 examples/operator_parallel_functional.py
    python -m minitorch_dist.run -n 8 examples/operator_parallel_functional.py --data_path DIR

``--data_path`` names a folder with MNIST's ``train-images-idx3-ubyte`` and
``train-labels-idx1-ubyte``; without it a small synthetic set in that format is written under
``examples/output/`` and read through the same ``ds.MnistDataset``. Every rank prints its slice
shapes (``fc1_weight (196, 512)``: a quarter of the rows of the 784 x 512 weight) and the loss,
which is the same on every rank.
"""
import argparse
import os

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
import minitorch_dist.runtime as rt
from minitorch_dist import log, nn, ops
from minitorch_dist.common.initializer import initializer
from minitorch_dist.communication import get_rank, init
from minitorch_dist.dataset.idx import write_idx
from minitorch_dist.nn.utils import no_init_parameters
from minitorch_dist.parallel.auto_parallel import AutoParallel

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=None, help="a folder with MNIST's idx files")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch_size", "--batch-size", type=int, default=32)
args = parser.parse_args()
log.rank0_progress_only()   # under the launcher: rank 0's lines only (every rank's are in its log)

ms.set_context(mode=ms.GRAPH_MODE)
rt.set_memory(max_size="28GB")
init()
ms.set_seed(1)


class Network(nn.Cell):
    """The tutorial's network."""

    def __init__(self):
        super().__init__()
        self.flatten = ops.Flatten()
        self.fc1_weight = ms.Parameter(initializer("normal", [28 * 28, 512], ms.float32))
        self.fc2_weight = ms.Parameter(initializer("normal", [512, 512], ms.float32))
        self.fc3_weight = ms.Parameter(initializer("normal", [512, 10], ms.float32))
        self.matmul1 = ops.MatMul().shard(((2, 4), (4, 1)))
        self.relu1 = ops.ReLU().shard(((4, 1),))
        self.matmul2 = ops.MatMul().shard(((1, 8), (8, 1)))
        self.relu2 = ops.ReLU().shard(((8, 1),))
        self.matmul3 = ops.MatMul()

    def construct(self, x):
        x = self.flatten(x)
        x = self.relu1(self.matmul1(x, self.fc1_weight))
        x = self.relu2(self.matmul2(x, self.fc2_weight))
        return self.matmul3(x, self.fc3_weight)


def synthetic_mnist(folder, count=512):
    """MNIST's idx files with random digits-like images (nothing is downloaded)."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, count).astype(np.uint8)
    images = (rng.random((count, 28, 28)) * 64).astype(np.uint8)
    for k in range(count):             # a bright bar whose position is the label
        images[k, 2 + 2 * labels[k]:4 + 2 * labels[k], 4:24] = 255
    os.makedirs(folder, exist_ok=True)
    write_idx(os.path.join(folder, "train-images-idx3-ubyte"), images)
    write_idx(os.path.join(folder, "train-labels-idx1-ubyte"), labels)
    return folder


def create_dataset(path, batch_size):
    dataset = ds.MnistDataset(path)
    image_transforms = [ds.vision.Rescale(1.0 / 255.0, 0),
                        ds.vision.Normalize(mean=(0.1307,), std=(0.3081,)),
                        ds.vision.HWC2CHW()]
    dataset = dataset.map(image_transforms, "image")
    dataset = dataset.map(ds.transforms.TypeCast(ms.int32), "label")
    return dataset.batch(batch_size)


def main():
    if args.data_path is None:
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output",
                              "mnist_synthetic", f"rank_{get_rank()}")
        path = synthetic_mnist(folder)
        print(f"rank {get_rank()}: data: synthetic MNIST-format files in {path}", flush=True)
    else:
        path = args.data_path
        print(f"rank {get_rank()}: data: {path}", flush=True)
    data_set = create_dataset(path, args.batch_size)

    with no_init_parameters():
        net = Network()
        optimizer = nn.SGD(net.trainable_params(), 1e-2)
    loss_fn = nn.CrossEntropyLoss()

    def forward_fn(data, target):
        logits = net(data)
        return loss_fn(logits, target), logits

    grad_fn = ms.value_and_grad(forward_fn, None, net.trainable_params(), has_aux=True)

    def train_step(inputs, targets):
        (loss_value, _), grads = grad_fn(inputs, targets)
        optimizer(grads)
        return loss_value

    parallel_net = AutoParallel(train_step, parallel_mode="semi_auto")
    for epoch in range(args.epochs):
        for step, (image, label) in enumerate(data_set):
            loss = parallel_net(image, label)
            if step % 5 == 0:
                print(f"epoch: {epoch}, step: {step}, loss is {float(loss.asnumpy()):.6f}",
                      flush=True)
    shapes = ", ".join(f"{p.name} {tuple(p.shape)}" for p in net.trainable_params())
    print(f"rank {get_rank()}: slices {shapes}", flush=True)


if __name__ == "__main__":
    main()
