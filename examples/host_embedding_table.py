"""Seed 000's point, shown: a table that cannot fit on the device trains on the host.

MindSpore's "Host&Device Heterogeneous" tutorial puts Wide&Deep's huge embedding table and
its EmbeddingLookup on the host and everything else on the accelerator. This script gives
the device a small memory (the virtual GPU's ``MINITORCH_DIST_VIRTUAL_GPU_MEMORY``, or the
CuPy pool limit ``MINITORCH_DIST_GPU_MEMORY`` on a real GPU), builds a table larger than it,
and then:

1. asks for the table on the device (``target="DEVICE"``): a clear out-of-memory error;
2. keeps it on the host (``target="CPU"``) and trains a small click model on the device:
   each step only the looked-up rows go to the device and only their gradient rows come
   back, which the transfer counters show next to the table's size.

    python examples/host_embedding_table.py [--steps 300] [--vocab 400000] [--capacity 64MiB]
    GLOG_v=1 python examples/host_embedding_table.py     # also MindSpore's INFO line
"""
import argparse
import os

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--vocab", type=int, default=400_000)
parser.add_argument("--dim", type=int, default=64)
parser.add_argument("--fields", type=int, default=8)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--capacity", default="64MiB", help="the device's memory for this run")
args = parser.parse_args()

if "MINITORCH_DIST_VIRTUAL_GPU" not in os.environ:
    os.environ["MINITORCH_DIST_VIRTUAL_GPU"] = "0" if __import__("minitorch_dist.backend").backend.cupy_or_none() else "1"
os.environ.setdefault("MINITORCH_DIST_VIRTUAL_GPU_MEMORY", args.capacity)
os.environ.setdefault("MINITORCH_DIST_GPU_MEMORY", args.capacity)

import numpy as np                                   # noqa: E402
from tqdm import tqdm                                # noqa: E402
from minitorch_dist.train.callback.progress_bar import terminal_output   # noqa: E402

import minitorch_dist as ms                          # noqa: E402
from minitorch_dist import nn, ops                   # noqa: E402
from minitorch_dist.backend import DeviceOutOfMemoryError   # noqa: E402
from minitorch_dist.backend.memory import format_bytes      # noqa: E402

ms.set_context(device_target="GPU")
ms.set_seed(1)
gpu = ms.get_device("GPU")
table_bytes = args.vocab * args.dim * 4
print(f"device {gpu!r}: capacity {format_bytes(gpu.memory_stats()['capacity'])}; "
      f"table {args.vocab} x {args.dim} float32 = {format_bytes(table_bytes)}")


class Wide(nn.Cell):
    """Each example's ``fields`` ids -> their embedding rows, summed on the device -> a logit."""

    def __init__(self, target):
        super().__init__()
        self.embedding = nn.EmbeddingLookup(args.vocab, args.dim, param_init="normal", target=target)
        self.pool = ops.ReduceSum().set_device("GPU")   # the rest runs on the device
        self.out = nn.Dense(args.dim, 1)
        self.squeeze = ops.Squeeze(-1)

    def construct(self, ids):
        return self.squeeze(self.out(self.pool(self.embedding(ids), 1)))


# 1. the table on the device does not fit
try:
    Wide(target="DEVICE")
    print("\nthe table fits on the device: raise --vocab or lower --capacity to see the error")
except DeviceOutOfMemoryError as err:
    print("\ntarget='DEVICE':", err)

# 2. on the host it trains; the rest of the network runs on the device
net = Wide(target="CPU")
loss_fn = nn.BCEWithLogitsLoss()
optimizer = nn.SGD(net.trainable_params(), learning_rate=1.0)   # sparse: touched rows only
grad_fn = ms.value_and_grad(lambda ids, y: loss_fn(net(ids), y), None, optimizer.parameters)

rng = np.random.default_rng(0)
hot = rng.integers(0, args.vocab, 2000)              # the ids users actually click on
weight = rng.standard_normal(args.vocab).astype(np.float32)   # each id's hidden appeal
ms.reset_transfer_stats()
ms.reset_placement_stats()
print(f"\ntarget='CPU': training {args.steps} steps of {args.batch} x {args.fields} ids")
for step in tqdm(range(args.steps), unit="step", leave=False,
                 disable=not terminal_output()):   # a bar on a terminal only
    ids = hot[rng.integers(0, hot.size, (args.batch, args.fields))]
    labels = (weight[ids].sum(axis=1) > 0).astype(np.float32)
    loss, grads = grad_fn(ms.Tensor(ids, device="CPU"), ms.Tensor(labels))
    optimizer(grads)
    if step % 50 == 0 or step == args.steps - 1:
        tqdm.write(f"step {step:4d}  loss {float(loss.asnumpy()):.4f}")

stats = ms.transfer_stats()
rows_bytes = args.batch * args.fields * args.dim * 4
print()
print(ms.placement_report())
print(f"\ntable: on {net.embedding.embedding_table.device}, {format_bytes(table_bytes)}; "
      f"device memory peak {format_bytes(gpu.memory_stats()['peak'])} of "
      f"{format_bytes(gpu.memory_stats()['capacity'])}")
print(f"per step: host->device {stats['host_to_device'] / args.steps:.0f} bytes = the looked-up "
      f"rows ({rows_bytes}) + the labels ({args.batch * 4}); device->host "
      f"{stats['device_to_host'] / args.steps:.0f} bytes = their gradient rows ({rows_bytes}) + the "
      f"printed losses. The table ({table_bytes} bytes) never crossed.")
