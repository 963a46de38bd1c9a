"""MindSpore-style data parallel through ``Model.train`` on N ranks must equal one process.

Every rank trains on its shard (``num_shards``/``shard_id``, no shuffle) with a batch of B;
then, on each rank, a stand-alone run with batch N*B over the whole data (the union of the
ranks' batches, step by step) gives the reference. Ranks start from different seeds: with
``parameter_broadcast=True`` rank 0's initial values are copied to all before training.
Prints ``DP_MODEL_CHECK OK world=N max_diff=D`` on rank 0.
"""
import argparse

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn
from minitorch_dist.train import Model

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--batch", type=int, default=4)
args = parser.parse_args()

ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                             parameter_broadcast=True)
communication.init()
rank, world = communication.get_rank(), communication.get_group_size()

rng = np.random.default_rng(0)
n = args.steps * args.batch * world
x = rng.standard_normal((n, 6)).astype(np.float32)
y = rng.integers(0, 3, n).astype(np.int32)


def train(seed, batch, **shard):
    ms.set_seed(seed)
    net = nn.SequentialCell([nn.Dense(6, 8), nn.ReLU(), nn.Dense(8, 3)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), opt)
    data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False, **shard).batch(batch)
    model.train(1, data)
    return [p.asnumpy() for p in net.trainable_params()]


distributed = train(seed=100 + rank, batch=args.batch, num_shards=world, shard_id=rank)
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.STAND_ALONE)
reference = train(seed=100, batch=args.batch * world)   # rank 0's seed, the full batch
diff = max(float(np.abs(a - b).max()) for a, b in zip(distributed, reference))
worst = float(communication.get_communicator().allreduce(np.array([diff]), "max")[0])
if rank == 0:
    print(f"DP_MODEL_CHECK OK world={world} max_diff={worst:.3e}", flush=True)
communication.release()
