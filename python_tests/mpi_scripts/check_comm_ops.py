"""Run under ``python -m minitorch_dist.run -n N``: the differentiable collectives on MPI ranks.

Checks every case of ``comm_op_checks`` on the world (the group given as None, resolved by
``get_communicator``) and on a named group over all ranks. Prints ``OK rank <r> <cases>``;
any failed check raises, which aborts the whole job.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comm_op_checks import check_all  # noqa: E402

from minitorch_dist import communication as C  # noqa: E402

C.init()
world = C.get_communicator()
assert type(world).__name__ == "MPICommunicator", type(world)
assert world.size == int(sys.argv[1]), (world.size, sys.argv)
cases = check_all(world, group=None)

C.create_group("everyone", list(range(world.size)))
assert check_all(C.get_communicator("everyone"), group="everyone") == cases
C.destroy_group("everyone")
world.barrier()
print(f"OK rank {world.rank} {cases}", flush=True)
C.release()
