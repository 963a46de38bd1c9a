"""Bad pipeline settings on real ranks: each must be the same clear error on every rank
before any message is sent (so nothing can hang). ``mode`` picks the mistake; every rank
prints ``rank R ERROR <type>: <message>`` and exits 3. ``raise_on_last_stage`` instead lets
one rank die mid-step: the job must end non-zero (the launcher's abort), never hang."""
import sys

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication, nn

mode = sys.argv[1]
communication.init()
rank = communication.get_rank()
world = communication.get_group_size()


class Boom(nn.Cell):
    def construct(self, x):
        raise RuntimeError("deliberate failure on the last stage")


def build(stages=2, micro=2, order=(0, 1), extra=None):
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                 pipeline_stages=stages)
    ms.set_seed(1)
    first, second = nn.Dense(4, 4), nn.Dense(4, 2)
    cells = [first, second] + ([extra] if extra is not None else [])
    net = nn.SequentialCell(cells)
    first.pipeline_stage, second.pipeline_stage = order
    return net, nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), micro)


x = ms.Tensor(np.ones((4, 4), np.float32))
y = ms.Tensor(np.zeros((4, 2), np.float32))
try:
    if mode == "micro_lt_stages":
        build(micro=1)
    elif mode == "batch_not_divisible":
        _, pipe = build(micro=3)
        pipe(x, y)
    elif mode == "unstaged_param_cell":
        build(extra=nn.Dense(2, 2))
    elif mode == "out_of_order":
        _, pipe = build(order=(1, 0))
        pipe(x, y)
    elif mode == "stages_not_dividing_world":
        build(stages=2)
    elif mode == "negative_stage":
        nn.Dense(2, 2).pipeline_stage = -1
    elif mode == "bool_stage":
        nn.Dense(2, 2).pipeline_stage = True
    elif mode == "stage_too_large":
        build(order=(0, 2))
    elif mode == "stages_read_different_shards":
        import minitorch_dist.dataset as ds
        net, pipe = build()
        data = ds.NumpySlicesDataset({"x": np.ones((8, 4), np.float32),
                                      "y": np.zeros((8, 2), np.float32)}, shuffle=False,
                                     num_shards=2 * world, shard_id=rank).batch(4)
        opt = nn.SGD(net.infer_param_pipeline_stage(), 0.1)
        ms.Model(pipe, optimizer=opt).train(1, data)
    elif mode == "raise_on_last_stage":
        boom = Boom()
        boom.pipeline_stage = 1
        _, pipe = build(extra=boom)
        pipe(x, y)            # rank 1 raises; the abort hook ends the whole job
    else:
        raise SystemExit(f"unknown mode {mode}")
except (ValueError, TypeError) as err:
    print(f"rank {rank} ERROR {type(err).__name__}: {err}", flush=True)
    sys.exit(3)
print(f"rank {rank} NO ERROR", flush=True)
