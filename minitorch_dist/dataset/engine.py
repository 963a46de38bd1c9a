"""The ``Dataset`` base class: chainable pipeline operations and iteration.

A pipeline is a chain of nodes (a source, then ``map``/``batch``/``shuffle``/...), each a
new ``Dataset`` wrapping its child. Nodes hand data on in one of two forms:

* rows: one tuple of arrays per sample (or per batch after ``batch``); every node can;
* blocks: one tuple of *stacked* column arrays covering many rows at once. Array-backed
  sources (MNIST, CIFAR-10, NumPy slices) produce blocks, and ``map`` keeps them as blocks
  when all its operations can work on a whole stack (``apply_batch``), so transforms cost
  a few NumPy calls per few thousand samples instead of Python calls per sample.

Every epoch has a key (a tuple of ints: the epoch number, extended by ``repeat``); shuffles
seed from it, so each epoch reshuffles and every rank shuffles the same way.

The operation nodes live in ``operations.py``, which subclasses ``Dataset``; each names the
method that makes it (``class MapDataset(Dataset, operation="map")``), so the methods here
find their node class without importing that module (``dataset/__init__`` imports it).
"""
import weakref

import numpy as np

from ..runtime import _once
from .sampling import check_workers

BLOCK_ROWS = 2048   # rows per block: big enough to amortise Python, small enough for cache


class Dataset:
    """Base class of every dataset; subclasses describe where rows come from.

    Subclasses implement :meth:`get_col_names`, ``_size()`` and either ``_iter_rows(key)``
    or (with ``_block_native()`` true) ``_iter_blocks(key)``.

    >>> import numpy as np, minitorch_dist.dataset as ds
    >>> data = ds.NumpySlicesDataset({"x": np.arange(5)}, shuffle=False).batch(2)
    >>> [x.asnumpy().tolist() for (x,) in data]
    [[0, 1], [2, 3], [4]]
    """

    _operations = {}    # method name -> node class (``operation=`` of a subclass)

    def __init_subclass__(cls, operation=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if operation is not None:
            Dataset._operations[operation] = cls

    def __init__(self, children=()):
        self.children = tuple(children)
        self._next_epoch = 0
        self._skip_next = 0         # rows the next epoch skips (a mid-epoch resume)
        self._iterators = weakref.WeakSet()   # live iterators, for reset()

    # ---- what subclasses provide ---------------------------------------------------------
    def get_col_names(self):
        """Column names of the rows this dataset yields, in order."""
        raise NotImplementedError

    def _size(self):
        raise NotImplementedError

    def _block_native(self):
        return False

    def _iter_blocks(self, key):
        raise NotImplementedError(f"{type(self).__name__} does not produce blocks")

    def _iter_rows(self, key):
        """Rows as tuples of arrays; block producers split their blocks."""
        for block in self._iter_blocks(key):
            for i in range(len(block[0])):
                yield tuple(column[i, ...] for column in block)  # `[i, ...]`: 0-d arrays, not scalars

    # ---- pipeline operations --------------------------------------------------------------
    def map(self, operations, input_columns=None, output_columns=None, column_order=None,
            num_parallel_workers=None, python_multiprocessing=False, cache=None, callbacks=None,
            max_rowsize=16, offload=None):
        """Apply ``operations`` (one callable or a list, in order) to ``input_columns``.

        ``input_columns`` defaults to the first column; ``output_columns`` names the results
        (default: they replace the input columns). Transforms from ``ds.vision`` and
        ``ds.transforms`` run on whole blocks of samples at once; other callables run once
        per sample. ``num_parallel_workers``, ``python_multiprocessing``, ``max_rowsize`` and
        ``offload`` only tune MindSpore's speed: checked, and noted once when set; ``cache``
        and ``callbacks`` are refused.
        """
        what = "Dataset.map"
        check_workers(num_parallel_workers, what)
        _speed_flag(what, "python_multiprocessing", python_multiprocessing, False)
        _speed_flag(what, "offload", offload, None)
        _check_rowsize(what, max_rowsize)
        _refuse(what, "cache", cache, "a MindSpore cache server is not supported")
        _refuse(what, "callbacks", callbacks, "dataset callbacks (DSCallback) are not supported")
        return self._operations["map"](self, operations, input_columns, output_columns,
                                       column_order)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, **kwargs):
        """Stack ``batch_size`` consecutive rows; the last batch is smaller unless dropped.

        MindSpore's ``python_multiprocessing`` and ``max_rowsize`` are checked and noted as in
        :meth:`map`; ``per_batch_map`` (with its ``input_columns``/``output_columns``) and
        ``pad_info`` are refused, as is any other keyword.
        """
        what = "Dataset.batch"
        check_workers(num_parallel_workers, what)
        unknown = sorted(set(kwargs) - _BATCH_KWARGS)
        if unknown:
            raise TypeError(f"{what} got unexpected keyword arguments {unknown}; it takes "
                            f"batch_size, drop_remainder, num_parallel_workers and "
                            f"{sorted(_BATCH_KWARGS)}")
        _speed_flag(what, "python_multiprocessing", kwargs.get("python_multiprocessing", False),
                    False)
        _check_rowsize(what, kwargs.get("max_rowsize", 16))
        for name in ("per_batch_map", "input_columns", "output_columns", "pad_info"):
            _refuse(what, name, kwargs.get(name), "per-batch functions and padding are not "
                    "supported; apply the function with map() before batch()")
        return self._operations["batch"](self, batch_size, drop_remainder)

    def shuffle(self, buffer_size):
        """Shuffle with a buffer of ``buffer_size`` rows (>= the dataset size: a full shuffle)."""
        return self._operations["shuffle"](self, buffer_size)

    def repeat(self, count=None):
        """Yield the data ``count`` times per epoch (``None`` or -1: forever)."""
        return self._operations["repeat"](self, count)

    def take(self, count=-1):
        """Only the first ``count`` rows (-1: all)."""
        return self._operations["take"](self, count)

    def project(self, columns):
        """Only ``columns`` (a name or a list), in that order."""
        return self._operations["project"](self, columns)

    def rename(self, input_columns, output_columns):
        """Call ``input_columns`` ``output_columns`` (names or equally long lists)."""
        return self._operations["rename"](self, input_columns, output_columns)

    def zip(self, datasets):
        """This dataset's columns beside those of ``datasets`` (one or a tuple); as many rows
        as the shortest has. Column names must not repeat."""
        others = list(datasets) if isinstance(datasets, (list, tuple)) else [datasets]
        return self._operations["zip"]([self, *others])

    def concat(self, datasets):
        """This dataset's rows, then those of ``datasets`` (one or a list); same columns.

        >>> import numpy as np, minitorch_dist.dataset as ds
        >>> a = ds.NumpySlicesDataset({"x": np.arange(2)}, shuffle=False)
        >>> b = ds.NumpySlicesDataset({"x": np.arange(5, 7)}, shuffle=False)
        >>> [int(x) for (x,) in (a + b).create_tuple_iterator(output_numpy=True)]
        [0, 1, 5, 6]
        """
        others = list(datasets) if isinstance(datasets, (list, tuple)) else [datasets]
        return self._operations["concat"]([self, *others])

    def __add__(self, other):
        return self.concat(other)

    # ---- information ----------------------------------------------------------------------
    def get_dataset_size(self):
        """Rows (batches after ``batch``) one epoch yields on this shard.

        For an endless ``repeat()`` this is the size of one pass of the repeated data.
        """
        return self._size()

    def get_batch_size(self):
        """The batch size of the last ``batch`` in the pipeline (1 without one)."""
        for child in self.children:
            return child.get_batch_size()
        return 1

    def output_shapes(self):
        """Shapes of the first row's columns (reads one row)."""
        return [list(a.shape) for a in self._first_row()]

    def output_types(self):
        """Dtypes of the first row's columns (reads one row)."""
        return [a.dtype for a in self._first_row()]

    def _first_row(self):
        for row in self._iter_rows((0,)):
            return row
        raise ValueError(f"{type(self).__name__} is empty: no row to read shapes or types from")

    # ---- iteration --------------------------------------------------------------------------
    def get_epoch(self):
        """How many epochs this dataset has started: the key of the next epoch's shuffle."""
        return self._next_epoch

    def set_epoch(self, epoch, skip=0):
        """Make the next epoch shuffle as epoch number ``epoch`` (0-based) does, and start it
        after its first ``skip`` rows (batches, after ``batch``): resuming training at epoch
        ``k`` (``Model.train(..., initial_epoch=k)``), or in the middle of it, sees the same
        order as an uninterrupted run. Checkpoints written by ``ModelCheckpoint`` record both.

        >>> import numpy as np, minitorch_dist.dataset as ds
        >>> data = ds.NumpySlicesDataset({"x": np.arange(6)}, shuffle=True)
        >>> first, second = [[int(x) for (x,) in data] for _ in range(2)]
        >>> data.set_epoch(1); [int(x) for (x,) in data] == second
        True
        >>> data.set_epoch(1, skip=4); [int(x) for (x,) in data] == second[4:]
        True
        """
        for name, value in (("epoch", epoch), ("skip", skip)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"set_epoch: {name} must be a non-negative int, got {value!r}")
        self._next_epoch = int(epoch)
        self._skip_next = int(skip)

    def reset(self):
        """Prepare for the next epoch (MindSpore's ``Dataset.reset``): an epoch that an iterator
        of this dataset is in the middle of ends, and the next pass starts a fresh, reshuffled
        epoch. ``Model.train`` calls it between epochs. The epoch counter (``get_epoch``) and
        a pending ``set_epoch`` are kept.

        >>> import numpy as np, minitorch_dist.dataset as ds
        >>> data = ds.NumpySlicesDataset({"x": np.arange(4)}, shuffle=False)
        >>> it = data.create_tuple_iterator(output_numpy=True)
        >>> int(next(it)[0]); data.reset(); [int(x) for (x,) in it]
        0
        [0, 1, 2, 3]
        """
        for iterator in list(self._iterators):
            iterator.end_epoch()

    def _reserve_epoch(self):
        """The next epoch number of this dataset (counted over all its iterators)."""
        epoch = self._next_epoch
        self._next_epoch += 1
        return epoch

    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=True):
        """An iterator yielding each row as a list of Tensors (NumPy arrays if ``output_numpy``).

        Each ``for`` loop over the iterator runs one epoch; after ``num_epochs`` epochs
        (-1: unlimited) it raises RuntimeError. ``do_copy=False`` (MindSpore's faster Tensor
        conversion) is checked and noted once: the values are the same.
        """
        from .iterators import TupleIterator
        _speed_flag("create_tuple_iterator", "do_copy", do_copy, True)
        return TupleIterator(self, num_epochs, output_numpy, columns)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        """Like :meth:`create_tuple_iterator`, yielding ``{column name: value}`` dicts."""
        from .iterators import DictIterator
        _speed_flag("create_dict_iterator", "do_copy", do_copy, True)
        return DictIterator(self, num_epochs, output_numpy)

    def __iter__(self):
        """One epoch of rows as lists of Tensors (each loop starts the next epoch)."""
        return iter(self.create_tuple_iterator(num_epochs=1))

    def __repr__(self):
        inner = f"<- {self.children[0]!r}" if self.children else ""
        return f"{type(self).__name__}(columns={self.get_col_names()}) {inner}".strip()


# MindSpore's batch() keywords besides batch_size, drop_remainder, num_parallel_workers
_BATCH_KWARGS = frozenset({"per_batch_map", "input_columns", "output_columns", "pad_info",
                           "python_multiprocessing", "max_rowsize"})


def _speed_flag(what, name, value, default):
    """A MindSpore option that only tunes speed: a bool (or the default), noted once when set."""
    if value is default:
        return
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be True or False, got {value!r}")
    if bool(value) != default:
        _once(f"dataset.{name}", "%s: %s=%s is accepted and changes nothing: MindSpore uses it to "
              "speed up its pipeline; here rows are produced in the calling thread with the same "
              "values", what, name, bool(value))


def _check_rowsize(what, value):
    """``max_rowsize``: MindSpore's shared-memory size per row (MB) for worker processes; there
    are none here, so any valid size is fine."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, list, tuple)):
        raise TypeError(f"{what}: max_rowsize must be an int (MB) or a list of two, got {value!r}")


def _refuse(what, name, value, why):
    if value is not None:
        raise NotImplementedError(f"{what}: {name}={value!r:.60} was given, but {why}; "
                                  f"leave {name}=None")


def concat_blocks(blocks):
    """One block from several (column-wise concatenation)."""
    if len(blocks) == 1:
        return blocks[0]
    return tuple(np.concatenate(columns, axis=0) for columns in zip(*blocks))


def block_length(block):
    return len(block[0]) if block else 0
