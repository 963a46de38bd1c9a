"""When should a full bucket's allreduce start? Three ways, side by side on 2 MPI ranks.

DistOpt's ``backward_and_update`` writes each gradient into its bucket during backward and
launches a bucket as soon as its last gradient arrives. Over MPI the launch is the blocking
``Allreduce`` (``MPICommunicator.progresses_in_background`` is False): Open MPI advances a
nonblocking collective only inside MPI calls, and its ``Iallreduce`` was slower here. This
script measures whether overlap would pay on SINGA's MNIST CNN (batch 32 per rank, one
BLAS thread per rank), ms per training step:

* **one bucket**: the default 4 MiB buckets (the whole model in one), reduced at the end;
* **two, blocking**: ``buffSize`` 1,640,000 bytes splits the model into the dense layers
  (93% of the bytes, first to finish in backward) and the convolutions, each reduced by the
  blocking call as soon as it is full;
* **two, Iallreduce**: the same buckets with the nonblocking call (the experiment switches
  ``progresses_in_background`` on), progressed by ``MPI_Test`` each time backward hands over a final gradient
  and waited for after backward.

All three train the same model in one 2-rank job, in alternating blocks of 10 steps (the
order rotates every block), so that machine load hits them alike; a block's time is the
slower rank's. No target: the point is which one to use, and DistOpt uses the fastest
(the blocking call; see docs/performance.md).

    python benchmarks/bench_data_parallel.py [--blocks 30]
"""
import argparse
import os
import subprocess
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")   # before NumPy starts its BLAS pool

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
MODES = {"one bucket": 4194304, "two, blocking": 1640000, "two, Iallreduce": 1640000}
STEPS_PER_BLOCK = 10


def nonblocking_with_progress():
    """Switch the experiment's hooks on: ``MPICommunicator._iallreduce`` keeps its MPI
    requests where the bucket observer can ``Test`` them; returns the list of live requests."""
    from mpi4py import MPI
    from minitorch_dist.communication.communicator import Request
    from minitorch_dist.communication.mpi import MPICommunicator
    from minitorch_dist.parallel.data_parallel import bucket_fill
    live = []

    def iallreduce(self, array, op, out):
        assert op == "sum" and out is array, "the experiment reduces buckets in place"
        request = self.comm.Iallreduce(MPI.IN_PLACE, array, op=MPI.SUM)
        live.append(request)

        def finish():
            request.Wait()
            live.remove(request)
            return array
        return Request(finish)

    on_final = bucket_fill.BucketFill.on_gradient_final

    def poking_sink(self, target, grad):
        if live and id(target) in self.positions:
            MPI.Request.Testall(live)
        return on_final(self, target, grad)

    MPICommunicator._iallreduce = iallreduce
    bucket_fill.BucketFill.on_gradient_final = poking_sink
    return MPICommunicator


def worker(blocks):
    from mpi4py import MPI
    import dist_opt_jobs as bench
    ms, nn, DistOpt, CNN = bench._model_parts()
    from minitorch_dist.communication import get_rank, init
    init()
    world, rank = MPI.COMM_WORLD, get_rank()
    mpi_class = nonblocking_with_progress()
    batches = bench.rank_batches(ms, rank)
    ms.set_seed(0)
    net = CNN()
    loss_fn = nn.CrossEntropyLoss()
    dists = {mode: DistOpt(nn.SGD(net.trainable_params(), bench.LR, momentum=bench.MOMENTUM),
                           buffSize=size) for mode, size in MODES.items()}
    names, times = list(MODES), {mode: [] for mode in MODES}
    for b in range(blocks + 1):                     # block 0 warms every mode up
        for mode in names[b % 3:] + names[:b % 3]:
            mpi_class.progresses_in_background = mode == "two, Iallreduce"
            world.Barrier()
            start = time.perf_counter()
            for i in range(STEPS_PER_BLOCK):
                x, y = batches[i % len(batches)]
                dists[mode](loss_fn(net(x), y))
            world.Barrier()
            if b:
                times[mode].append((time.perf_counter() - start) / STEPS_PER_BLOCK)
    mpi_class.progresses_in_background = False
    counts = {mode: len(d._fused.plan(d.parameters, 2097152)) for mode, d in dists.items()}
    result = {}
    for mode in names:
        slowest = np.array(times[mode])
        world.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
        result[mode] = float(np.median(slowest)) * 1e3
    if rank == 0:
        print(f"2 ranks, SINGA CNN, batch 32 per rank, median ms per step over {blocks} blocks "
              f"of {STEPS_PER_BLOCK} steps (the slower rank's):")
        base = result["one bucket"]
        for mode in names:
            print(f"  {mode:<18}{counts[mode]} bucket(s)  {result[mode]:8.2f} ms   "
                  f"x{result[mode] / base:.3f} of one bucket")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=30, help="timed blocks per mode")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.blocks < 1:
        parser.error(f"--blocks must be at least 1, got {args.blocks}")
    if args.worker:
        worker(args.blocks)
        return
    timeout = 60 + 3 * args.blocks
    command = [sys.executable, "-m", "minitorch_dist.run", "-n", "2", "--timeout", str(timeout),
               os.path.abspath(__file__), "--worker", "--blocks", str(args.blocks)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get(
        "PYTHONPATH")])))
    done = subprocess.run(command, cwd=REPO, env=env, timeout=timeout + 30)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
