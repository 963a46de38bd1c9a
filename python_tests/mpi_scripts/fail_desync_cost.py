"""The per-step cost of the collective signature checks in data-parallel training (issue 17).

    python -m minitorch_dist.run -n 2 python_tests/mpi_scripts/fail_desync_cost.py [BLOCKS] [STEPS]

Trains the design guide's MLP (784-512-512-10, batch 64 per rank, rotating batches) with
``DistOpt`` fp32 momentum SGD and times blocks of steps with the check level of the world
communicator switched between "off", "first" (the default) and "detail", interleaved so that
machine noise hits all three alike. Rank 0 prints the median step time of each and the
overheads relative to "off".
"""
import statistics
import sys
import time

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication as comm, nn
from minitorch_dist.parallel import DistOpt

blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 12
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
comm.init()
world = comm.get_communicator()
ms.set_seed(0)
net = nn.SequentialCell([nn.Dense(784, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(),
                         nn.Dense(512, 10)])
loss_net = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
opt = DistOpt(nn.SGD(net.trainable_params(), 0.01, momentum=0.9))
rng = np.random.default_rng(world.rank)
batches = [(ms.Tensor(rng.standard_normal((64, 784)).astype(np.float32)),
            ms.Tensor(rng.integers(0, 10, 64).astype(np.int32))) for _ in range(8)]
comms = {id(c): c for c in (world, opt.communicator) if c is not None}.values()


def run_block(level):
    for c in comms:
        c._debug_level = level
        if level == "detail":
            c._checked_kinds.clear()
    world.barrier()
    start = time.perf_counter()
    for step in range(steps):
        x, y = batches[step % len(batches)]
        opt(loss_net(x, y))
    return (time.perf_counter() - start) / steps


for level in ("off", "first", "detail"):
    run_block(level)                                  # warm-up
times = {"off": [], "first": [], "detail": []}
order = np.random.default_rng(1)            # the same order on every rank
for _ in range(blocks):
    for level in order.permutation(list(times)):
        times[str(level)].append(run_block(str(level)))
calls = world.comm_stats()["calls"]
if world.rank == 0:
    print(f"collective calls per step: {calls / ((3 + 3 * blocks) * steps):.1f}")
    median = {level: statistics.median(values) for level, values in times.items()}
    for level, value in median.items():
        print(f"{level:>6}: {value * 1e3:.3f} ms/step  "
              f"({(value / median['off'] - 1) * 100:+.2f}% vs off)")
