"""ResNet-50 on CIFAR-10 with pipeline plus data parallelism, in the shape of MindSpore's
complete sample (``resnet50_distributed_training_pipeline.py``, r1.6), at 32x32 on CPUs.

Like the sample, it shards the dataset by global rank (``num_shards=get_group_size(),
shard_id=get_rank()``), augments with the 1.x ``c_transforms`` (RandomCrop with padding,
RandomHorizontalFlip, Rescale, Normalize, HWC2CHW, TypeCast), sets ``full_batch=True`` and
trains ``nn.PipelineCell(nn.WithLossCell(net, loss), micro_size)`` with ``Model`` and
``Momentum`` over this stage's parameters. ``Model.train`` makes the stages of a replica
read the same samples (it says so once: see ``docs/pipeline.md``). Unlike the sample, the
images stay 32x32 (no Resize to 224) and the network is narrow (``--width``), with
ResNet-50's depth (3, 4, 6, 3 bottleneck blocks) by default.

    python -m minitorch_dist.run -n 2 examples/pipeline_resnet50_cifar.py    # 2 stages
    python -m minitorch_dist.run -n 8 examples/pipeline_resnet50_cifar.py    # 2 stages x 4
    python examples/pipeline_resnet50_cifar.py --reference 4                 # one process

``--reference D`` trains in one process what the ``2 x D``-rank job trains: each global
batch cut into ``D`` replica parts, each part into micro-batches, the gradients summed over
micro-batches and averaged over the parts. ``--save DIR`` writes each rank's stage
parameters after every step (``rank<R>_step<S>.npz``; the reference writes
``reference_step<S>.npz``), which ``python_tests/test_pipeline_resnet50_example.py``
compares: the replicas of a stage agree bit for bit, and after a step they equal the
one-process run to <= 1e-5. (Later steps drift apart by rounding: the replicas' gradients
are summed in MPI's order, and batch norm over a few rows amplifies 1e-7 differences,
to about 1e-4 of the small batch-norm offsets after two steps.)

Data: ``DATA_PATH``, else the same small synthetic set in the CIFAR-10 binary format
(``cifar10_synthetic.py``) written by every process into a folder of its own.
"""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
import minitorch_dist.dataset.transforms.c_transforms as C
import minitorch_dist.dataset.vision.c_transforms as vision
from minitorch_dist import Model, communication, context, log, nn
from minitorch_dist.context import ParallelMode
from minitorch_dist.nn import Momentum
from minitorch_dist.train.callback import Callback, LossMonitor

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from cifar10_synthetic import write_synthetic_cifar10  # noqa: E402
from pipeline_resnet import ResidualBlock, ResNet, SoftmaxCrossEntropyExpand  # noqa: E402

RESNET50_BLOCKS = (2, 3, 5, 2)     # blocks after each layer's down-sampling block: 3, 4, 6, 3


def create_dataset(data_path, batch_size, rank_id, rank_size, augment=True):
    """The sample's pipeline at 32x32: sharded by rank, augmented, shuffled, batched."""
    data_set = ds.Cifar10Dataset(data_path, usage="train", num_shards=rank_size, shard_id=rank_id)
    c_trans = [vision.RandomCrop((32, 32), (4, 4, 4, 4)), vision.RandomHorizontalFlip()] \
        if augment else []
    c_trans += [vision.Rescale(1.0 / 255.0, 0.0),
                vision.Normalize((0.4465, 0.4822, 0.4914), (0.2010, 0.1994, 0.2023)),
                vision.HWC2CHW()]
    data_set = data_set.map(operations=C.TypeCast(ms.int32), input_columns="label")
    data_set = data_set.map(operations=c_trans, input_columns="image")
    data_set = data_set.shuffle(buffer_size=10)
    return data_set.batch(batch_size=batch_size, drop_remainder=True)


class StepLog(Callback):
    """Keeps each step's loss (LossMonitor prints them) and, with a folder, saves this rank's
    parameters after every step."""

    def __init__(self, params, folder, name):
        self.losses = []
        self.params, self.folder, self.name = params, folder, name

    def on_train_step_end(self, run_context):
        self.losses.append(float(np.asarray(run_context.original_args().net_outputs.asnumpy())))
        save_params(self.params, self.folder, f"{self.name}_step{len(self.losses)}")


def save_params(params, folder, name):
    if folder:
        np.savez(os.path.join(folder, f"{name}.npz"), **{p.name: p.asnumpy() for p in params})


def build(args):
    net = ResNet(ResidualBlock, num_classes=10, batch_size=args.batch_size, width=args.width,
                 blocks=args.blocks)
    net_with_loss = nn.WithLossCell(net, SoftmaxCrossEntropyExpand(sparse=True))
    return net, nn.PipelineCell(net_with_loss, args.micro_size)


def train_pipeline(args):
    """The distributed job: every rank runs this."""
    context.set_auto_parallel_context(parallel_mode=ParallelMode.SEMI_AUTO_PARALLEL,
                                      gradients_mean=True)
    context.set_auto_parallel_context(pipeline_stages=2, full_batch=True)
    rank, world = communication.get_rank(), communication.get_group_size()
    dataset = create_dataset(os.environ["DATA_PATH"], args.batch_size, rank, world, args.augment)
    net, net_pipeline = build(args)
    opt = Momentum(net.infer_param_pipeline_stage(), args.lr, 0.9)
    log = StepLog(opt.parameters, args.save, f"rank{rank}")
    Model(net_pipeline, optimizer=opt).train(args.epochs, dataset,
                                             callbacks=[LossMonitor(), log],
                                             dataset_sink_mode=True)
    topology = net_pipeline.topology
    print(f"PIPELINE_RESNET50 rank={rank} world={world} stage={topology.stage} "
          f"replica={topology.replica} params={len(opt.parameters)} "
          f"losses={','.join(f'{v:.6f}' for v in log.losses)}", flush=True)


def train_reference(args):
    """One process training what the 2 x D-rank job trains (module docstring)."""
    replicas = args.reference
    context.set_auto_parallel_context(pipeline_stages=1)
    dataset = create_dataset(os.environ["DATA_PATH"], args.batch_size, 0, 1, args.augment)
    net, net_pipeline = build(args)
    params = net.trainable_params()
    opt = Momentum(params, args.lr, 0.9)
    grad_fn = ms.value_and_grad(net_pipeline, None, params)
    part = args.batch_size // replicas
    losses = []
    steps = 0
    for _ in range(args.epochs):
        for image, label in dataset.create_tuple_iterator(num_epochs=1):
            total = None
            for j in range(replicas):
                loss, grads = grad_fn(image[j * part:(j + 1) * part], label[j * part:(j + 1) * part])
                total = list(grads) if total is None else [t + g for t, g in zip(total, grads)]
                losses.append(float(loss.asnumpy()))
            opt(tuple(t / replicas for t in total))
            steps += 1
            save_params(params, args.save, f"reference_step{steps}")
    print(f"REFERENCE replicas={replicas} params={len(params)} "
          f"losses={','.join(f'{v:.6f}' for v in losses)}", flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32, help="the global batch")
    parser.add_argument("--micro-size", "--micro_size", type=int, default=2)
    parser.add_argument("--width", type=int, default=4, help="stem channels (64 in ResNet-50)")
    parser.add_argument("--blocks", default=",".join(map(str, RESNET50_BLOCKS)))
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--samples", type=int, default=64, help="synthetic training images")
    parser.add_argument("--no-augment", "--no_augment", dest="augment", action="store_false")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--save", default=None,
                        help="folder for the parameters (.npz), created if needed")
    parser.add_argument("--reference", type=int, default=0, metavar="D",
                        help="train in one process what 2 x D ranks train")
    parser.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=None,
                        help="a folder with the CIFAR-10 binaries (the same as $DATA_PATH; without either: a synthetic set)")
    args = parser.parse_args(argv)
    if args.save is not None:
        try:
            os.makedirs(args.save, exist_ok=True)
        except OSError as exc:
            parser.error(f"--save {args.save}: cannot create the folder ({exc.strerror})")
    if args.data_path is not None:        # added: the option, beside the seed's $DATA_PATH
        if not os.path.isdir(args.data_path):
            parser.error(f"--data_path {args.data_path} is not a directory")
        os.environ["DATA_PATH"] = args.data_path
    args.blocks = tuple(int(b) for b in args.blocks.split(","))
    if len(args.blocks) != 4 or min(args.blocks) < 0 or args.width < 1:
        parser.error("--blocks needs 4 counts >= 0 and --width a positive int")
    return args


def main(argv=None):
    args = parse_args(argv)
    log.rank0_progress_only()   # under the launcher: rank 0's lines only (all in the logs)
    if not args.reference:
        communication.init()
    rank = communication.get_rank() if not args.reference else 0
    ms.set_seed(args.seed)
    temp_dir = None
    if not os.getenv("DATA_PATH"):
        temp_dir = tempfile.mkdtemp(prefix=f"cifar10_resnet50_rank{rank}_")
        write_synthetic_cifar10(temp_dir, num_train=args.samples, num_test=0, num_train_files=1,
                                seed=args.seed)
        os.environ["DATA_PATH"] = temp_dir
    try:
        if args.reference:
            train_reference(args)
        else:
            train_pipeline(args)
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
