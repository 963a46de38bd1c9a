"""``MnistDataset``: the MNIST IDX files as an "image"/"label" dataset, plus a writer."""
import os

import numpy as np

from .array_source import ArraySourceDataset
from .sampling import check_workers
from .idx import read_idx, write_idx

_PREFIX = {"train": "train", "test": "t10k"}
_USAGES = ("train", "test", "all")
_IMAGE_MAGIC, _LABEL_MAGIC = 0x0803, 0x0801   # uint8 with 3 dimensions / with 1 dimension


def mnist_file_names(prefix):
    """The canonical (images, labels) file names for ``prefix`` "train" or "t10k"."""
    return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"


def _find(directory, name):
    """``name`` in ``directory``, also as ``.gz`` and with the ``-idx`` -> ``.idx`` spelling."""
    dotted = name.replace("-idx", ".idx")
    for candidate in (name, name + ".gz", dotted, dotted + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    return None


def _read_typed(path, ndim, what):
    array = read_idx(path)
    if array.dtype != np.uint8 or array.ndim != ndim:
        raise ValueError(f"{path} is not an MNIST {what} file: expected uint8 data with {ndim} "
                         f"dimension(s) (magic {_IMAGE_MAGIC if ndim == 3 else _LABEL_MAGIC:#010x}), "
                         f"found {array.dtype} with shape {array.shape}")
    return array


def read_mnist(directory, prefix):
    """``(images (N, H, W, 1) uint8, labels (N,) uint32)`` for one prefix, or None if absent."""
    image_name, label_name = mnist_file_names(prefix)
    image_path, label_path = _find(directory, image_name), _find(directory, label_name)
    if image_path is None and label_path is None:
        return None
    if image_path is None or label_path is None:
        missing = image_name if image_path is None else label_name
        present = "labels" if image_path is None else "images"
        raise ValueError(f"MnistDataset: {directory} has the {prefix} {present} but not {missing} "
                         f"(or {missing}.gz)")
    images = _read_typed(image_path, 3, "images")
    labels = _read_typed(label_path, 1, "labels")
    if len(images) != len(labels):
        raise ValueError(f"MnistDataset: {image_path} holds {len(images)} images but {label_path} "
                         f"holds {len(labels)} labels")
    return images[..., None], labels.astype(np.uint32)


class MnistDataset(ArraySourceDataset):
    """MNIST from its IDX files: columns "image" (uint8, HWC (28, 28, 1)) and "label" (uint32).

    ``usage``: "train" (``train-*`` files), "test" (``t10k-*``) or "all"/None (every pair of
    files present). Plain and ``.gz`` files are accepted. ``shuffle`` (default True) uses the
    framework seed; ``num_shards``/``shard_id`` give each rank an equally long share (see
    ``sampling``); ``num_samples`` caps the rows per shard. ``num_parallel_workers`` is checked
    (rows are read in the calling thread); ``sampler`` and ``cache`` are refused.
    """

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        if sampler is not None:
            raise ValueError("MnistDataset: sampler is not supported; use shuffle, "
                             "num_shards/shard_id and num_samples")
        if cache is not None:
            raise ValueError("MnistDataset: cache (a MindSpore cache server) is not supported; pass cache=None")
        check_workers(num_parallel_workers, "MnistDataset")
        usage = "all" if usage is None else usage
        if usage not in _USAGES:
            raise ValueError(f"MnistDataset: usage must be one of {_USAGES} or None, got {usage!r}")
        if dataset_dir is None or not os.path.isdir(dataset_dir):
            raise ValueError(f"MnistDataset: dataset_dir {dataset_dir!r} is not a directory")
        prefixes = ["train", "t10k"] if usage == "all" else [_PREFIX[usage]]
        parts = [p for p in (read_mnist(dataset_dir, prefix) for prefix in prefixes) if p is not None]
        if not parts:
            expected = [name for prefix in prefixes for name in mnist_file_names(prefix)]
            raise ValueError(f"MnistDataset: no MNIST files for usage={usage!r} in {dataset_dir}; "
                             f"expected {' and '.join(expected)} (or .gz versions)")
        if len({p[0].shape[1:] for p in parts}) != 1:
            raise ValueError(f"MnistDataset: the train and t10k images in {dataset_dir} have different "
                             f"sizes {[p[0].shape[1:3] for p in parts]}")
        images = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
        labels = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
        self.dataset_dir = dataset_dir
        self.usage = usage
        super().__init__({"image": images, "label": labels}, shuffle=shuffle, num_shards=num_shards,
                         shard_id=shard_id, num_samples=num_samples)


def write_mnist_idx(directory, images, labels, prefix="train", compress=False):
    """Write ``images``/``labels`` as MNIST IDX files; returns the two paths.

    ``images``: (N, H, W) or (N, H, W, 1) with values in 0..255 (rounded to uint8);
    ``labels``: N integers in 0..255. ``prefix`` "train" or "t10k" ("test" means "t10k").

    >>> import numpy as np, tempfile
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> folder = scratch.name
    >>> _ = write_mnist_idx(folder, np.zeros((2, 28, 28)), [3, 7])
    >>> [int(y) for _, y in MnistDataset(folder, shuffle=False).create_tuple_iterator(output_numpy=True)]
    [3, 7]
    >>> scratch.cleanup()
    """
    prefix = _PREFIX.get(prefix, prefix)
    if prefix not in ("train", "t10k"):
        raise ValueError(f"write_mnist_idx: prefix must be 'train', 't10k' or 'test', got {prefix!r}")
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim != 3:
        raise ValueError("write_mnist_idx: images must have shape (N, H, W) or (N, H, W, 1), "
                         f"got {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"write_mnist_idx: labels must have shape ({len(images)},), got {labels.shape}")
    for name, values in (("images", images), ("labels", labels)):
        if values.dtype != np.uint8 and values.size and (values.min() < 0 or values.max() > 255):
            raise ValueError(f"write_mnist_idx: {name} must lie in 0..255, "
                             f"got {values.min()}..{values.max()}")
    os.makedirs(directory, exist_ok=True)
    suffix = ".gz" if compress else ""
    image_name, label_name = mnist_file_names(prefix)
    paths = (os.path.join(directory, image_name + suffix), os.path.join(directory, label_name + suffix))
    write_idx(paths[0], _to_bytes(images), compress=compress)
    write_idx(paths[1], _to_bytes(labels), compress=compress)
    return paths


def _to_bytes(values):
    """uint8 values (floats are rounded; values were checked to lie in 0..255)."""
    if values.dtype.kind in "biu":
        return values.astype(np.uint8, copy=False)
    return np.rint(values).astype(np.uint8)
