"""Embedding tables: EmbeddingLookup (host or device table, sparse gradient) and Embedding.

``EmbeddingLookup(target="CPU")`` keeps the table and the lookup primitive on the host:
only the looked-up rows travel on to the device that runs the rest of the network, and the
table's gradient comes back as a ``RowTensor`` of those rows (``sparse=True``). A table
larger than the device's memory (``MINITORCH_DIST_VIRTUAL_GPU_MEMORY`` on the virtual GPU)
therefore still trains: it never occupies the device.

``slice_mode="table_row_slice"`` in a job of several ranks splits the table by rows over
the ranks (``minitorch_dist.parallel.embedding.row_slice``; see ``docs/embedding_slicing.md``).
"""
import warnings

from ... import ops
from ...backend import dtypes
from ...common.initializer import initializer
from ...extension import extension
from ..cell import Cell
from ..parameter import Parameter
from .basic import positive_int

__all__ = ["EmbeddingLookup", "Embedding"]

_TARGETS = ("CPU", "DEVICE")
_SLICE_MODES = ("batch_slice", "field_slice", "table_row_slice", "table_column_slice")


def _check_ids(layer, ids):
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{layer}: ids must be integer (int32 or int64), got {ids.dtype}")


class EmbeddingLookup(Cell):
    """Rows of ``embedding_table`` (shape ``(vocab_size, embedding_size)``) at the given ids;
    the output shape is ``ids.shape + (embedding_size,)``.

    * ``target="CPU"``: the table and the lookup live on the host (``set_device("CPU")``),
      whatever the context's device; a network on the GPU receives only the looked-up rows
      and sends back only their gradient rows. ``"DEVICE"``: both on the context's device,
      where a table that does not fit raises ``DeviceOutOfMemoryError``. MindSpore requires
      ``sparse=True`` with "CPU", and so does this layer.
    * ``sparse=True``: the table's gradient is a ``RowTensor`` of the looked-up rows, which
      optimizers apply to those rows only; ``False`` gives a dense gradient.
    * ``max_norm``: output rows longer than this are scaled down to it.
    * ``slice_mode``: ``"batch_slice"`` (default) keeps the whole table on every rank; in
      data parallel its ``RowTensor`` gradients are all-gathered by
      ``DistributedGradReducer``. ``"table_row_slice"`` in a job of N > 1 ranks
      (``communication.init()``) keeps rows ``[r * ceil(V / N), (r + 1) * ceil(V / N))`` on
      rank r (the last ranks hold fewer when N does not divide V): ids and rows travel to
      and from the owning ranks by all-to-all, and each rank's table gradient is a
      ``RowTensor`` of its own local rows. The slice is cut from the full table initialised
      from the seed, so every configuration starts from the same weights. With one process
      both modes are the same. Under SEMI_AUTO_PARALLEL/AUTO_PARALLEL every mode is an
      operator strategy, as in MindSpore: ``"table_column_slice"`` splits the columns and
      ``"field_slice"`` (``manual_shapes``: the table rows of each rank, equal blocks here)
      splits the rows and the ids' fields over the same ranks. Outside semi/auto parallel
      those two keep the table whole on every rank, as MindSpore does, with a one-time note.
    * ``group`` (an extension of this library): the group, a name or a ``Communicator``,
      that a row-sliced table is split over; default: the world.
    * Ids out of range raise IndexError (on every rank at once for a row-sliced table).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> emb = nn.EmbeddingLookup(10, 4, target="CPU")
    >>> emb(ms.Tensor([[1, 2, 3]])).shape, emb.embedding_table.name, emb.lookup.primitive_target
    ((1, 3, 4), 'embedding_table', 'CPU')
    """

    BATCH_SLICE, FIELD_SLICE, TABLE_ROW_SLICE, TABLE_COLUMN_SLICE = _SLICE_MODES

    def __init__(self, vocab_size, embedding_size, param_init="normal", target="CPU",
                 slice_mode="batch_slice", manual_shapes=None, max_norm=None, sparse=True,
                 vocab_cache_size=0, dtype=dtypes.float32, group=None):
        super().__init__()
        self.vocab_size = positive_int(vocab_size, "EmbeddingLookup", "vocab_size")
        self.embedding_size = positive_int(embedding_size, "EmbeddingLookup", "embedding_size")
        target = target.upper() if isinstance(target, str) else target
        if target not in _TARGETS:
            raise ValueError(f"EmbeddingLookup: target must be 'CPU' or 'DEVICE', got {target!r}")
        if target == "CPU" and not sparse:
            raise ValueError("EmbeddingLookup: target='CPU' needs sparse=True, as in MindSpore "
                             "('When target is CPU, embedding_lookup must be sparse'): the host "
                             "table is updated row by row from a RowTensor gradient. Pass "
                             "sparse=True, or target='DEVICE' for a dense gradient.")
        if slice_mode not in _SLICE_MODES:
            raise ValueError(f"EmbeddingLookup: slice_mode must be one of {list(_SLICE_MODES)}, "
                             f"got {slice_mode!r}")
        if slice_mode == "field_slice" and manual_shapes is None:
            raise ValueError("EmbeddingLookup: slice_mode='field_slice' needs manual_shapes "
                             "(the number of table rows in each slice)")
        if max_norm is not None and (isinstance(max_norm, bool) or not isinstance(max_norm, (int, float))
                                     or max_norm <= 0):
            raise ValueError(f"EmbeddingLookup: max_norm must be a positive number or None, got {max_norm!r}")
        if isinstance(vocab_cache_size, bool) or not isinstance(vocab_cache_size, int) \
                or vocab_cache_size < 0:
            raise ValueError(f"EmbeddingLookup: vocab_cache_size must be a non-negative int, "
                             f"got {vocab_cache_size!r}")
        if vocab_cache_size and target == "DEVICE":
            raise NotImplementedError("EmbeddingLookup: vocab_cache_size > 0 (a device cache of a "
                                      "parameter-server table) is not supported")
        if vocab_cache_size:
            warnings.warn("EmbeddingLookup: vocab_cache_size is ignored with target='CPU'", stacklevel=2)
        self.target = target
        self.sparse = bool(sparse)
        self.slice_mode = slice_mode
        self.manual_shapes = None if manual_shapes is None else tuple(manual_shapes)
        self.max_norm = None if max_norm is None else float(max_norm)
        self.vocab_cache_size = vocab_cache_size
        home = "CPU" if target == "CPU" else None
        shape = [self.vocab_size, self.embedding_size]
        sliced = extension().sliced_embedding(slice_mode, shape, dtype, param_init, home, group,
                                              self.sparse, manual_shapes=self.manual_shapes)
        if sliced is None:
            table = initializer(param_init, shape, dtype, device=home)
            self.embedding_table = Parameter(table, device=home)
            self.lookup = ops.EmbeddingLookup(sparse=self.sparse)
        else:      # split across ranks (parallel/embedding/row_slice.py)
            self.embedding_table, self.lookup = sliced
        if target == "CPU":
            self.lookup.set_device("CPU")
        if self.max_norm is not None:
            self.clip = _ClipRows(self.max_norm)

    def construct(self, ids):
        _check_ids("EmbeddingLookup", ids)
        out = self.lookup(self.embedding_table, ids)
        return out if self.max_norm is None else self.clip(out)

    def extra_repr(self):
        return (f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, "
                f"target={self.target}, sparse={self.sparse}, slice_mode={self.slice_mode}")


class _ClipRows(Cell):
    """Scale each row (last axis) whose L2 norm exceeds ``max_norm`` down to ``max_norm``."""

    def __init__(self, max_norm):
        super().__init__()
        self.max_norm = max_norm
        self.square_sum = ops.ReduceSum(keep_dims=True)
        self.mul = ops.Mul()
        self.sqrt = ops.Sqrt()
        self.maximum = ops.Maximum()
        self.div = ops.Div()

    def construct(self, x):
        norm = self.sqrt(self.square_sum(self.mul(x, x), -1))
        return self.mul(x, self.div(self.max_norm, self.maximum(norm, self.max_norm)))


class Embedding(Cell):
    """A trainable table of ``vocab_size`` vectors; ``embedding(ids)`` has shape
    ``ids.shape + (embedding_size,)`` and the table's gradient is dense.

    ``embedding_table`` is the initializer (``"normal"`` by default); ``padding_idx``, when
    given, starts that row at zero. ``use_one_hot=True`` is accepted for compatibility: a
    one-hot product and a row lookup give the same output and gradient.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> emb = nn.Embedding(5, 3, padding_idx=0)
    >>> emb(ms.Tensor([0, 4])).asnumpy()[0].tolist(), emb.embedding_table.shape
    ([0.0, 0.0, 0.0], (5, 3))
    """

    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                 dtype=dtypes.int32, padding_idx=None):
        super().__init__()
        self.vocab_size = positive_int(vocab_size, "Embedding", "vocab_size")
        self.embedding_size = positive_int(embedding_size, "Embedding", "embedding_size")
        if dtypes.to_dtype(dtype).kind not in "iu":
            raise TypeError(f"Embedding: dtype is the ids' dtype and must be an integer type, got {dtype}")
        if padding_idx is not None and (isinstance(padding_idx, bool) or not isinstance(padding_idx, int)
                                        or not 0 <= padding_idx < self.vocab_size):
            raise ValueError(f"Embedding: padding_idx must be None or an int in [0, {self.vocab_size}), "
                             f"got {padding_idx!r}")
        self.use_one_hot = bool(use_one_hot)
        self.dtype = dtype
        self.padding_idx = padding_idx
        table = initializer(embedding_table, [self.vocab_size, self.embedding_size], dtypes.float32)
        self.embedding_table = Parameter(table)
        if padding_idx is not None:
            self.embedding_table.data[padding_idx] = 0
        self.gather = ops.Gather()

    def construct(self, ids):
        _check_ids("Embedding", ids)
        if ids.size and int(ids.data.min()) < 0:   # Gather would count negative ids from the end
            raise IndexError(f"Embedding: id {int(ids.data.min())} is out of range for a table of "
                             f"{self.vocab_size} rows (ids must lie in [0, {self.vocab_size}))")
        return self.gather(self.embedding_table, ids, 0)

    def extra_repr(self):
        return (f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, "
                f"use_one_hot={self.use_one_hot}, padding_idx={self.padding_idx}")
