"""Print the BLAS thread count of each child of SINGA's multiprocessing launch, before and
after it joins the group with ``opt.DistOpt(sgd, nccl_id=..., local_rank=r, world_size=2)``.

    python singa_threads.py      # prints "rank R before B after A" per child
"""
import multiprocessing
import sys

from minitorch_dist.backend import threads
from minitorch_dist.singa import opt, singa_wrap as singa


def child(rank, world, nccl_id):
    before = threads.get_num_threads()
    sgd = opt.DistOpt(opt.SGD(lr=0.1), nccl_id=nccl_id, local_rank=rank, world_size=world)
    # one write per line: print() writes the text and the newline apart, and the two
    # children share the pipe, so their lines could interleave
    sys.stdout.write(f"rank {sgd.global_rank} before {before} after {threads.get_num_threads()}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    nccl_id = singa.NcclIdHolder()
    procs = [multiprocessing.Process(target=child, args=(r, 2, nccl_id)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    raise SystemExit(max(p.exitcode for p in procs))
