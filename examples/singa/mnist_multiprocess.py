"""The guide's ``mnist_multiprocess.py``: the CNN of ``mnist_cnn.py`` on N local processes.

    python examples/singa/mnist_multiprocess.py 2 [--epochs 3] [--timeout 600]

The parent makes one ``NcclIdHolder`` and starts one ``multiprocessing.Process`` per local
rank running ``train_mnist_cnn(nccl_id, local_rank, world_size)``; the children find each
other through the id (TCP on 127.0.0.1 here, NCCL on GPUs). The guide's parent never waits;
this one does, and if a child fails (or ``--timeout`` seconds pass) it stops the others and
exits 1. Other flags: see ``mnist_cnn.py``.
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # the children share the cores: one BLAS thread each
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # mnist_cnn, mnist_data

# SINGA: from singa import singa_wrap as singa
import minitorch_dist.singa as singa  # noqa: E402
from minitorch_dist.run import wait_processes  # noqa: E402

from mnist_cnn import build_parser, parse_options, train_mnist_cnn  # noqa: E402


def command_line():
    """(train_mnist_cnn's options, world size, timeout) from the command line."""
    parser = build_parser(__doc__, prog="mnist_multiprocess.py")
    parser.add_argument("world_size", type=int, help="number of processes (the guide: GPUs)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before every process is stopped (default 600)")
    args = parser.parse_args()
    if args.world_size < 1:
        parser.error(f"world_size must be a positive integer, got {args.world_size}")
    return parse_options(sys.argv[1:], parser), args.world_size, args.timeout


if __name__ == '__main__':
    options, world_size, timeout = command_line()

    # Generate a NCCL ID to be used for collective communication
    nccl_id = singa.NcclIdHolder()

    # Define the number of GPUs to be used in the training process
    # (the guide: world_size = int(sys.argv[1]); parsed above, so flags may come first)

    # Define and launch the multi-processing
    import multiprocessing
    process = []
    for local_rank in range(0, world_size):
        process.append(multiprocessing.Process(target=train_mnist_cnn,
                                               args=(nccl_id, local_rank, world_size),
                                               kwargs=options))

    for p in process:
        p.start()

    codes = wait_processes(process, timeout)
    if any(code != 0 for code in codes):
        print(f"mnist_multiprocess: a process failed or timed out (exit codes {codes})",
              file=sys.stderr, flush=True)
        sys.exit(1)
