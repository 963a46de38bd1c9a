"""Rank-sharded data under a pipeline (issue 24, item 3): the last stage's labels must
belong to the samples whose inputs stage 0 read.

4 ranks, 2 stages x 2 replicas. Every sample is its id: input ``x = [id, id]``, label
``y = [id, id]``. Stage 0 is a Dense holding the identity, stage 1 another, trained with a
learning rate of 0, so the last stage's loss sees the inputs' ids next to the labels' ids.
``--shard rank`` builds the dataset as MindSpore's samples do (``num_shards=world,
shard_id=rank``); ``--shard replica`` with ``pipeline_data_shard()``; ``--shard none``
unsharded; ``--full-batch`` sets ``full_batch=True``. Every last-stage rank prints
``PAIRS rank=R replica=J ok=B ids=...``; every rank prints ``STEPS rank=R n=N``.
"""
import argparse

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn

parser = argparse.ArgumentParser()
parser.add_argument("--shard", choices=["rank", "replica", "none", "stage"], default="rank")
parser.add_argument("--full-batch", action="store_true")
parser.add_argument("--samples", type=int, default=32)
args = parser.parse_args()

communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL, pipeline_stages=2,
                             gradients_mean=True, full_batch=args.full_batch)


class RecordingLoss(nn.Cell):
    """MSE that remembers which ids met: the rows of the logits against the labels."""

    def __init__(self):
        super().__init__()
        self.seen = []
        self.mse = nn.MSELoss()

    def construct(self, logits, labels):
        if hasattr(logits, "asnumpy") and hasattr(labels, "asnumpy"):
            self.seen.append((logits.asnumpy()[:, 0].copy(), labels.asnumpy()[:, 0].copy()))
        return self.mse(logits, labels)


def identity_dense():
    cell = nn.Dense(2, 2)
    cell.weight.set_data(ms.Tensor(np.eye(2, dtype=np.float32)))
    cell.bias.set_data(ms.Tensor(np.zeros(2, np.float32)))
    return cell


first, second = identity_dense(), identity_dense()
first.pipeline_stage, second.pipeline_stage = 0, 1
net = nn.SequentialCell([first, second])
loss = RecordingLoss()
pipe = nn.PipelineCell(nn.WithLossCell(net, loss), 2)

ids = np.repeat(np.arange(args.samples, dtype=np.float32)[:, None], 2, axis=1)
shards = {"rank": dict(num_shards=world, shard_id=rank), "none": {},
          "stage": dict(num_shards=2, shard_id=rank // (world // 2))}
if args.shard == "replica":
    num_shards, shard_id = ms.parallel.pipeline_data_shard()
    shards["replica"] = dict(num_shards=num_shards, shard_id=shard_id)
data = ds.NumpySlicesDataset({"x": ids, "y": ids.copy()}, shuffle=True,
                             **shards[args.shard]).batch(4, drop_remainder=True)


class CountSteps(ms.train.callback.Callback):
    def __init__(self):
        self.steps = 0

    def on_train_step_end(self, run_context):
        self.steps += 1


counter = CountSteps()
opt = nn.SGD(net.infer_param_pipeline_stage(), 0.0)
try:
    ms.Model(pipe, optimizer=opt).train(1, data, callbacks=[counter])
except ValueError as err:
    print(f"rank {rank} ERROR ValueError: {err}", flush=True)
    raise SystemExit(3)
print(f"STEPS rank={rank} n={counter.steps}", flush=True)
if loss.seen:
    inputs = np.concatenate([a for a, _ in loss.seen])
    labels = np.concatenate([b for _, b in loss.seen])
    ok = bool(np.array_equal(inputs, labels))
    print(f"PAIRS rank={rank} replica={rank % (world // 2)} ok={ok} "
          f"ids={','.join(str(int(i)) for i in sorted(labels))}", flush=True)
