"""Seed 000 (MindSpore "Host&Device Heterogeneous"): the seed's whole script, data parallel.

The seed's code with only the import lines changed: ``init()``, a dataset sharded by rank,
every Dense's MatMul and Add on the host ("CPU") while the rest (flatten, ReLU, the loss)
run on the device, and ``nn.DistributedGradReducer`` averaging the gradients over the ranks.
Without a real GPU the device is minitorch_dist's virtual GPU, so every host<->device copy
is made for real and counted; the placement report at the end shows where each primitive
ran and the bytes that crossed.

One process is a world of one (the reducer then has nothing to do); under MPI every rank
trains on its shard and the replicas stay identical (the last line of each rank shows a
checksum of its parameters; on a terminal the launcher shows rank 0's lines only, as the
script asks, and every rank's are in its log: ``MINITORCH_DIST_ALL_RANKS=1`` shows them all):

    python examples/host_device_mlp.py [--epochs 5] [--data_path DIR]
    python -m minitorch_dist.run -n 2 examples/host_device_mlp.py
    mpiexec --allow-run-as-root -n 8 python examples/host_device_mlp.py   # plain Open MPI, as root

Data: the MNIST IDX files in $DATA_PATH, or scikit-learn's digits written as 28x28 MNIST files.
"""
import argparse
import atexit
import os
import tempfile

if "MINITORCH_DIST_VIRTUAL_GPU" not in os.environ:
    os.environ["MINITORCH_DIST_VIRTUAL_GPU"] = "0" if __import__("minitorch_dist.backend").backend.cupy_or_none() else "1"

import minitorch_dist as ms                                      # was: import mindspore as ms
import minitorch_dist.dataset as ds                              # was: import mindspore.dataset as ds
from minitorch_dist import nn, ops                               # was: from mindspore import nn, ops
from minitorch_dist.common.initializer import initializer       # was: from mindspore.common.initializer import initializer
from minitorch_dist.communication import init, get_rank, get_group_size   # was: from mindspore.communication import ...
from minitorch_dist import log

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=None,
                    help="a folder with MNIST's IDX files (the same as $DATA_PATH; without either: "
                         "scikit-learn's digits written as MNIST files)")
args = parser.parse_args()
if args.data_path is not None:        # added: the option, beside the seed's $DATA_PATH
    if not os.path.isdir(args.data_path):
        parser.error(f"--data_path {args.data_path} is not a directory")
    os.environ["DATA_PATH"] = args.data_path

if not os.getenv("DATA_PATH"):   # every rank writes the same files into its own folder, removed at exit
    digits_folder = tempfile.TemporaryDirectory(prefix="digits_")
    atexit.register(digits_folder.cleanup)
    os.environ["DATA_PATH"] = ds.write_digits_as_mnist(digits_folder.name, mnist_size=True)
log.rank0_progress_only()   # under the launcher: rank 0's lines only (every rank's are in its log)

# ---- from here on, the seed's code ----
ms.set_context(mode=ms.GRAPH_MODE)    # the device is the one that is there: the (virtual) GPU
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
init()
ms.set_seed(1)


def create_dataset(batch_size):
    dataset_path = os.getenv("DATA_PATH")
    rank_id = get_rank()
    rank_size = get_group_size()
    dataset = ds.MnistDataset(dataset_path, num_shards=rank_size, shard_id=rank_id)
    image_transforms = [
        ds.vision.Rescale(1.0 / 255.0, 0),
        ds.vision.Normalize(mean=(0.1307,), std=(0.3081,)),
        ds.vision.HWC2CHW()
    ]
    label_transform = ds.transforms.TypeCast(ms.int32)
    dataset = dataset.map(image_transforms, 'image')
    dataset = dataset.map(label_transform, 'label')
    dataset = dataset.batch(batch_size)
    return dataset


data_set = create_dataset(32)


class Dense(nn.Cell):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight = ms.Parameter(initializer("normal", [in_channels, out_channels], ms.float32))
        self.bias = ms.Parameter(initializer("normal", [out_channels], ms.float32))
        self.matmul = ops.MatMul()
        self.add = ops.Add()

    def construct(self, x):
        x = self.matmul(x, self.weight)
        x = self.add(x, self.bias)
        return x


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.layer1 = Dense(28*28, 512)
        self.relu1 = nn.ReLU()
        self.layer2 = Dense(512, 512)
        self.relu2 = nn.ReLU()
        self.layer3 = Dense(512, 10)

    def construct(self, x):
        x = self.flatten(x)
        x = self.layer1(x)
        x = self.relu1(x)
        x = self.layer2(x)
        x = self.relu2(x)
        logits = self.layer3(x)
        return logits


net = Network()
# Configure the matmul and add operators to run on the CPU side
net.layer1.matmul.set_device("CPU")
net.layer1.add.set_device("CPU")
net.layer2.matmul.set_device("CPU")
net.layer2.add.set_device("CPU")
net.layer3.matmul.set_device("CPU")
net.layer3.add.set_device("CPU")

optimizer = nn.SGD(net.trainable_params(), 1e-2)
loss_fn = nn.CrossEntropyLoss()


def forward_fn(data, target):
    logits = net(data)
    loss = loss_fn(logits, target)
    return loss, logits


grad_fn = ms.value_and_grad(forward_fn, None, net.trainable_params(), has_aux=True)
grad_reducer = nn.DistributedGradReducer(optimizer.parameters)

for epoch in range(args.epochs):
    i = 0
    for image, label in data_set:
        (loss_value, _), grads = grad_fn(image, label)
        grads = grad_reducer(grads)
        optimizer(grads)
        if i % 100 == 0:
            print("epoch: %s, step: %s, loss is %s" % (epoch, i, loss_value))
        i += 1

# ---- what the seed reads from the GLOG_v=1 log, as a table instead (rank 0) ----
if get_rank() == 0:
    print()
    print(ms.placement_report())
    print("\ntransfers:", ms.transfer_stats())
checksum = sum(float(abs(p.asnumpy().astype("float64")).sum()) for p in net.trainable_params())
print(f"rank {get_rank()}/{get_group_size()}: parameter checksum {checksum:.10e}")
