"""Seed 004: MindSpore's pipeline-parallel tutorial (ResNet on CIFAR-10), runnable on CPUs.

``test_train_cifar`` is the tutorial's script with only its imports changed (``mindspore`` →
``minitorch_dist``) and its literal 2s (pipeline stages, micro-batches) made arguments with
the seed's values as defaults. The pieces the tutorial leaves to its companion pages are written
here: the ResNet of the sample code (``Head``, ``MakeLayer0..3``, bottleneck blocks with
``expansion = 4``), the loss cell ``SoftmaxCrossEntropyExpand`` and ``create_dataset``.

    python examples/pipeline_resnet.py                        # one process: 1 stage
    python -m minitorch_dist.run -n 2 examples/pipeline_resnet.py   # 2 stages, as in the seed
    python -m minitorch_dist.run -n 4 examples/pipeline_resnet.py   # 4 stages

Options: ``--epochs`` (default 2), ``--num-samples`` (samples read per epoch, default all),
``--pipeline-stages`` (default: the number of ranks when it is 1, 2 or 4), ``--micro-size``
(default max(2, stages): the seed's 2 for 2 stages; it must be at least the number of
stages), ``--seed``, ``--width`` and ``--blocks`` (the size of the network).

Data: ``DATA_PATH`` names the folder holding the CIFAR-10 binaries (``data_batch_*.bin``).
Without it, every process writes the same small synthetic set in the CIFAR-10 format
(``cifar10_synthetic.py``: noise images with a blob whose colour gives the class) into a
temporary folder and trains on it through the same reader.

Every rank prints LossMonitor's ``epoch: E step: S, loss is L`` lines. The loss is the sum
of the micro-batch losses, broadcast from the last stage to the others, so with one rank per
stage (2 ranks, 2 stages; 4 ranks, 4 stages) all ranks print the same lines, and they equal
a one-process run with the same micro-batching (``--pipeline-stages 1 --micro-size M``).
With more ranks than stages (``-n 4 --pipeline-stages 2``) each replica prints its own
batches' losses. To compare bit for bit, run the single process with one BLAS thread
(``OMP_NUM_THREADS=1``), as the launcher runs each rank: a multi-threaded BLAS sums in
another order, and training (batch norm over 16 samples) amplifies those 1e-7 differences
to about 1e-3 within a few steps.
"""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import Tensor, communication, log, ops
from minitorch_dist.parallel import get_auto_parallel_context

# ---- the seed's imports, with mindspore replaced ------------------------------------------
from minitorch_dist import context, Model, nn
from minitorch_dist.nn import Momentum
from minitorch_dist.train.callback import LossMonitor, ProgressBar
from minitorch_dist.context import ParallelMode

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from cifar10_synthetic import write_synthetic_cifar10  # noqa: E402

# ---- the network's size ------------------------------------------------------------------
# The tutorial's ResNet-50 has a 64-channel stem (so layers of 256, 512, 1024 and 2048
# channels) and 3, 4, 6 and 3 bottleneck blocks per layer. Here the structure is the same but
# it is narrow enough for CPUs: base width 8 (layers of 32, 64, 128, 256 channels) and one
# block after each layer's down-sampling block. `--width 64 --blocks 2,3,5,2` is ResNet-50.
WIDTH = 8
BLOCKS = (1, 1, 1, 1)        # blocks after the down-sampling block of layer 1, 2, 3, 4

# ---- which stage runs which part ---------------------------------------------------------
# The seed's assignment for 2 stages (head, layer1, layer2 on stage 0; layer3, layer4, fc on
# stage 1), with 1 and 4 stages made from it by the same rule: consecutive parts, in
# execution order, the first stage taking the head.
PIPELINE_STAGE_MAPS = {
    1: {"head": 0, "layer1": 0, "layer2": 0, "layer3": 0, "layer4": 0, "fc": 0},
    2: {"head": 0, "layer1": 0, "layer2": 0, "layer3": 1, "layer4": 1, "fc": 1},
    4: {"head": 0, "layer1": 0, "layer2": 1, "layer3": 2, "layer4": 3, "fc": 3},
}


def weight_variable_0(shape):
    return Tensor(np.zeros(shape).astype(np.float32))


def weight_variable_1(shape):
    return Tensor(np.ones(shape).astype(np.float32))


def conv3x3(in_channels, out_channels, stride=1, padding=0):
    """3x3 convolution"""
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=padding,
                     weight_init="XavierUniform", has_bias=False, pad_mode="same")


def conv1x1(in_channels, out_channels, stride=1, padding=0):
    """1x1 convolution"""
    return nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, padding=padding,
                     weight_init="XavierUniform", has_bias=False, pad_mode="same")


def conv7x7(in_channels, out_channels, stride=1, padding=0):
    """7x7 convolution"""
    return nn.Conv2d(in_channels, out_channels, kernel_size=7, stride=stride, padding=padding,
                     weight_init="XavierUniform", has_bias=False, pad_mode="same")


def bn_with_initialize(out_channels):
    shape = (out_channels,)
    mean = weight_variable_0(shape)
    var = weight_variable_1(shape)
    beta = weight_variable_0(shape)
    return nn.BatchNorm2d(out_channels, momentum=0.99, eps=0.00001, gamma_init="Uniform",
                          beta_init=beta, moving_mean_init=mean, moving_var_init=var)


def bn_with_initialize_last(out_channels):
    shape = (out_channels,)
    mean = weight_variable_0(shape)
    var = weight_variable_1(shape)
    beta = weight_variable_0(shape)
    return nn.BatchNorm2d(out_channels, momentum=0.99, eps=0.00001, gamma_init="Uniform",
                          beta_init=beta, moving_mean_init=mean, moving_var_init=var)


def fc_with_initialize(input_channels, out_channels):
    return nn.Dense(input_channels, out_channels, weight_init="XavierUniform", bias_init="Uniform")


class ResidualBlock(nn.Cell):
    """Bottleneck block: 1x1 → 3x3 → 1x1 (x4 channels), plus the identity."""
    expansion = 4

    def __init__(self, in_channels, out_channels, stride=1):
        super(ResidualBlock, self).__init__()
        out_chls = out_channels // self.expansion
        self.conv1 = conv1x1(in_channels, out_chls, stride=stride, padding=0)
        self.bn1 = bn_with_initialize(out_chls)
        self.conv2 = conv3x3(out_chls, out_chls, stride=1, padding=0)
        self.bn2 = bn_with_initialize(out_chls)
        self.conv3 = conv1x1(out_chls, out_channels, stride=1, padding=0)
        self.bn3 = bn_with_initialize_last(out_channels)
        self.relu = ops.ReLU()
        self.add = ops.Add()

    def construct(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)
        out = self.conv3(out)
        out = self.bn3(out)
        out = self.add(out, self.shortcut(identity))
        out = self.relu(out)
        return out

    def shortcut(self, x):
        return x


class ResidualBlockWithDown(ResidualBlock):
    """Bottleneck block whose shortcut is a strided 1x1 convolution (down-sampling)."""

    def __init__(self, in_channels, out_channels, stride=1, down_sample=False):
        super(ResidualBlockWithDown, self).__init__(in_channels, out_channels, stride)
        self.downSample = down_sample
        self.conv_down_sample = conv1x1(in_channels, out_channels, stride=stride, padding=0)
        self.bn_down_sample = bn_with_initialize(out_channels)

    def shortcut(self, x):
        return self.bn_down_sample(self.conv_down_sample(x))


class _MakeLayer(nn.Cell):
    """A down-sampling block, then ``num_blocks`` blocks (the sample code's MakeLayerN)."""

    def __init__(self, block, in_channels, out_channels, stride, num_blocks):
        super(_MakeLayer, self).__init__()
        self.a = ResidualBlockWithDown(in_channels, out_channels, stride=stride, down_sample=True)
        self.blocks = nn.CellList([block(out_channels, out_channels, stride=1)
                                   for _ in range(num_blocks)])

    def construct(self, x):
        x = self.a(x)
        for b in self.blocks:
            x = b(x)
        return x


class MakeLayer0(_MakeLayer):
    """Layer 1 (stride 1; 3 blocks after the down-sampling one in ResNet-50)."""

    def __init__(self, block, in_channels, out_channels, stride, num_blocks=BLOCKS[0]):
        super(MakeLayer0, self).__init__(block, in_channels, out_channels, stride, num_blocks)


class MakeLayer1(_MakeLayer):
    """Layer 2 (4 in ResNet-50)."""

    def __init__(self, block, in_channels, out_channels, stride, num_blocks=BLOCKS[1]):
        super(MakeLayer1, self).__init__(block, in_channels, out_channels, stride, num_blocks)


class MakeLayer2(_MakeLayer):
    """Layer 3 (6 in ResNet-50)."""

    def __init__(self, block, in_channels, out_channels, stride, num_blocks=BLOCKS[2]):
        super(MakeLayer2, self).__init__(block, in_channels, out_channels, stride, num_blocks)


class MakeLayer3(_MakeLayer):
    """Layer 4 (3 in ResNet-50)."""

    def __init__(self, block, in_channels, out_channels, stride, num_blocks=BLOCKS[3]):
        super(MakeLayer3, self).__init__(block, in_channels, out_channels, stride, num_blocks)


class Head(nn.Cell):
    """The stem: 7x7 convolution (stride 2), batch norm, ReLU, 3x3 max pool (stride 2)."""

    def __init__(self, width=None):
        super(Head, self).__init__()
        width = WIDTH if width is None else width
        self.conv1 = conv7x7(3, width, stride=2, padding=0)
        self.bn1 = bn_with_initialize(width)
        self.relu = ops.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")

    def construct(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        return x


class ResNet(nn.Cell):
    """ResNet"""

    def __init__(self, block, num_classes=100, batch_size=32, width=None, blocks=None):
        """init"""
        super(ResNet, self).__init__()
        w = WIDTH if width is None else width       # 64 in the tutorial
        blocks = BLOCKS if blocks is None else blocks
        self.batch_size = batch_size
        self.num_classes = num_classes
        self.head = Head(w)
        self.layer1 = MakeLayer0(block, in_channels=w, out_channels=4 * w, stride=1,
                                 num_blocks=blocks[0])
        self.layer2 = MakeLayer1(block, in_channels=4 * w, out_channels=8 * w, stride=2,
                                 num_blocks=blocks[1])
        self.layer3 = MakeLayer2(block, in_channels=8 * w, out_channels=16 * w, stride=2,
                                 num_blocks=blocks[2])
        self.layer4 = MakeLayer3(block, in_channels=16 * w, out_channels=32 * w, stride=2,
                                 num_blocks=blocks[3])
        self.pool = ops.ReduceMean(keep_dims=True)
        self.squeeze = ops.Squeeze(axis=(2, 3))
        self.fc = fc_with_initialize(8 * w * block.expansion, num_classes)   # 512 * 4 in the tutorial

        # pipeline parallel config: the seed's assignment for 2 stages (PIPELINE_STAGE_MAPS)
        stage = PIPELINE_STAGE_MAPS[get_auto_parallel_context("pipeline_stages")]
        self.head.pipeline_stage = stage["head"]
        self.layer1.pipeline_stage = stage["layer1"]
        self.layer2.pipeline_stage = stage["layer2"]
        self.layer3.pipeline_stage = stage["layer3"]
        self.layer4.pipeline_stage = stage["layer4"]
        self.fc.pipeline_stage = stage["fc"]

    def construct(self, x):
        """construct"""
        x = self.head(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.pool(x, (2, 3))
        x = self.squeeze(x)
        x = self.fc(x)
        return x


def resnet50(batch_size, num_classes):
    """The tutorial's ``resnet50`` (narrowed: see WIDTH and BLOCKS)."""
    return ResNet(ResidualBlock, num_classes, batch_size)


class SoftmaxCrossEntropyExpand(nn.Cell):
    """The tutorial's loss cell: softmax cross-entropy written out from primitives, averaged
    over the batch (``sparse=True``: the labels are class indices, made one-hot here)."""

    def __init__(self, sparse=False):
        super(SoftmaxCrossEntropyExpand, self).__init__()
        self.exp = ops.Exp()
        self.sum = ops.ReduceSum(keep_dims=True)
        self.onehot = ops.OneHot()
        self.on_value = Tensor(1.0, ms.float32)
        self.off_value = Tensor(0.0, ms.float32)
        self.div = ops.Div()            # MindSpore's sample uses RealDiv
        self.log = ops.Log()
        self.sum_cross_entropy = ops.ReduceSum(keep_dims=False)
        self.mul = ops.Mul()
        self.mul2 = ops.Mul()
        self.mean = ops.ReduceMean(keep_dims=False)
        self.sparse = sparse
        self.max = ops.ReduceMax(keep_dims=True)
        self.sub = ops.Sub()
        self.eps = Tensor(1e-24, ms.float32)
        self.minus_one = Tensor(-1.0, ms.float32)

    def construct(self, logit, label):
        logit_max = self.max(logit, -1)
        exp = self.exp(self.sub(logit, logit_max))
        exp_sum = self.sum(exp, -1)
        softmax_result = self.div(exp, exp_sum)
        if self.sparse:
            # the sample's F.shape(logit)[1]; ops.shape here is a module, not a function
            label = self.onehot(label, logit.shape[1], self.on_value, self.off_value)
        softmax_result_log = self.log(softmax_result + self.eps)
        loss = self.sum_cross_entropy((self.mul(softmax_result_log, label)), -1)
        loss = self.mul2(self.minus_one, loss)
        loss = self.mean(loss, -1)
        return loss


def create_dataset(data_path, repeat_num=1, batch_size=32, num_samples=None):
    """CIFAR-10 from ``data_path``: the sample code's pipeline, sharded by pipeline replica.

    The ranks of one pipeline replica (one rank per stage) must read the same batches, so the
    shards are replicas, not ranks. Not here: the sample's Resize to 224x224 (32x32 inputs
    keep this runnable on CPUs; ``examples/pipeline_resnet50_cifar.py`` has its augmentation).
    """
    rescale = 1.0 / 255.0
    shift = 0.0
    num_shards, shard_id = ms.parallel.pipeline.pipeline_data_shard()
    data_set = ds.Cifar10Dataset(data_path, usage="train", num_shards=num_shards,
                                 shard_id=shard_id, num_samples=num_samples)
    # define map operations
    rescale_op = ds.vision.Rescale(rescale, shift)
    normalize_op = ds.vision.Normalize((0.4465, 0.4822, 0.4914), (0.2010, 0.1994, 0.2023))
    changeswap_op = ds.vision.HWC2CHW()
    type_cast_op = ds.transforms.TypeCast(ms.int32)
    c_trans = [rescale_op, normalize_op, changeswap_op]
    # apply map operations on images
    data_set = data_set.map(operations=type_cast_op, input_columns="label")
    data_set = data_set.map(operations=c_trans, input_columns="image")
    # apply shuffle operations
    data_set = data_set.shuffle(buffer_size=10)
    # apply batch operations
    data_set = data_set.batch(batch_size=batch_size, drop_remainder=True)
    # apply repeat operations
    data_set = data_set.repeat(repeat_num)
    return data_set


def test_train_cifar(epoch_size=10, pipeline_stages=2, micro_size=2, num_samples=None):
    """The tutorial's training function; its literal 2s (stages, micro-batches) are
    arguments here, defaulting to the seed's values."""
    context.set_auto_parallel_context(parallel_mode=ParallelMode.SEMI_AUTO_PARALLEL, gradients_mean=True)
    context.set_auto_parallel_context(pipeline_stages=pipeline_stages, save_graphs=True)
    loss_cb = LossMonitor()
    data_path = os.getenv('DATA_PATH')
    dataset = create_dataset(data_path, num_samples=num_samples)
    batch_size = 32
    num_classes = 10
    net = resnet50(batch_size, num_classes)
    loss = SoftmaxCrossEntropyExpand(sparse=True)
    net_with_loss = nn.WithLossCell(net, loss)
    net_pipeline = nn.PipelineCell(net_with_loss, micro_size)
    opt = Momentum(net.infer_param_pipeline_stage(), 0.01, 0.9)
    model = Model(net_pipeline, optimizer=opt)
    # added: a progress bar when the output is a terminal (off in logs and under mpiexec)
    model.train(epoch_size, dataset, callbacks=[loss_cb, ProgressBar(leave=False)],
                dataset_sink_mode=True)
    return net_pipeline, opt


# ---- running it ---------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Seed 004: pipeline-parallel ResNet on CIFAR-10")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--num-samples", "--num_samples", type=int, default=None,
                        help="samples read per epoch by each replica (default: all)")
    parser.add_argument("--pipeline-stages", "--pipeline_stages", type=int, default=None,
                        help="1, 2 or 4 (default: the number of ranks, when it is one of these)")
    parser.add_argument("--micro-size", "--micro_size", type=int, default=None,
                        help="micro-batches per batch of 32 (default: max(2, stages))")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--width", type=int, default=WIDTH, help="stem channels (64 in ResNet-50)")
    parser.add_argument("--blocks", default=",".join(map(str, BLOCKS)),
                        help="blocks after each layer's down-sampling block (ResNet-50: 2,3,5,2)")
    parser.add_argument("--synthetic-samples", "--synthetic_samples", type=int, default=320,
                        help="training images of the synthetic set (without DATA_PATH)")
    parser.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=None,
                        help="a folder with the CIFAR-10 binaries (the same as $DATA_PATH; without either: a synthetic set)")
    args = parser.parse_args(argv)
    if args.data_path is not None:        # added: the option, beside the seed's $DATA_PATH
        if not os.path.isdir(args.data_path):
            parser.error(f"--data_path {args.data_path} is not a directory")
        os.environ["DATA_PATH"] = args.data_path
    blocks = tuple(int(b) for b in args.blocks.split(","))
    if len(blocks) != 4 or min(blocks) < 0:
        parser.error(f"--blocks needs 4 counts >= 0, got {args.blocks!r}")
    args.blocks = blocks
    if args.width < 1:
        parser.error("--width must be positive")
    return parser, args


def choose_stages(parser, args, world):
    if args.pipeline_stages is None:
        if world not in PIPELINE_STAGE_MAPS:
            parser.error(f"{world} ranks: pass --pipeline-stages (one of "
                         f"{sorted(PIPELINE_STAGE_MAPS)}, dividing the number of ranks)")
        args.pipeline_stages = world
    stages = args.pipeline_stages
    if stages not in PIPELINE_STAGE_MAPS:
        parser.error(f"--pipeline-stages must be one of {sorted(PIPELINE_STAGE_MAPS)}, got {stages}")
    if world % stages:
        parser.error(f"--pipeline-stages {stages} does not divide the {world} ranks")
    if args.micro_size is None:
        args.micro_size = max(2, stages)
    if args.micro_size < stages or 32 % args.micro_size:
        parser.error(f"--micro-size must be at least the {stages} stages and divide the batch "
                     f"of 32, got {args.micro_size}")


def main(argv=None):
    global WIDTH, BLOCKS
    parser, args = parse_args(argv)
    log.rank0_progress_only()   # under the launcher: rank 0's lines only (all in the logs)
    communication.init()
    rank, world = communication.get_rank(), communication.get_group_size()
    choose_stages(parser, args, world)
    WIDTH, BLOCKS = args.width, args.blocks
    ms.set_seed(args.seed)
    temp_dir = None
    if not os.getenv("DATA_PATH"):
        # Every process writes the same bytes into a folder of its own (no shared-disk race).
        temp_dir = tempfile.mkdtemp(prefix=f"cifar10_synthetic_rank{rank}_")
        write_synthetic_cifar10(temp_dir, num_train=args.synthetic_samples, num_test=0,
                                seed=args.seed)
        os.environ["DATA_PATH"] = temp_dir
    try:
        net_pipeline, opt = test_train_cifar(args.epochs, args.pipeline_stages, args.micro_size,
                                             args.num_samples)
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    topology = net_pipeline.topology
    stage = 0 if topology is None else topology.stage
    print(f"PIPELINE_RESNET rank={rank} world={world} stages={args.pipeline_stages} "
          f"stage={stage} micro_size={args.micro_size} "
          f"params={sum(int(np.prod(p.shape)) for p in opt.parameters)}", flush=True)
    communication.release()


if __name__ == "__main__":
    main()
