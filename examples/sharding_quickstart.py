"""Seed 002, MindSpore's distributed-training quick start, run with its imports changed.

A one-hidden-layer network whose first MatMul the user shards ``((2, 4), (4, 1))`` on 8
ranks; sharding propagation gives the ReLU ``(2, 4)`` and the second MatMul
``((2, 4), (4, 1))``. Every rank prints the same loss at every step, and with
``save_graphs=2`` each rank writes its IR dumps (see docs/sharding.md)::

    MINITORCH_DIST_VIRTUAL_GPU=1 python -m minitorch_dist.run -n 8 examples/sharding_quickstart.py

(On a terminal the launcher shows rank 0's loss lines only, as the script asks with
``log.rank0_progress_only()``: the 8 ranks print the same ones, and each rank's are in its
log; ``MINITORCH_DIST_ALL_RANKS=1`` shows them all. With plain Open MPI as root:
``mpiexec --allow-run-as-root -n 8 python examples/sharding_quickstart.py``.)

Differences from the tutorial, each marked below: the imports; the output folders live under
``examples/output/`` (the tutorial writes ``../saved_graph`` and ``./<rank>``); and the
tutorial's call ``get_dataset(var_single_batch_size, var_step_per_epoch, var_in_dim,
var_out_dim)`` passes its arguments in the wrong order (the function takes ``batch_size,
in_dim, out_dim, step_per_epoch``), which gives 4-wide inputs to a 32-wide network. Pass
``--as-written`` to call it that way and see the shape error. ``--seed N`` fixes the initial
weights (the tutorial draws them unseeded; rank 0's are broadcast either way).
"""
import argparse
import os

import numpy as np

# ---- the imports: MindSpore's names from minitorch_dist ------------------------------------
import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import log, ops
from minitorch_dist.common.initializer import initializer
from minitorch_dist.communication import init, get_rank
from minitorch_dist.nn import Cell, Momentum, MSELoss
from minitorch_dist import Parameter
from minitorch_dist.train import Model
from minitorch_dist.train.callback import LossMonitor, ModelCheckpoint

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output", "sharding_quickstart")
# added: the command line (the tutorial has none)
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--as-written", "--as_written", "--as_written", dest="as_written", action="store_true",
                    help="call get_dataset in the tutorial's argument order (stops with the shape error)")
parser.add_argument("--seed", type=int, default=None,
                    help="fix the initial weights (tests compare with one process)")
args = parser.parse_args()
log.rank0_progress_only()   # under the launcher: rank 0's lines only (the 8 ranks print the same)
AS_WRITTEN = args.as_written
if args.seed is not None:
    ms.set_seed(args.seed)


def get_dataset(batch_size, in_dim, out_dim, step_per_epoch):
    np.random.seed(1)
    input_data = np.random.rand(batch_size, in_dim).astype(np.float32)
    label_data = np.random.rand(batch_size, out_dim).astype(np.float32)

    def generate():
        for _ in range(step_per_epoch):
            yield (input_data, label_data)
    return generate


class Net(Cell):
    """define net"""
    def __init__(self, in_dim, hidden_dim, out_dim):
        super().__init__()
        self.in_dim = in_dim
        self.hidden_dim = hidden_dim
        self.out_dim = out_dim
        self.weight = Parameter(initializer("normal", [self.in_dim, self.hidden_dim]), "w")
        self.weight2 = Parameter(initializer("normal", [self.hidden_dim, self.out_dim]), "w2")
        # the user shards the first MatMul only: x split 2 ways on rows and 4 on columns,
        # the weight 4 ways on rows; propagation decides the rest
        self.matmul = ops.MatMul().shard(((2, 4), (4, 1)))
        self.relu = ops.ReLU()
        self.matmul2 = ops.MatMul()

    def construct(self, x):
        out = self.matmul(x, self.weight)
        out = self.relu(out)
        out = self.matmul2(out, self.weight2)
        return out


var_step_per_epoch = 4
var_single_batch_size = 2
var_in_dim = 32
var_hidden_dim = 16
var_out_dim = 16

ms.set_context(mode=ms.GRAPH_MODE, device_target="GPU", save_graphs=2,
               save_graphs_path=os.path.join(OUT, "saved_graph"))          # changed: path
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.AUTO_PARALLEL,
                             search_mode="sharding_propagation", dataset_strategy="data_parallel")
init("nccl")
rank_id = get_rank()

if AS_WRITTEN:   # the tutorial's argument order
    fake_dataset = get_dataset(var_single_batch_size, var_step_per_epoch, var_in_dim, var_out_dim)
else:            # changed: the order get_dataset takes
    fake_dataset = get_dataset(var_single_batch_size, var_in_dim, var_out_dim, var_step_per_epoch)
dataset = ds.GeneratorDataset(fake_dataset, ["input", "label"])

net = Net(var_in_dim, var_hidden_dim, var_out_dim)
loss = MSELoss()
callback = [LossMonitor(), ModelCheckpoint(directory=os.path.join(OUT, "{}".format(rank_id)))]  # changed: path

learning_rate = 0.2
momentum = 0.1
epoch_size = 5
opt = Momentum(net.trainable_params(), learning_rate, momentum)

model = Model(net, loss_fn=loss, optimizer=opt)
model.train(epoch_size, dataset, callbacks=callback, dataset_sink_mode=False)
