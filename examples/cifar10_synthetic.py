"""A small synthetic data set in the CIFAR-10 binary format, with a pattern a network can learn.

Every image is 32x32 RGB noise with one coloured square ("blob") on it; the blob's colour
says the class (ten well separated colours), its place and size are random, so a network
must look for the colour wherever it is (a convolution followed by a global mean does).
The files are the ones ``ds.Cifar10Dataset`` reads: ``data_batch_1.bin`` ...
``data_batch_K.bin`` for training and ``test_batch.bin``, each record one label byte then
the red, green and blue 32x32 planes (3072 bytes).

    python examples/cifar10_synthetic.py OUT_DIR [--num-train 320] [--num-test 64] [--seed 0]

or from Python: ``write_synthetic_cifar10(folder, num_train=320)``. The same seed gives the
same bytes on every machine and every rank.
"""
import argparse
import os

import numpy as np

import minitorch_dist.dataset as ds

NUM_CLASSES = 10
IMAGE_SHAPE = (32, 32, 3)

# One colour per class (RGB, 0..255): far apart so that a few epochs separate them.
PALETTE = np.array([
    [230, 25, 25],    # 0 red
    [25, 230, 25],    # 1 green
    [25, 25, 230],    # 2 blue
    [230, 230, 25],   # 3 yellow
    [230, 25, 230],   # 4 magenta
    [25, 230, 230],   # 5 cyan
    [250, 250, 250],  # 6 white
    [5, 5, 5],        # 7 black
    [245, 130, 10],   # 8 orange
    [120, 10, 200],   # 9 purple
], dtype=np.float64)


def make_images(count, rng):
    """``(images (count, 32, 32, 3) uint8 HWC, labels (count,) uint8)``: balanced classes in a
    random order, each image grey noise plus a blob of its class colour."""
    labels = rng.permutation(np.arange(count) % NUM_CLASSES).astype(np.uint8)
    images = rng.normal(128.0, 30.0, size=(count, *IMAGE_SHAPE))
    for i, label in enumerate(labels):
        size = int(rng.integers(14, 23))
        top, left = (int(v) for v in rng.integers(0, 32 - size + 1, size=2))
        colour = PALETTE[label] + rng.normal(0.0, 12.0, size=3)
        images[i, top:top + size, left:left + size, :] = colour
    return np.clip(np.rint(images), 0, 255).astype(np.uint8), labels


def write_synthetic_cifar10(folder, num_train=320, num_test=64, num_train_files=2, seed=0):
    """Write ``num_train`` training images over ``num_train_files`` files
    (``data_batch_1.bin`` ...) and ``num_test`` test images (``test_batch.bin``, none if 0)
    into ``folder`` (created if needed); returns ``folder``.

    >>> import tempfile, minitorch_dist.dataset as ds
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> folder = write_synthetic_cifar10(scratch.name, num_train=20, num_test=10)
    >>> sorted(os.listdir(folder))
    ['data_batch_1.bin', 'data_batch_2.bin', 'test_batch.bin']
    >>> data = ds.Cifar10Dataset(folder, usage="train", shuffle=False)
    >>> rows = [(tuple(image.shape), int(label)) for image, label in data.create_tuple_iterator()]
    >>> len(rows), rows[0][0], sorted({label for _, label in rows}) == list(range(10))
    (20, (32, 32, 3), True)
    >>> scratch.cleanup()
    """
    if num_train < 1 or num_test < 0 or not 1 <= num_train_files <= num_train:
        raise ValueError("write_synthetic_cifar10: need num_train >= 1, num_test >= 0 and "
                         f"1 <= num_train_files <= num_train, got {num_train}, {num_test}, "
                         f"{num_train_files}")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    images, labels = make_images(num_train, rng)
    for k, part in enumerate(np.array_split(np.arange(num_train), num_train_files), start=1):
        ds.write_cifar10_bin(os.path.join(folder, f"data_batch_{k}.bin"), images[part], labels[part])
    if num_test:
        test_images, test_labels = make_images(num_test, rng)
        ds.write_cifar10_bin(os.path.join(folder, "test_batch.bin"), test_images, test_labels)
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--num-train", "--num_train", type=int, default=320)
    parser.add_argument("--num-test", "--num_test", type=int, default=64)
    parser.add_argument("--num-train-files", "--num_train_files", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = write_synthetic_cifar10(args.out_dir, args.num_train, args.num_test,
                                     args.num_train_files, args.seed)
    print(f"wrote {args.num_train} training and {args.num_test} test images to {folder}")


if __name__ == "__main__":
    main()
