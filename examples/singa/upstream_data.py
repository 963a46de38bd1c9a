"""Small synthetic data in the formats SINGA's examples read, and the swaps that point the
examples at it (their only change besides the imports).

SINGA's ``examples/cnn`` download MNIST (gzipped IDX files) and CIFAR-10 (pickled batches of
10,000 images) and train on all of it, which takes GPU-hours. :func:`write_mnist` and
:func:`write_cifar10` write a few hundred images in exactly those formats, with a learnable
signal (each class lights its own block of pixels). :func:`swap_data` rewrites the paths
and loaders of a copy of the examples so they read these files.

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> paths = write_mnist(folder, train=64, test=32)
>>> sorted(os.path.basename(p) for p in paths)[:2]
['t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz']
"""
import gzip
import os
import pickle
import re
import struct

import numpy as np

__all__ = ["write_mnist", "write_cifar10", "swap_data"]


def _images(rng, n, channels, size, classes=10):
    """``n`` uint8 images whose class shows as a bright block; labels uint8."""
    labels = rng.integers(0, classes, n).astype(np.uint8)
    images = rng.integers(0, 80, (n, channels, size, size)).astype(np.uint8)
    cell = size // 5
    for i, c in enumerate(labels):
        row, col = divmod(int(c), 5)
        r0, c0 = (row * 2 + 1) * cell // 1, col * cell
        images[i, :, r0:r0 + cell, c0:c0 + cell] = 250
    return images, labels


def write_mnist(folder, train=256, test=128, seed=0):
    """MNIST's four ``*-idx?-ubyte.gz`` files (28x28, 10 classes) in ``folder``."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name, n in (("train", train), ("t10k", test)):
        x, y = _images(rng, n, 1, 28)
        path = os.path.join(folder, f"{name}-images-idx3-ubyte.gz")
        with gzip.open(path, "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + x.tobytes())
        paths.append(path)
        path = os.path.join(folder, f"{name}-labels-idx1-ubyte.gz")
        with gzip.open(path, "wb") as f:
            f.write(struct.pack(">II", 2049, n) + y.tobytes())
        paths.append(path)
    return paths


def write_cifar10(folder, train=64, test=32, seed=0):
    """``cifar-10-batches-py``-style pickles in ``folder``: ``data_batch_1`` (``train``
    images) and ``test_batch``; dicts with ``data`` (N x 3072 uint8) and ``labels``."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    for name, n in (("data_batch_1", train), ("test_batch", test)):
        x, y = _images(rng, n, 3, 32)
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump({"data": x.reshape(n, -1), "labels": [int(v) for v in y]}, f)
    return folder


# What replaces the loaders: same names, same return values, the small local files.
_CIFAR_LOADERS = '''

# ---- data swap (minitorch_dist examples/singa/upstream_data.py): the small local files
def load_train_data(dir_path={folder!r}, num_batches=1):
    images, labels = load_dataset(check_dataset_exist(dir_path + "/data_batch_1"))
    return np.array(images, dtype=np.float32), np.array(labels, dtype=np.int32)


def load_test_data(dir_path={folder!r}):
    images, labels = load_dataset(check_dataset_exist(dir_path + "/test_batch"))
    return np.array(images, dtype=np.float32), np.array(labels, dtype=np.int32)

'''


def _rewrite(path, transform):
    with open(path) as f:
        text = f.read()
    new = transform(text)
    with open(path, "w") as f:
        f.write(new)
    return new != text


def swap_data(examples, mnist_dir, cifar_dir):
    """Point the copy of SINGA's examples at ``examples`` (the folder holding ``cnn/``) to
    the files of :func:`write_mnist` and :func:`write_cifar10`. Returns the files changed."""
    changed = []
    mnist_paths = lambda text: re.sub(r"'/tmp/((?:train|t10k)-(?:images|labels)-idx\d-ubyte\.gz)'",
                                      lambda m: repr(os.path.join(mnist_dir, m.group(1))), text)
    for rel in ("cnn/data/mnist.py", "cnn/autograd/mnist_cnn.py"):
        path = os.path.join(examples, rel)
        if os.path.exists(path) and _rewrite(path, mnist_paths):
            changed.append(rel)

    def cifar(text):   # new definitions before the script's entry point override the old
        """Insert the small-file loaders before the script's entry point."""
        block = _CIFAR_LOADERS.format(folder=cifar_dir)
        marker = "\nif __name__ == '__main__':"
        if marker in text:
            head, tail = text.split(marker, 1)
            return head + block + marker + tail
        return text + block

    for rel in ("cnn/data/cifar10.py", "cnn/autograd/resnet_cifar10.py"):
        path = os.path.join(examples, rel)
        if os.path.exists(path) and _rewrite(path, cifar):
            changed.append(rel)
    return changed
