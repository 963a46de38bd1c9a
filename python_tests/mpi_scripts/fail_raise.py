"""Every rank (or only rank ``ONLY``) raises the same ValueError after one allreduce.

    python fail_raise.py [ONLY]
"""
import sys

import numpy as np

from minitorch_dist import communication as comm


def load_data(path):
    """Stands for a data loader given a bad path."""
    raise ValueError(f"DATA_PATH {path!r} does not exist")


comm.init()
world = comm.get_communicator()
world.allreduce(np.ones(2))
only = int(sys.argv[1]) if len(sys.argv) > 1 else None
if only is None or world.rank == only:
    load_data("/nonexistent/data")
world.barrier()
