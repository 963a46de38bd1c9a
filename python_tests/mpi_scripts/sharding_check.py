"""One MPI rank of a sharded Megatron-style MLP, checked against one process.

    python -m minitorch_dist.run -n 4 python_tests/mpi_scripts/sharding_check.py --dp 2 --mp 2

Every rank first trains the unsharded MLP alone (the reference), then the sharded one with
the same initial weights and data, and checks its losses and its parameter slices against
the reference's. Prints one ``OK`` line per rank.
"""
import argparse

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication, nn, ops

parser = argparse.ArgumentParser()
parser.add_argument("--dp", type=int, default=2)
parser.add_argument("--mp", type=int, default=2)
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()


class MLP(nn.Cell):
    def __init__(self, dp, mp, d=16, h=32):
        super().__init__()
        rng = np.random.default_rng(0)      # the same initial weights on every rank
        self.w1 = ms.Parameter(ms.Tensor(rng.standard_normal((d, h)).astype(np.float32) * 0.3), "w1")
        self.w2 = ms.Parameter(ms.Tensor(rng.standard_normal((h, d)).astype(np.float32) * 0.3), "w2")
        self.mm1, self.act, self.mm2 = ops.MatMul(), ops.GeLU(), ops.MatMul()
        if dp * mp > 1:           # the reference (1, 1) runs alone, unsharded
            self.mm1.shard(((dp, 1), (1, mp)))
            self.act.shard(((dp, mp),))
            self.mm2.shard(((dp, mp), (mp, 1)))

    def construct(self, x):
        return self.mm2(self.act(self.mm1(x, self.w1)), self.w2)


def train(net, x, y):
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for _ in range(args.steps)]


rng = np.random.default_rng(1)
x = rng.standard_normal((16, 16)).astype(np.float32)
y = rng.standard_normal((16, 16)).astype(np.float32)
reference = MLP(1, 1)
ref_losses = train(reference, x, y)

communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                             dataset_strategy="data_parallel")
net = MLP(args.dp, args.mp)
rows = 16 // world
losses = train(net, x[rank * rows:(rank + 1) * rows], y[rank * rows:(rank + 1) * rows])
np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
for p, q in zip(net.trainable_params(), reference.trainable_params()):
    np.testing.assert_allclose(p.asnumpy(), p.sharding_layout.shard(q.asnumpy(), rank),
                               rtol=1e-5, atol=1e-6)
print(f"OK rank {rank}: losses {losses[0]:.6f} .. {losses[-1]:.6f}, "
      f"w1 slice {net.w1.shape} of {reference.w1.shape}", flush=True)
