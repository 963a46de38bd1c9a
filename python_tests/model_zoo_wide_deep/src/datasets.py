"""Upstream Wide&Deep's MindRecord input: each record holds ``line_per_sample`` Criteo lines
flattened (``feat_ids`` int32 and ``feat_vals`` float32 of length 39 * lines, ``label``
float32 of length lines); ``create_dataset`` batches ``batch_size / line_per_sample`` records
and reshapes them to ``ids (batch, 39)``, ``weights (batch, 39)``, ``labels (batch, 1)``.

Training files are ``train_input_part.mindrecord00`` ... (shuffled), evaluation files
``test_input_part.mindrecord0`` ...; with ``rank_size`` and ``rank_id`` each rank reads its
shard. Only the MindRecord type is part of the test version (TFRecord and H5 are refused).
"""
import os
from enum import Enum

import numpy as np

import minitorch_dist.dataset as ds


class DataType(Enum):
    """Enumerate supported dataset format."""
    MINDRECORD = 1
    TFRECORD = 2
    H5 = 3


def _padding_func(batch_size, manual_shape, target_column, field_size=39):
    """The map that turns a batch of flattened records into (ids, weights, labels) arrays."""
    if manual_shape:
        raise NotImplementedError("_padding_func (test version): manual_shape belongs to the field_slice "
                                  "mode, which is not part of it; pass manual_shape=None")

    def padding_func(x, y, z):
        x = np.array(x).flatten().reshape(batch_size, field_size)
        y = np.array(y).flatten().reshape(batch_size, field_size)
        z = np.array(z).flatten().reshape(batch_size, 1)
        return (x, y, z)
    return padding_func


def _get_mindrecord_dataset(directory, train_mode=True, batch_size=1000,
                            line_per_sample=1000, rank_size=None, rank_id=None,
                            manual_shape=None, target_column=40):
    """The MindRecord dataset of ``directory`` (train or test part), batched to ``batch_size``
    lines; sharded over ``rank_size`` ranks when both ``rank_size`` and ``rank_id`` are given."""
    if batch_size % line_per_sample:
        raise ValueError(f"create_dataset: batch_size {batch_size} must be a multiple of line_per_sample "
                         f"{line_per_sample} (a batch is a whole number of records)")
    file_prefix_name = 'train_input_part.mindrecord' if train_mode else 'test_input_part.mindrecord'
    file_suffix_name = '00' if train_mode else '0'
    shard = {}
    if rank_size is not None and rank_id is not None:
        shard = {"num_shards": rank_size, "shard_id": rank_id}
    data_set = ds.MindDataset(os.path.join(directory, file_prefix_name + file_suffix_name),
                              columns_list=['feat_ids', 'feat_vals', 'label'], shuffle=train_mode,
                              num_parallel_workers=4, **shard)
    data_set = data_set.batch(int(batch_size / line_per_sample), drop_remainder=True)
    data_set = data_set.map(_padding_func(batch_size, manual_shape, target_column),
                            input_columns=['feat_ids', 'feat_vals', 'label'], num_parallel_workers=2)
    return data_set


def create_dataset(data_dir, train_mode=True, batch_size=1000,
                   data_type=DataType.TFRECORD, line_per_sample=1000,
                   rank_size=None, rank_id=None, manual_shape=None, target_column=40):
    """The Wide&Deep input pipeline (``DataType.MINDRECORD`` only in the test version)."""
    if data_type != DataType.MINDRECORD:
        raise NotImplementedError(f"create_dataset (test version): {data_type} is not part of it; "
                                  "use DataType.MINDRECORD (see preprocess.py)")
    return _get_mindrecord_dataset(data_dir, train_mode, batch_size, line_per_sample,
                                   rank_size=rank_size, rank_id=rank_id,
                                   manual_shape=manual_shape, target_column=target_column)


def dataset_type_of(config):
    """``config.dataset_type`` ("tfrecord", "mindrecord", other: H5) as a DataType."""
    return {"tfrecord": DataType.TFRECORD, "mindrecord": DataType.MINDRECORD}.get(config.dataset_type,
                                                                                 DataType.H5)
