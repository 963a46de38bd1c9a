"""Iterators over a dataset: rows as Tensors (or NumPy arrays), one epoch per ``for`` loop."""
import numpy as np

from ..tensor import Tensor

# Tensor supports a fixed dtype set; other integer columns widen losslessly (MNIST and
# CIFAR labels are uint32, as in MindSpore). NumPy output keeps the original dtype.
_TENSOR_DTYPE = {np.dtype(np.uint16): np.dtype(np.int32), np.dtype(np.int16): np.dtype(np.int32),
                 np.dtype(np.uint32): np.dtype(np.int64), np.dtype(np.uint64): np.dtype(np.int64)}


def to_tensor(array, column):
    """A Tensor holding a copy of ``array`` (so the pipeline's buffers can be reused).

    Text (MindSpore's string tensors, e.g. a MindRecord ``string`` field) stays a NumPy
    ``str``/``bytes`` array: a Tensor holds numbers only here."""
    array = np.asarray(array)
    if array.dtype.kind in "SU":
        return array.copy()
    target = _TENSOR_DTYPE.get(array.dtype)
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        raise ValueError(f"column {column!r} holds the uint64 value {int(array.max())}, which "
                         "does not fit the int64 a Tensor uses (it would wrap to a negative "
                         "number); reduce the ids (e.g. modulo the table size) or use "
                         "output_numpy=True")
    try:
        return Tensor(array if target is None else array.astype(target))
    except TypeError as err:
        raise TypeError(f"column {column!r} cannot become a Tensor: {err}. Cast it with "
                        "ds.transforms.TypeCast or use output_numpy=True") from None


class _EpochIterator:
    """Runs epoch after epoch of ``dataset``; ``for`` loops end at each epoch boundary."""

    def __init__(self, dataset, num_epochs, output_numpy, columns=None):
        if num_epochs is None:
            num_epochs = -1
        if not isinstance(num_epochs, (int, np.integer)) or isinstance(num_epochs, bool) \
                or (num_epochs < 1 and num_epochs != -1):
            raise ValueError("num_epochs must be a positive integer or -1 (unlimited), "
                             f"got {num_epochs!r}")
        self.dataset = dataset
        self.num_epochs = int(num_epochs)
        self.output_numpy = bool(output_numpy)
        names = dataset.get_col_names()
        if columns is None:
            self.columns = list(names)
        else:
            self.columns = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in self.columns if c not in names]
            if unknown:
                raise ValueError(f"unknown column(s) {unknown}; the dataset has columns {names}")
        self._positions = [names.index(c) for c in self.columns]
        self._epochs_done = 0
        self._rows = None
        self._failure = None         # the error that ended the epoch in progress, until reset
        registry = getattr(dataset, "_iterators", None)
        if registry is not None:
            registry.add(self)      # so dataset.reset() can end an epoch in progress

    def __iter__(self):
        return self

    def __next__(self):
        if self._failure is not None:
            # the epoch's row stream died with the error; carrying on would yield an empty or
            # shortened epoch with no error
            raise RuntimeError(f"this iterator failed earlier ({type(self._failure).__name__}: "
                               f"{self._failure}); call dataset.reset() or create a new iterator "
                               "to start again") from self._failure
        if self._rows is None:
            if self.num_epochs != -1 and self._epochs_done >= self.num_epochs:
                raise RuntimeError(f"this iterator was created for num_epochs={self.num_epochs} and "
                                   "has run them all; create a new iterator (or pass a larger "
                                   "num_epochs)")
            self._rows = self.dataset._iter_rows((self.dataset._reserve_epoch(),))
            skip, self.dataset._skip_next = getattr(self.dataset, "_skip_next", 0), 0
            for _ in range(skip):           # a mid-epoch resume (Dataset.set_epoch)
                next(self._rows, None)
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None
            self._epochs_done += 1
            raise
        except BaseException as err:        # KeyboardInterrupt too: the row stream is dead
            self._failure = err
            raise
        values = [row[p] for p in self._positions]
        if self.output_numpy:
            return self._package([np.asarray(v) for v in values])
        return self._package([to_tensor(v, c) for v, c in zip(values, self.columns)])

    def _package(self, values):
        return values

    def end_epoch(self):
        """End the epoch in progress, if any (it counts as run); the next row starts a new one."""
        self._failure = None
        if self._rows is not None:
            self._rows = None
            self._epochs_done += 1

    def get_next(self):
        """The next row (MindSpore's spelling of ``next(iterator)``)."""
        return next(self)


class TupleIterator(_EpochIterator):
    """Yields each row as a list of values in column order."""


class DictIterator(_EpochIterator):
    """Yields each row as a ``{column name: value}`` dict."""

    def _package(self, values):
        return dict(zip(self.columns, values))
