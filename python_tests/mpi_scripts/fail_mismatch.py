"""Two ranks that disagree about a collective (issue 17): each KIND must fail on every rank
with ``CollectiveMismatchError`` naming both ranks' calls, never hang or return garbage.

    python fail_mismatch.py KIND
"""
import sys

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication as comm, nn

kind = sys.argv[1]
comm.init()
world = comm.get_communicator()
rank = world.rank


def model(width):
    """A small model whose hidden width may differ between ranks."""
    return nn.WithLossCell(nn.SequentialCell([nn.Dense(4, width), nn.ReLU(), nn.Dense(width, 2)]),
                           nn.MSELoss())


if kind == "allreduce_shape":
    world.allreduce(np.ones(4 + rank, np.float32))
elif kind == "allreduce_dtype":
    world.allreduce(np.ones(4, np.float32 if rank == 0 else np.float64))
elif kind == "allreduce_op":
    world.allreduce(np.ones(4), op="sum" if rank == 0 else "max")
elif kind == "broadcast_shape":
    world.broadcast(np.ones((2, 3 + rank)), root=0)
elif kind == "broadcast_dtype":
    world.broadcast(np.ones(3, np.int64 if rank == 0 else np.int32), root=0)
elif kind == "broadcast_root":
    world.broadcast(np.ones(3), root=rank)
elif kind == "allgather_shape":
    world.allgather(np.ones(2 + rank))
elif kind == "reduce_scatter_shape":
    world.reduce_scatter(np.ones(2 * (1 + rank)))
elif kind == "alltoall_dtype":
    world.alltoall(np.ones(2, np.float32 if rank == 0 else np.float16))
elif kind == "different_collectives":
    if rank == 0:
        world.broadcast(np.ones(3), root=0)
    else:
        world.allreduce(np.ones(3))
elif kind == "skipped_call":           # detail mode: rank 1 skips a broadcast
    world.allreduce(np.ones(3))
    if rank == 0:
        world.broadcast(np.ones(3), root=0)
    world.allreduce(np.ones(3))
elif kind == "grad_reducer":
    net = model(8 if rank == 0 else 9)
    reducer = nn.DistributedGradReducer(net.trainable_params(), mean=True)
    reducer(tuple(ms.Tensor(np.zeros(p.shape, np.float32)) for p in net.trainable_params()))
elif kind == "model":
    from minitorch_dist.train import Model
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    net = nn.SequentialCell([nn.Dense(4, 8 if rank == 0 else 6), nn.ReLU(),
                             nn.Dense(8 if rank == 0 else 6, 2)])
    import minitorch_dist.dataset as ds
    data = ds.NumpySlicesDataset({"x": np.ones((8, 4), np.float32),
                                  "y": np.ones((8, 2), np.float32)}, shuffle=False).batch(4)
    trainer = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
    trainer.train(1, data)
else:
    raise SystemExit(f"unknown kind {kind!r}")
print(f"rank {rank}: no error", flush=True)
