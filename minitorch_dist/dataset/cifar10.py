"""``Cifar10Dataset``: the CIFAR-10 binary batches as an "image"/"label" dataset, plus a writer.

Each record of ``data_batch_1.bin`` ... ``data_batch_5.bin`` and ``test_batch.bin`` is one
label byte (0..9) and 3072 image bytes: the 32x32 red plane, then green, then blue.
"""
import os
import re

import numpy as np

from .array_source import ArraySourceDataset
from .sampling import check_workers

RECORD_BYTES = 1 + 3 * 32 * 32
_USAGES = ("train", "test", "all")
_TRAIN_FILE = re.compile(r"data_batch_(\d+)\.bin$")


def _batch_files(directory, usage):
    names = sorted(os.listdir(directory))
    train = sorted((n for n in names if _TRAIN_FILE.match(n)),
                   key=lambda n: int(_TRAIN_FILE.match(n).group(1)))
    test = [n for n in names if n == "test_batch.bin"]
    chosen = {"train": train, "test": test, "all": train + test}[usage]
    return [os.path.join(directory, n) for n in chosen]


def read_cifar10_bin(path):
    """``(images (N, 32, 32, 3) uint8 HWC, labels (N,) uint32)`` from one binary batch file."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise ValueError(f"{path} is not a CIFAR-10 binary batch: its {raw.size} bytes are not a "
                         f"positive multiple of the {RECORD_BYTES}-byte record (truncated file?)")
    records = raw.reshape(-1, RECORD_BYTES)
    labels = records[:, 0]
    if labels.max() > 9:
        bad = int(np.argmax(labels > 9))
        raise ValueError(f"{path} is not a CIFAR-10 binary batch: record {bad} has label {labels[bad]} "
                         "(labels are 0..9)")
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels.astype(np.uint32)


class Cifar10Dataset(ArraySourceDataset):
    """CIFAR-10 from its binary batches: "image" (uint8, HWC (32, 32, 3)) and "label" (uint32).

    ``dataset_dir`` is the folder holding the ``.bin`` files (or its parent holding
    ``cifar-10-batches-bin``). ``usage``: "train" (the ``data_batch_*.bin`` files), "test"
    (``test_batch.bin``) or "all"/None (both). The other arguments work as in
    :class:`MnistDataset`.
    """

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        if sampler is not None:
            raise ValueError("Cifar10Dataset: sampler is not supported; use shuffle, "
                             "num_shards/shard_id and num_samples")
        if cache is not None:
            raise ValueError("Cifar10Dataset: cache (a MindSpore cache server) is not supported; pass cache=None")
        check_workers(num_parallel_workers, "Cifar10Dataset")
        usage = "all" if usage is None else usage
        if usage not in _USAGES:
            raise ValueError(f"Cifar10Dataset: usage must be one of {_USAGES} or None, got {usage!r}")
        if dataset_dir is None or not os.path.isdir(dataset_dir):
            raise ValueError(f"Cifar10Dataset: dataset_dir {dataset_dir!r} is not a directory")
        nested = os.path.join(dataset_dir, "cifar-10-batches-bin")
        use_nested = not _batch_files(dataset_dir, usage) and os.path.isdir(nested)
        folder = nested if use_nested else dataset_dir
        files = _batch_files(folder, usage)
        if not files:
            expected = {"train": "data_batch_1.bin ... data_batch_5.bin", "test": "test_batch.bin",
                        "all": "data_batch_1.bin ... data_batch_5.bin and test_batch.bin"}[usage]
            raise ValueError(f"Cifar10Dataset: no CIFAR-10 files for usage={usage!r} in {dataset_dir}; "
                             f"expected {expected}")
        parts = [read_cifar10_bin(path) for path in files]
        self.dataset_dir = folder
        self.usage = usage
        self.files = files
        super().__init__({"image": np.concatenate([p[0] for p in parts]),
                          "label": np.concatenate([p[1] for p in parts])},
                         shuffle=shuffle, num_shards=num_shards, shard_id=shard_id,
                         num_samples=num_samples)


def write_cifar10_bin(path, images, labels):
    """Write HWC ``images`` (N, 32, 32, 3) uint8 and ``labels`` (N,) in 0..9 as one binary batch.

    >>> import numpy as np, os, tempfile
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> folder = scratch.name
    >>> write_cifar10_bin(os.path.join(folder, "test_batch.bin"), np.zeros((2, 32, 32, 3)), [1, 9])
    >>> read_cifar10_bin(os.path.join(folder, "test_batch.bin"))[1].tolist()
    [1, 9]
    >>> scratch.cleanup()
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4 or images.shape[1:] != (32, 32, 3):
        raise ValueError(f"write_cifar10_bin: images must have shape (N, 32, 32, 3), got {images.shape}")
    if labels.shape != (len(images),) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
        raise ValueError(f"write_cifar10_bin: labels must be {len(images)} integers in 0..9")
    if images.size and (images.min() < 0 or images.max() > 255):
        raise ValueError("write_cifar10_bin: images must lie in 0..255")
    records = np.empty((len(images), RECORD_BYTES), dtype=np.uint8)
    records[:, 0] = labels
    records[:, 1:] = np.rint(images).astype(np.uint8).transpose(0, 3, 1, 2).reshape(len(images), -1)
    records.tofile(path)
