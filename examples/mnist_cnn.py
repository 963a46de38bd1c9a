"""SINGA's MNIST CNN, trained with minitorch_dist's ``Model`` on real handwritten digits.

By default the data are scikit-learn's bundled 8x8 digits, upsampled to MNIST's 28x28 and
written as MNIST IDX files (nothing is downloaded); ``--data-dir`` points at real MNIST IDX
files instead (``--data_path`` is accepted too, the MindSpore examples' spelling). Prints
the loss and held-out accuracy every epoch (with a progress bar over each epoch's steps when
the output is a terminal) and saves a loss curve.

    python examples/mnist_cnn.py [--epochs 8] [--batch-size 64] [--data-dir DIR]
"""
import argparse
import os
import tempfile

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import log, nn
from minitorch_dist.train import Callback, Model, ProgressBar

HERE = os.path.dirname(os.path.abspath(__file__))


class CNN(nn.Cell):
    """conv 20@5x5 → pool → conv 50@5x5 → pool → dense 500 → dense 10, as in SINGA's example."""

    def __init__(self, num_classes=10, num_channels=1):
        super().__init__()
        self.conv1 = nn.Conv2d(num_channels, 20, 5, pad_mode="valid", has_bias=True)
        self.conv2 = nn.Conv2d(20, 50, 5, pad_mode="valid", has_bias=True)
        self.linear1 = nn.Dense(800, 500)
        self.linear2 = nn.Dense(500, num_classes)
        self.pooling1 = nn.MaxPool2d(2, 2)
        self.pooling2 = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()

    def construct(self, x):
        y = self.pooling1(self.relu(self.conv1(x)))
        y = self.pooling2(self.relu(self.conv2(y)))
        y = self.relu(self.linear1(self.flatten(y)))
        return self.linear2(y)


def create_dataset(data_dir, usage, batch_size, shuffle):
    """The seed pipeline: rescale, normalise, HWC→CHW, int32 labels, batches."""
    data = ds.MnistDataset(data_dir, usage=usage, shuffle=shuffle)
    data = data.map([ds.vision.Rescale(1.0 / 255.0, 0), ds.vision.Normalize(mean=(0.1307,), std=(0.3081,)),
                     ds.vision.HWC2CHW()], "image")
    data = data.map(ds.transforms.TypeCast(ms.int32), "label")
    return data.batch(batch_size)


class EpochReport(Callback):
    """Records every step's loss; after each epoch prints the mean loss and test accuracy."""

    def __init__(self, model, test_data):
        self.model, self.test_data = model, test_data
        self.step_losses, self.epoch_losses, self.accuracies = [], [], []

    def on_train_step_end(self, run_context):
        self.step_losses.append(float(run_context.original_args().net_outputs))

    def on_train_epoch_end(self, run_context):
        cb = run_context.original_args()
        n = cb.batch_num
        loss = sum(self.step_losses[-n:]) / n
        acc = self.model.eval(self.test_data)["accuracy"]
        self.model.train_network.set_train(True)
        self.epoch_losses.append(loss)
        self.accuracies.append(acc)
        print(f"epoch {cb.cur_epoch_num}: training loss = {loss:.4f}, evaluation accuracy = {acc:.4f}",
              flush=True)


def save_loss_curve(losses, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(losses, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title("SINGA CNN on handwritten digits (minitorch_dist)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    args = build_parser().parse_args(argv)
    log.rank0_progress_only()   # under the launcher: rank 0's lines only
    ms.set_seed(0)
    if args.data_dir is not None:
        return train(args, args.data_dir)
    with tempfile.TemporaryDirectory(prefix="digits_") as folder:   # removed when done
        return train(args, ds.write_digits_as_mnist(folder, mnist_size=True))


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", "--batch_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.03, help="peak learning rate")
    parser.add_argument("--data-dir", "--data_dir", "--data_path", "--data-path", dest="data_dir", default=None,
                        help="MNIST IDX files (default: the digits data)")
    parser.add_argument("--out-dir", "--out_dir", default=os.path.join(HERE, "output"))
    return parser


def train(args, data_dir):
    """Train and evaluate on the MNIST IDX files in ``data_dir``; save the loss curve."""
    train_data = create_dataset(data_dir, "train", args.batch_size, shuffle=True)
    test_data = create_dataset(data_dir, "test", 256, shuffle=False)

    net = CNN()
    # SINGA's settings (momentum 0.9, weight decay 1e-5) with a cosine-decayed learning rate,
    # so the last epochs settle instead of bouncing on this small data set
    steps = train_data.get_dataset_size()
    lr = nn.cosine_decay_lr(args.lr / 20, args.lr, steps * args.epochs, steps, args.epochs)
    optimizer = nn.SGD(net.trainable_params(), lr, momentum=0.9, weight_decay=1e-5)
    model = Model(net, nn.CrossEntropyLoss(), optimizer, metrics={"accuracy"})
    report = EpochReport(model, test_data)
    model.train(args.epochs, train_data, callbacks=[report, ProgressBar(leave=False)])

    os.makedirs(args.out_dir, exist_ok=True)
    plot = os.path.join(args.out_dir, "mnist_cnn_loss.png")
    save_loss_curve(report.step_losses, plot)
    print(f"final evaluation accuracy = {report.accuracies[-1]:.4f}; loss curve saved to {plot}")
    return report


if __name__ == "__main__":
    main()
