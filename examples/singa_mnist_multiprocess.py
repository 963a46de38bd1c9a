"""SINGA's mnist_multiprocess.py: the distributed MNIST CNN on N local processes, no MPI.

    python examples/singa_mnist_multiprocess.py 2 [--dist-option fp16] [--epochs 3] ...

The parent makes one ``NcclIdHolder`` (a ``UniqueId``: a loopback rendezvous and a secret
token) and starts ``world_size`` ``multiprocessing`` children running
``train_mnist_cnn(nccl_id, local_rank, world_size)`` from ``singa_mnist_dist.py``; they find
each other over TCP on 127.0.0.1 (NCCL on GPUs). The options are those of
``singa_mnist_dist.py``. If a child fails, the others are terminated and the exit code is 1;
``--timeout`` (seconds) bounds the whole run the same way.
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # the children share the cores: one BLAS thread each

import multiprocessing  # noqa: E402

from minitorch_dist.communication import NcclIdHolder  # noqa: E402
from minitorch_dist.run import wait_processes  # noqa: E402

from singa_mnist_dist import (add_training_arguments, options_from_args,  # noqa: E402
                              train_mnist_cnn)


def run_rank(nccl_id, local_rank, world_size, options):
    """A child: train, and on any error print it and exit 1 (the parent then stops the rest)."""
    try:
        train_mnist_cnn(nccl_id, local_rank, world_size, **options)
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def build_parser():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world_size", type=int, help="number of processes to start")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before every process is stopped (default 600)")
    add_training_arguments(parser)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.world_size < 1:
        parser.error(f"world_size must be a positive integer, got {args.world_size}")
    options = options_from_args(parser, args)

    # Generate an id (SINGA: a NCCL ID) to be used for collective communication
    nccl_id = NcclIdHolder()
    # Define the number of processes to be used in the training process
    world_size = args.world_size
    # spawn: every child starts clean (no copied locks or thread pools), and the id pickles
    ctx = multiprocessing.get_context("spawn")
    process = []
    for local_rank in range(0, world_size):
        process.append(ctx.Process(target=run_rank,
                                   args=(nccl_id, local_rank, world_size, options)))
    for p in process:
        p.start()
    codes = wait_processes(process, args.timeout)
    if any(code != 0 for code in codes):
        print(f"singa_mnist_multiprocess: a process failed or timed out (exit codes {codes})",
              file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
