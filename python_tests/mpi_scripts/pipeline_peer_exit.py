"""A pipeline rank that leaves the job: ``sys.exit(0)`` at step 3 on rank ``LEAVER``.

    python pipeline_peer_exit.py LEAVER [--steps N]

Two ranks, two stages of a small Dense network, a ``value_and_grad`` loop (the step is
recorded with ``watchdog.set_step``). The other rank then waits for a message that never
comes; the launcher's watchdog must end the job in seconds, naming the rank and the step.
"""
import argparse
import sys

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication, nn
from minitorch_dist.launch import watchdog

parser = argparse.ArgumentParser()
parser.add_argument("leaver", type=int)
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

communication.init()
rank = communication.get_rank()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                             pipeline_stages=2)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.first = nn.Dense(8, 16)
        self.second = nn.Dense(16, 4)
        self.first.pipeline_stage = 0
        self.second.pipeline_stage = 1

    def construct(self, x):
        return self.second(self.first(x))


ms.set_seed(3)
net = Net()
cell = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 2)
opt = nn.SGD(net.infer_param_pipeline_stage(), 0.01)
grad_fn = ms.value_and_grad(cell, None, opt.parameters)
rng = np.random.default_rng(0)
for step in range(args.steps):
    watchdog.set_step(step)
    if rank == args.leaver and step == 3:
        sys.exit(0)
    x = ms.Tensor(rng.standard_normal((4, 8)).astype(np.float32))
    y = ms.Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    loss, grads = grad_fn(x, y)
    opt(grads)
print(f"rank {rank} finished", flush=True)
