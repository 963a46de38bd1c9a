"""An AUTO_PARALLEL network under ``--compute-slots 1`` on 4 MPI ranks: no rank waits for the
others inside its forward or backward (where it would hold its activations off its slot).
The loss, averaged over the global batch, ends forward with an allreduce that now waits
until after backward (``parallel/comm/final_reduction.py``), and the loss one-hot encodes
its labels without gathering them (``rules/one_hot.py``), as MindSpore's ResNet-50 sample
does. The losses and the replicas' parameters are checked against a run without slots."""
import json
import os
import subprocess
import sys

import numpy as np

from mpi_jobs import REPO, child_env, needs_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

_JOB = r'''
import json, os, sys, traceback
import numpy as np
import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn
from minitorch_dist.communication import hooks
from minitorch_dist.train import Model
from minitorch_dist.train.callback import Callback

out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from test_sharding_rules_one_hot import OneHotLoss      # the loss of the in-process test
waits, plain_wait = [], hooks.blocking_wait


def recorded_wait():          # who waits: the functions on the stack
    waits.append([frame.name for frame in traceback.extract_stack()])
    return plain_wait()


hooks.blocking_wait = recorded_wait
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.AUTO_PARALLEL, gradients_mean=True)
communication.init()
rank, world = communication.get_rank(), communication.get_group_size()


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        self.values.append(run_context.original_args().net_outputs.asnumpy().tobytes().hex())


rng = np.random.default_rng(0)
x = rng.standard_normal((3 * 4 * world, 6)).astype(np.float32)
y = rng.integers(0, 3, len(x)).astype(np.int32)
ms.set_seed(7)
net = nn.SequentialCell([nn.Dense(6, 8), nn.ReLU(), nn.Dense(8, 3)])
model = Model(net, OneHotLoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9))
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False, num_shards=world,
                             shard_id=rank).batch(4)
losses = Losses()
model.train(1, data, callbacks=[losses], dataset_sink_mode=False)
np.savez(os.path.join(out, f"params.{rank}.npz"), *[p.asnumpy() for p in net.trainable_params()])
with open(os.path.join(out, f"record.{rank}.json"), "w") as f:
    json.dump({"losses": losses.values, "waits": waits}, f)
'''


def _run(tmp_path, name, *options):
    script = tmp_path / "sharded_job.py"
    script.write_text(_JOB)
    out = tmp_path / name
    out.mkdir()
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "-n", "4", "--timeout",
                           "150", *options, str(script), str(out), HERE], cwd=REPO,
                          env=child_env(),
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    params = [np.load(out / f"params.{rank}.npz") for rank in range(4)]
    records = [json.loads((out / f"record.{rank}.json").read_text()) for rank in range(4)]
    return params, records


def _inside_a_sharded_primitive(stack):
    return "primitive_hook" in stack


@needs_mpi
def test_slots_keep_a_sharded_networks_waits_out_of_forward_and_backward(tmp_path):
    free, free_records = _run(tmp_path, "free")
    slotted, records = _run(tmp_path, "slotted", "--compute-slots", "1")
    for rank in range(4):
        assert len(records[rank]["losses"]) == 3
        assert records[rank]["losses"] == records[0]["losses"]           # one loss, all ranks
        # the first step's loss comes before any update: the same bits with or without slots
        assert records[rank]["losses"][0] == free_records[rank]["losses"][0]
        for key in slotted[rank].files:
            assert np.array_equal(slotted[rank][key], slotted[0][key])   # replicas agree
            np.testing.assert_allclose(slotted[rank][key], free[rank][key], rtol=1e-6, atol=1e-7)
        # without slots the loss's allreduce runs inside forward; under slots nothing waits
        # inside the sharded network's primitives
        assert any(_inside_a_sharded_primitive(s) for s in free_records[rank]["waits"])
        assert not any(_inside_a_sharded_primitive(s) for s in records[rank]["waits"])
        assert records[rank]["waits"]                       # the job did wait, elsewhere
