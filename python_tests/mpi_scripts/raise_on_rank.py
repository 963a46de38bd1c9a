"""Rank 1 raises while the others wait in a barrier: the job must end non-zero at once.

With ``init`` the abort hook takes the job down; with ``--no-init`` it is mpiexec's own
rule (a rank exiting non-zero terminates the job) that must do it.
"""
import sys
import time

from minitorch_dist import communication as C

if "--no-init" in sys.argv:
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 1:
        raise RuntimeError("deliberate failure on rank 1")
    time.sleep(120)
else:
    C.init()
    if C.get_rank() == 1:
        raise RuntimeError("deliberate failure on rank 1")
    C.get_communicator().barrier()
print("unreachable: the barrier returned", flush=True)
