"""``NumpySlicesDataset``: rows sliced from in-memory arrays, lists or dicts of them."""
import numpy as np

from .array_source import ArraySourceDataset
from .sampling import check_workers


def _columns_from(data, column_names):
    """Column name -> array for the forms MindSpore accepts."""
    if isinstance(data, dict):
        names = list(data)
        arrays = [np.asarray(v) for v in data.values()]
        if column_names is not None:
            names = [column_names] if isinstance(column_names, str) else list(column_names)
    else:
        if isinstance(data, tuple):
            arrays = [np.asarray(v) for v in data]       # a tuple: one column per element
        else:
            arrays = [np.asarray(data)]                  # a list or an array: one column
        if column_names is None:
            names = [f"column_{i}" for i in range(len(arrays))]
        else:
            names = [column_names] if isinstance(column_names, str) else list(column_names)
    if len(names) != len(arrays):
        raise ValueError(f"NumpySlicesDataset: {len(arrays)} column(s) of data but "
                         f"{len(names)} column name(s) {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"NumpySlicesDataset: duplicate column names {names}")
    for name, array in zip(names, arrays):
        if array.ndim == 0:
            raise ValueError(f"NumpySlicesDataset: column {name!r} is a scalar; "
                             "data is sliced along its first axis")
        if array.dtype == object:
            raise ValueError(f"NumpySlicesDataset: column {name!r} is ragged (rows of different "
                             "shapes); use GeneratorDataset for such data")
    return dict(zip(names, arrays))


class NumpySlicesDataset(ArraySourceDataset):
    """Slices ``data`` along its first axis into rows.

    ``data`` is a dict (keys are the column names), a tuple (one column per element) or a
    list / array (one column, as in MindSpore). Default names are ``column_0``, ``column_1``...
    ``num_parallel_workers`` is checked (rows are read in the calling thread); ``sampler`` is
    refused.

    >>> import numpy as np, minitorch_dist.dataset as ds
    >>> data = ds.NumpySlicesDataset((np.arange(3), np.ones(3)), ["x", "y"], shuffle=False)
    >>> [(int(x), float(y)) for x, y in data.create_tuple_iterator(output_numpy=True)]
    [(0, 1.0), (1, 1.0), (2, 1.0)]
    """

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=1,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        if sampler is not None:
            raise ValueError("NumpySlicesDataset: sampler is not supported; use shuffle, "
                             "num_shards/shard_id and num_samples")
        check_workers(num_parallel_workers, "NumpySlicesDataset")
        super().__init__(_columns_from(data, column_names), shuffle=shuffle, num_shards=num_shards,
                         shard_id=shard_id, num_samples=num_samples)
