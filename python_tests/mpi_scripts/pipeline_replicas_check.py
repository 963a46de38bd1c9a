"""Stage replicas of a pipeline start equal, without ``ms.set_seed``.

4 ranks, 2 stages, 2 data-parallel replicas per stage. Every process draws its own initial
weights (no seed, or a different one per rank with ``--seed-per-rank``), trains a few steps
and prints, per rank, a digest of its stage's parameters before and after training and the
losses. The test checks that the replicas of a stage end bit-identical and that the two
stages hold different parameters. ``--form`` picks the user's side:

* ``cell``: ``nn.PipelineCell`` with ``pipeline_stages`` in the context, ``Model.train``;
* ``v26``: ``Pipeline(stage_config=...)`` and ``AutoParallel(train_one_step).pipeline(2)``;
* ``model``: ``Model(AutoParallel(Pipeline(...)).pipeline(2), optimizer=SGD(every param))``.

``--deferred`` builds the network under ``no_init_parameters``.
"""
import argparse
import hashlib
import os

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn, ops
from minitorch_dist.nn.utils import no_init_parameters
from minitorch_dist.train import Callback, Model

parser = argparse.ArgumentParser()
parser.add_argument("--form", choices=["cell", "v26", "model"], default="cell")
parser.add_argument("--deferred", action="store_true")
parser.add_argument("--seed-per-rank", action="store_true",
                    help="ms.set_seed(100 + rank): different draws even where the default "
                         "stream would agree")
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--strategy-dir", default=None,
                    help="AutoParallel forms: save_param_strategy_file(DIR/strategy<rank>.ckpt)")
args = parser.parse_args()

STAGES, MICRO, BATCH = 2, 2, 8
NAMES = {"_backbone.fc1": 0, "_backbone.fc2": 0, "_backbone.fc3": 1, "_backbone.fc4": 1}

communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
replicas = world // STAGES
if args.seed_per_rank:
    ms.set_seed(100 + rank)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Dense(6, 16), nn.Dense(16, 16)
        self.fc3, self.fc4 = nn.Dense(16, 16), nn.Dense(16, 3)
        self.relu = nn.ReLU()

    def construct(self, x):
        x = self.relu(self.fc2(self.relu(self.fc1(x))))
        return self.fc4(self.relu(self.fc3(x)))


def digest(params):
    h = hashlib.sha256()
    for p in sorted(params, key=lambda p: p.name):
        h.update(p.name.encode())
        h.update(np.ascontiguousarray(p.asnumpy()).tobytes())
    return h.hexdigest()[:16]


rng = np.random.default_rng(0)
n = args.steps * BATCH * replicas
x = rng.standard_normal((n, 6)).astype(np.float32)
y = (x[:, :3].sum(1) > 0).astype(np.int32) + (x[:, 3] > 1).astype(np.int32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(BATCH)
loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        self.values.append(float(run_context.original_args().net_outputs.asnumpy()))


def build():
    if args.deferred:
        with no_init_parameters():
            net = Net()
    else:
        net = Net()
    return net


ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                             gradients_mean=True)
losses = Losses()
if args.form == "cell":
    ms.set_auto_parallel_context(pipeline_stages=STAGES)
    net = build()
    net.fc1.pipeline_stage = net.fc2.pipeline_stage = 0
    net.fc3.pipeline_stage = net.fc4.pipeline_stage = 1
    pipe = nn.PipelineCell(nn.WithLossCell(net, loss_fn), MICRO)
    opt = nn.Momentum(net.infer_param_pipeline_stage(), 0.1, 0.9)
    initial = None if args.deferred else digest([p for p in net.trainable_params()
                                                 if not p.released])
    Model(pipe, optimizer=opt).train(1, data, callbacks=[losses], dataset_sink_mode=True)
else:
    from minitorch_dist.parallel.auto_parallel import AutoParallel

    def save_strategy(parallel):
        if args.strategy_dir:
            parallel.save_param_strategy_file(
                os.path.join(args.strategy_dir, f"strategy{rank}.ckpt"))

    from minitorch_dist.parallel.nn import Pipeline, PipelineGradReducer
    net = build()
    optimizer = nn.SGD(net.trainable_params(), 0.1)
    pipe = Pipeline(nn.WithLossCell(net, loss_fn), MICRO, stage_config=dict(NAMES))
    initial = None          # the stages are known at the first call
    if args.form == "model":
        parallel_net = AutoParallel(pipe, parallel_mode="semi_auto")
        parallel_net.pipeline(stages=STAGES)
        save_strategy(parallel_net)
        Model(parallel_net, optimizer=optimizer).train(1, data, callbacks=[losses],
                                                        dataset_sink_mode=True)
    else:
        reducer = PipelineGradReducer(optimizer.parameters)
        grad_fn = ops.value_and_grad(lambda a, b: pipe(a, b), None, optimizer.parameters)

        @ms.jit
        def train_one_step(a, b):
            loss, grads = grad_fn(a, b)
            optimizer(reducer(grads))
            return loss

        step = AutoParallel(train_one_step, parallel_mode="semi_auto")
        step.pipeline(stages=STAGES)
        save_strategy(step)
        batches = list(data.create_tuple_iterator())
        for k in range(args.steps):
            bx, by = batches[k * replicas + rank % replicas]
            losses.values.append(float(step(bx, by).asnumpy()))

topology = pipe.topology
own = [p for p in net.trainable_params() if not p.released]
assert own and len(losses.values) == args.steps, (own, losses.values)
print(f"REPLICA rank={rank} stage={topology.stage} initial={initial} final={digest(own)} "
      f"params={','.join(sorted(p.name for p in own))} "
      f"losses={','.join(f'{v:.6f}' for v in losses.values)}", flush=True)
communication.release()
