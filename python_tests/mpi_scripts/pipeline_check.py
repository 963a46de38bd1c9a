"""Pipeline parallelism on real ranks against one process.

Every rank builds the same small conv net from one seed; the pipelined run trains it with
``Model.train`` (or a ``value_and_grad`` loop with ``nn.PipelineGradReducer``) and each rank
compares its own stage's parameters with a stand-alone run of the unpipelined network
trained on the summed micro-batch loss (one ``PipelineCell`` of one stage). Also checked:
the loss every rank reports, other stages' weights released and never touched, a parameter
shared by the first and last stage, and merged stage checkpoints loading into the plain net.
Prints ``PIPELINE_CHECK OK ... max_rel=R`` on rank 0.
"""
import argparse
import os

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn, ops
from minitorch_dist.train import Callback, Model

parser = argparse.ArgumentParser()
parser.add_argument("--stages", type=int, default=2)
parser.add_argument("--micro", type=int, default=4)
parser.add_argument("--scheduler", default="1f1b")
parser.add_argument("--interleave", action="store_true")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--loop", action="store_true", help="value_and_grad + PipelineGradReducer")
parser.add_argument("--all-params", action="store_true",
                    help="the optimizer over net.trainable_params() (MindSpore 2.x scripts)")
parser.add_argument("--v26", action="store_true",
                    help="MindSpore 2.6's form: Pipeline(stage_config=...), AutoParallel(...)"
                         ".pipeline(stages), jit, an optimizer over every parameter")
parser.add_argument("--ckpt-dir", default=None)
parser.add_argument("--gpu", action="store_true", help="device_target GPU (the virtual GPU here)")
args = parser.parse_args()
if args.gpu:
    ms.set_context(device_target="GPU")

communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
replicas = world // args.stages


class Block(nn.Cell):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, pad_mode="same", has_bias=True)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.conv(x))


class Head(nn.Cell):
    def __init__(self, gain):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(4 * 6 * 6, 5)
        self.gain = gain                    # the same Parameter as the first block's
        self.mul = ops.Mul()

    def construct(self, x):
        return self.mul(self.fc(self.flatten(x)), self.gain)


class Net(nn.Cell):
    """Four staged parts; the first block's gain is shared with the head (last stage)."""

    def __init__(self, stage_of):
        super().__init__()
        self.b1 = Block(2, 4)
        self.b1.gain = ms.Parameter(ms.Tensor(np.full((5,), 1.5, np.float32)), name="gain")
        self.b2 = Block(4, 4)
        self.b3 = Block(4, 4)
        self.head = Head(self.b1.gain)
        for i, cell in enumerate((self.b1, self.b2, self.b3, self.head)):
            if not args.v26:                # --v26 names the stages in Pipeline's stage_config
                cell.pipeline_stage = stage_of[i]
        self.b1.gain.add_pipeline_stage(stage_of[0])
        self.b1.gain.add_pipeline_stage(stage_of[3])

    def construct(self, x):
        x = self.b1(x)
        x = self.b2(x)
        x = ops.relu(x) * 1.0               # unstaged code between stages runs before the border
        x = self.b3(x)
        return self.head(x)


def stage_map():
    if args.interleave:
        return [i % args.stages for i in range(4)]
    return [i * args.stages // 4 for i in range(4)]


rng = np.random.default_rng(0)
global_batch = args.batch * replicas
n = args.steps * global_batch
x = rng.standard_normal((n, 2, 6, 6)).astype(np.float32)
y = rng.integers(0, 5, n).astype(np.int32)


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        out = run_context.original_args().net_outputs
        self.values.append(float(out.asnumpy()))


def build(stages, stage_of, micro):
    ms.set_auto_parallel_context(pipeline_stages=stages)
    ms.set_seed(7)
    net = Net(stage_of)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return net, nn.PipelineCell(nn.WithLossCell(net, loss), micro)


def train_v26():
    """MindSpore 2.6's pipeline tutorial form; returns (net, its Pipeline, this rank's own
    parameters)."""
    from minitorch_dist.parallel.auto_parallel import AutoParallel
    from minitorch_dist.parallel.nn import Pipeline, PipelineGradReducer
    ms.set_auto_parallel_context(pipeline_stages=1)      # AutoParallel.pipeline sets them
    ms.set_seed(7)
    net = Net(stage_map())
    optimizer = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    reducer = PipelineGradReducer(optimizer.parameters)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    names = ("_backbone.b1", "_backbone.b2", "_backbone.b3", "_backbone.head")
    pipe = Pipeline(nn.WithLossCell(net, loss_fn), args.micro,
                    stage_config=dict(zip(names, stage_map())))
    grad_fn = ops.value_and_grad(lambda a, b: pipe(a, b), None, optimizer.parameters)

    @ms.jit
    def train_one_step(a, b):
        loss, grads = grad_fn(a, b)
        optimizer(reducer(grads))
        return loss

    step = AutoParallel(train_one_step, parallel_mode="semi_auto")
    step.pipeline(stages=args.stages, scheduler=args.scheduler, interleave=args.interleave)
    batches = list(ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False)
                   .batch(args.batch).create_tuple_iterator())
    replica = rank % replicas
    for k in range(args.steps):
        bx, by = batches[k * replicas + replica]
        losses.values.append(float(step(bx, by).asnumpy()))
    return net, pipe, [p for p in net.trainable_params() if not p.released]


# ---- pipelined ----------------------------------------------------------------------------
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL, gradients_mean=True,
                             pipeline_config={"pipeline_scheduler": args.scheduler,
                                              "pipeline_interleave": args.interleave})
losses = Losses()
if not args.v26:
    net, net_pipeline = build(args.stages, stage_map(), args.micro)
    initial = {p.name: p.asnumpy().copy() for p in net.trainable_params() if not p.released}
    params = net.infer_param_pipeline_stage()
    opt = nn.Momentum(net.trainable_params() if args.all_params else params, 0.1, 0.9)
    data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(args.batch)
if args.v26:
    ms.set_seed(7)
    initial = {p.name: p.asnumpy().copy() for p in Net(stage_map()).trainable_params()}
    net, net_pipeline, params = train_v26()
elif args.loop:
    grad_fn = ms.value_and_grad(net_pipeline, None, opt.parameters)
    reducer = nn.PipelineGradReducer(opt.parameters)
    batches = list(data.create_tuple_iterator())
    topology = net_pipeline.topology
    for k in range(args.steps):
        bx, by = batches[k * replicas + topology.replica]
        loss, grads = grad_fn(bx, by)
        opt(reducer(grads))
        losses.values.append(float(loss.asnumpy()))
else:
    model = Model(net_pipeline, optimizer=opt, metrics={"accuracy", "loss"})
    model.train(1, data, callbacks=[losses], dataset_sink_mode=True)
assert len(losses.values) == args.steps, losses.values
mine = {p.name: p for p in params}

# ---- one process, unpipelined ------------------------------------------------------------
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.STAND_ALONE,
                             pipeline_config={"pipeline_scheduler": "1f1b",
                                              "pipeline_interleave": False})
ref_net, ref_pipeline = build(1, stage_map(), args.micro * replicas)
ref_opt = nn.Momentum(ref_net.trainable_params(), 0.1, 0.9)
step = nn.TrainOneStepCell(ref_pipeline, ref_opt, sens=1.0 / replicas)
ref_losses = []
for k in range(args.steps):
    sl = slice(k * global_batch, (k + 1) * global_batch)
    ref_losses.append(float(step(ms.Tensor(x[sl]), ms.Tensor(y[sl])).asnumpy()))
reference = {p.name: p.asnumpy() for p in ref_net.trainable_params()}

# ---- checks -------------------------------------------------------------------------------
worst = 0.0
for name, p in mine.items():
    want = reference[name]
    rel = float(np.abs(p.asnumpy() - want).max() / (np.abs(want).max() + 1e-12))
    worst = max(worst, rel)
    assert not np.array_equal(p.asnumpy(), initial[name]), f"{name} did not train"
for p in net.trainable_params():
    if p.name not in mine:
        assert p.released and all(s == 0 for s in p.data.strides), f"rank {rank} holds {p.name}"
if replicas == 1:       # every rank reports the whole loss of the step
    for got, want in zip(losses.values, ref_losses):
        assert abs(got - want) <= 1e-5 * abs(want), (losses.values, ref_losses)
gain_shared = net.b1.gain.pipeline_stages == {stage_map()[0], stage_map()[3]}
assert gain_shared, net.b1.gain.pipeline_stages

if not args.loop and not args.v26:          # evaluation and prediction through the pipeline, on every rank
    evaluated = model.eval(ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(args.batch))
    predicted = model.predict(ms.Tensor(x[:args.batch])).asnumpy()
    ref_net.set_train(False)
    want_logits = ref_net(ms.Tensor(x)).asnumpy()
    np.testing.assert_allclose(predicted, want_logits[:args.batch], rtol=1e-4, atol=1e-5)
    accuracy = float((want_logits.argmax(1) == y).mean())
    assert abs(evaluated["accuracy"] - accuracy) < 1e-9, (evaluated, accuracy)
    print(f"rank {rank}: eval {evaluated}", flush=True)

if args.ckpt_dir:
    ms.save_checkpoint(net, os.path.join(args.ckpt_dir, f"rank_{rank}.ckpt"))
    communication.get_communicator().barrier()
    if rank == 0:
        files = [os.path.join(args.ckpt_dir, f"rank_{s * replicas}.ckpt") for s in range(args.stages)]
        merged = ms.parallel.pipeline.merge_pipeline_checkpoints(files, os.path.join(
            args.ckpt_dir, "merged.ckpt"))
        ms.set_seed(123)
        plain = Net([0, 0, 0, 0])
        missing, _ = ms.load_param_into_net(plain, ms.load_checkpoint(os.path.join(
            args.ckpt_dir, "merged.ckpt")))
        assert not missing, missing
        for p in plain.trainable_params():
            np.testing.assert_allclose(p.asnumpy(), reference[p.name], rtol=1e-5, atol=1e-6)
        print("PIPELINE_CKPT OK", flush=True)

stats = net_pipeline.stats
if args.stages > 1:       # the runtime holds what the schedule simulator predicts
    from minitorch_dist.parallel.pipeline import generate_schedule
    predicted = generate_schedule(stats["schedule"], args.stages, args.micro,
                                  chunks=2 if args.interleave else 1).simulate().peak_activations
    stage = net_pipeline.topology.stage
    assert stats["peak_live_microbatches"] == predicted[stage], (stats, predicted)
    assert stats["peak_activation_bytes"] > 0, stats
worst = float(communication.get_communicator().allreduce(np.array([worst]), "max")[0])
print(f"rank {rank}: stage {net_pipeline.topology.stage} on {params[0].device} "
      f"params {sorted(mine)} "
      f"held {stats['parameter_bytes_held']}/{stats['parameter_bytes_model']} "
      f"loss {losses.values[-1]:.6f}", flush=True)
if rank == 0:
    print(f"PIPELINE_CHECK OK world={world} stages={args.stages} max_rel={worst:.3e}", flush=True)
communication.release()
