"""Rank ``LEAVER`` leaves the training loop early without an error; the others go on.

    python fail_early_exit.py MODE [LEAVER]

MODE "exit": ``sys.exit(0)`` at step 3; "short": one batch fewer (the loop just ends);
"code": ``sys.exit(3)`` at step 3. The others keep calling allreduce for 6 steps.
"""
import sys

import numpy as np

from minitorch_dist import communication as comm
from minitorch_dist.launch import watchdog

mode = sys.argv[1]
leaver = int(sys.argv[2]) if len(sys.argv) > 2 else 1
comm.init()
world = comm.get_communicator()
steps = 6
if world.rank == leaver and mode == "short":
    steps = 5
for step in range(steps):
    watchdog.set_step(step)
    if world.rank == leaver and step == 3 and mode in ("exit", "code"):
        sys.exit(0 if mode == "exit" else 3)
    world.allreduce(np.ones(4, np.float32))
print(f"rank {world.rank} finished", flush=True)
