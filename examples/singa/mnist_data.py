"""The data of the guide's MNIST scripts: MNIST IDX files, or scikit-learn's digits.

``load_dataset(data_dir)`` returns ``(train_x, train_y, test_x, test_y)``: images as float32
``(N, 1, 28, 28)`` scaled to [0, 1] and normalised with MNIST's mean and std, labels as
one-hot int32 ``(N, 10)`` rows (the guide's ``ty`` is a ``(batch_size, num_classes)`` int32
tensor). Without ``data_dir`` the images are scikit-learn's 8x8 handwritten digits, each
pixel made 3x3 and padded to 28x28 (nothing is downloaded; the same arrays as
``examples/singa_mnist_dist.py``); with it, the ``train-*`` and ``t10k-*`` IDX files there
(plain or gzipped) are read.
"""
import os

import numpy as np

import minitorch_dist.dataset as ds
from minitorch_dist.dataset.mnist import read_mnist

NUM_CLASSES = 10
MEAN, STD = 0.1307, 0.3081


def load_dataset(data_dir=None, num_classes=NUM_CLASSES):
    """``(train_x, train_y, test_x, test_y)`` as described in the module docstring."""
    if data_dir is None:
        parts = [ds.load_digits(split) for split in ("train", "test")]
        parts = [(ds.upsample_to_mnist(images), labels) for images, labels in parts]
    else:
        if not os.path.isdir(data_dir):
            raise SystemExit(f"--data-dir {data_dir}: not a directory")
        parts = [read_mnist(data_dir, prefix) for prefix in ("train", "t10k")]
        if any(part is None for part in parts):
            raise SystemExit(f"--data-dir {data_dir}: the MNIST train-* and t10k-* IDX files "
                             "are needed")
    arrays = []
    for images, labels in parts:
        x = images.transpose(0, 3, 1, 2).astype(np.float32) / 255.0     # NHWC uint8 -> NCHW
        arrays.append((x - MEAN) / STD)
        arrays.append(np.eye(num_classes, dtype=np.int32)[labels.astype(np.int64)])
    return tuple(arrays)
