"""The guide's ``mnist_dist.py``: the CNN of ``mnist_cnn.py`` on the ranks of an MPI job.

    python -m minitorch_dist.run -n 2 examples/singa/mnist_dist.py      # MPI flags chosen
    mpiexec -n 2 python examples/singa/mnist_dist.py [--epochs 3]
    mpiexec --hostfile host_file python examples/singa/mnist_dist.py    # the guide's form

(As root, in containers, plain Open MPI needs ``mpiexec --allow-run-as-root ...``.)

``opt.DistOpt(sgd)`` joins the MPI job; every rank trains on its contiguous share of the data
and rank 0 prints the guide's lines. Flags: see ``mnist_cnn.py``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # mnist_cnn, mnist_data

from mnist_cnn import parse_options, train_mnist_cnn  # noqa: E402

if __name__ == '__main__':
    train_mnist_cnn(**parse_options())
