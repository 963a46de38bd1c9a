"""Run under ``python -m minitorch_dist.run -n N``: every collective plus the group API.

Prints ``OK rank <r>`` on success; any failed check raises, which aborts the whole job.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collective_checks import check_all  # noqa: E402

from minitorch_dist import communication as C  # noqa: E402

C.init()
C.init()  # idempotent
comm = C.get_communicator()
assert C.GlobalComm.BACKEND == "mpi" and type(comm).__name__ == "MPICommunicator"
rank, size = C.get_rank(), C.get_group_size()
assert size == int(sys.argv[1]), (size, sys.argv)
assert C.get_local_rank() == rank and C.get_local_rank_size() == size  # one host
check_all(comm)

evens = list(range(0, size, 2))
C.create_group("evens", evens)
if rank in evens:
    assert C.get_rank("evens") == evens.index(rank)
    assert C.get_group_size("evens") == len(evens)
    assert C.get_world_rank_from_group_rank("evens", C.get_rank("evens")) == rank
    group_sum = C.get_communicator("evens").allreduce(np.array([rank + 1.0]))
    assert group_sum[0] == sum(r + 1 for r in evens)
C.destroy_group("evens")
C.get_communicator().barrier()
print(f"OK rank {rank}", flush=True)
C.release()
