"""Datasets and data pipelines with the ``mindspore.dataset`` API (``import ... as ds``).

>>> import numpy as np, minitorch_dist as ms, minitorch_dist.dataset as ds
>>> data = ds.NumpySlicesDataset({"image": np.zeros((10, 28, 28, 1), np.uint8),
...                               "label": np.arange(10, dtype=np.uint32)})
>>> data = data.map([ds.vision.Rescale(1.0 / 255.0, 0), ds.vision.HWC2CHW()], "image")
>>> data = data.map(ds.transforms.TypeCast(ms.int32), "label").batch(4)
>>> [(tuple(image.shape), label.dtype) for image, label in data][0]
((4, 1, 28, 28), dtype('int32'))
>>> data.get_dataset_size()
3
"""
from . import config, transforms, vision
from .engine import Dataset
from . import operations    # the nodes behind Dataset.map/batch/shuffle/repeat/take
from . import combine       # ... and behind project/rename/zip/concat
from .combine import zip_datasets as zip    # noqa: A004  (MindSpore's ds.zip)
from .array_source import ArraySourceDataset
from .numpy_slices import NumpySlicesDataset
from .generator import GeneratorDataset
from .mnist import MnistDataset, write_mnist_idx
from .cifar10 import Cifar10Dataset, write_cifar10_bin
from .idx import read_idx, write_idx
from .criteo import CriteoDataset, CriteoVocab
from .criteo_synthetic import write_synthetic_criteo
from .digits import load_digits, write_digits_as_mnist, upsample_to_mnist
from .schema import Schema
from .shuffle_level import Shuffle
from .tfrecord import TFRecordDataset
from .tfrecord_io import write_tfrecord
from .mind_dataset import MindDataset

__all__ = ["config", "transforms", "vision", "Dataset", "ArraySourceDataset", "NumpySlicesDataset",
           "GeneratorDataset", "MnistDataset", "Cifar10Dataset", "write_mnist_idx",
           "write_cifar10_bin", "read_idx", "write_idx", "load_digits", "write_digits_as_mnist", "upsample_to_mnist",
           "CriteoDataset", "CriteoVocab", "write_synthetic_criteo", "Schema", "Shuffle",
           "TFRecordDataset", "write_tfrecord", "MindDataset", "zip"]
