"""Sources whose columns are whole arrays in memory (MNIST, CIFAR-10, NumPy slices).

They read an epoch as blocks: the epoch's sample order (shuffled, sharded, capped; see
``sampling``) is cut into chunks and each chunk gathers its rows from every column at
once, so the rest of the pipeline can work on thousands of samples per NumPy call.
"""
import numpy as np

from .engine import BLOCK_ROWS, Dataset
from .sampling import check_num_samples, check_shards, check_shuffle, epoch_size, sample_order


class ArraySourceDataset(Dataset):
    """Rows are slices along axis 0 of equally long column arrays.

    >>> import numpy as np
    >>> data = ArraySourceDataset({"x": np.arange(6), "y": -np.arange(6)}, shuffle=False,
    ...                           num_shards=2, shard_id=0)
    >>> [int(x) for x, y in data.create_tuple_iterator(output_numpy=True)]
    [0, 2, 4]
    """

    def __init__(self, columns, shuffle=None, num_shards=None, shard_id=None, num_samples=None):
        super().__init__()
        if not columns:
            raise ValueError(f"{type(self).__name__}: needs at least one column")
        lengths = {name: len(array) for name, array in columns.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"{type(self).__name__}: every column must have the same number of rows, "
                             f"got {lengths}")
        self._columns = dict(columns)
        self._rows = next(iter(lengths.values()))
        self.shuffle_samples = check_shuffle(shuffle)
        self.shards = check_shards(num_shards, shard_id)
        self.num_samples = check_num_samples(num_samples)

    def get_col_names(self):
        return list(self._columns)

    def _size(self):
        return epoch_size(self._rows, self.shards, self.num_samples)

    def _block_native(self):
        return True

    def _iter_blocks(self, key):
        order = sample_order(self._rows, self.shuffle_samples, self.shards, self.num_samples, key)
        arrays = list(self._columns.values())
        for start in range(0, len(order), BLOCK_ROWS):
            chosen = order[start:start + BLOCK_ROWS]
            # np.take copies: the pipeline never hands out views of the source arrays
            yield tuple(np.take(a, chosen, axis=0) for a in arrays)
