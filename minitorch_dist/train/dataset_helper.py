"""``mindspore.train.dataset_helper``: ``DatasetHelper`` and ``connect_network_with_dataset``
for hand-written loops. There is no device data queue here (``dataset_sink_mode`` runs as
non-sink, as ``Model`` does), so the helper iterates the dataset's batches and the network is
returned as it is.

>>> import numpy as np
>>> import minitorch_dist.dataset as ds
>>> from minitorch_dist.train.dataset_helper import DatasetHelper
>>> data = ds.NumpySlicesDataset({"x": np.arange(4.0)}, shuffle=False).batch(2)
>>> [b[0].asnumpy().tolist() for b in DatasetHelper(data, dataset_sink_mode=False)]
[[0.0, 1.0], [2.0, 3.0]]
"""

__all__ = ["DatasetHelper", "connect_network_with_dataset"]


class DatasetHelper:
    """Iterate ``dataset``'s batches as tuples of Tensors, ``epoch_num`` times."""

    def __init__(self, dataset, dataset_sink_mode=True, sink_size=-1, epoch_num=1):
        if not hasattr(dataset, "create_tuple_iterator"):
            raise TypeError("DatasetHelper: dataset must be a minitorch_dist.dataset pipeline, "
                            f"got {type(dataset).__name__}")
        if not isinstance(dataset_sink_mode, bool):
            raise TypeError(f"DatasetHelper: dataset_sink_mode must be True or False, got {dataset_sink_mode!r}")
        if isinstance(epoch_num, bool) or not isinstance(epoch_num, int) or epoch_num < 1:
            raise ValueError(f"DatasetHelper: epoch_num must be a positive int, got {epoch_num!r}")
        self.dataset, self.epoch_num, self.sink_size = dataset, epoch_num, sink_size

    def __iter__(self):
        for _ in range(self.epoch_num):
            yield from self.dataset.create_tuple_iterator()

    def __len__(self):
        return self.dataset.get_dataset_size() if self.sink_size in (-1, None) else self.sink_size

    def types_shapes(self):
        first = next(iter(self.dataset.create_tuple_iterator()))
        return [t.dtype for t in first], [t.shape for t in first]

    def sink_size(self):
        return len(self)

    def stop_send(self):
        """Nothing is being sent to a device here."""

    def release(self):
        """Nothing to release: there is no device queue."""


def connect_network_with_dataset(network, dataset_helper):
    """``network`` unchanged: without a device data queue, batches are passed as arguments."""
    if not isinstance(dataset_helper, DatasetHelper):
        raise TypeError("connect_network_with_dataset: dataset_helper must be a DatasetHelper, "
                        f"got {type(dataset_helper).__name__}")
    return network
