"""Embedding lookup: rows of a table gathered by integer ids, with a sparse or dense gradient.

The sparse gradient is a :class:`~minitorch_dist.row_tensor.RowTensor` (the looked-up ids
and the gradient rows, duplicates not merged), so an optimizer can update only the touched
rows of a large table; the dense one is a full table-shaped array built by a scatter-add.
On the host both directions use the C++ row kernels of ``minitorch_dist.kernels``.
"""
from ..row_tensor import RowTensor
from ..tensor import Tensor
from .primitive import Primitive

__all__ = ["EmbeddingLookup", "embedding_lookup"]


def _use_kernels(xp, array):
    """The C++ row kernels serve host float32/float64 tables; anything else uses xp."""
    return xp.__name__ == "numpy" and array.dtype.char in "fd"


def _scatter_add(xp, target, ids, values):
    """target[ids[k]] += values[k], repeated ids adding up."""
    if _use_kernels(xp, target):
        from .. import kernels
        kernels.scatter_add_rows(target, ids, values)
        return
    try:
        xp.add.at(target, ids, values)
    except (AttributeError, NotImplementedError):   # older CuPy: the cupyx spelling
        import cupyx
        cupyx.scatter_add(target, ids, values)


class EmbeddingLookup(Primitive):
    """``EmbeddingLookup(sparse=True)(table, ids)``: ``table[ids]`` of shape ``ids.shape + (D,)``.

    With ``sparse=True`` the table's gradient is a ``RowTensor`` of the looked-up rows;
    otherwise a dense array shaped like the table. Ids outside ``[0, vocabulary)`` raise
    IndexError.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> table = ms.Tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2), requires_grad=True)
    >>> out = ops.EmbeddingLookup()(table, ms.Tensor(np.array([2, 2, 0])))
    >>> out.asnumpy().tolist()
    [[4.0, 5.0], [4.0, 5.0], [0.0, 1.0]]
    >>> out.sum().backward()
    >>> table.grad.to_dense().asnumpy()[:, 0].tolist()
    [1.0, 0.0, 2.0]
    """

    # ``manual_split`` (row counts per rank): a field-sliced table under semi/auto parallel,
    # set by ``nn.EmbeddingLookup(slice_mode="field_slice")`` (parallel/sharding/rules/gather.py)
    settable_attrs = ("manual_split",)
    manual_split = None

    def __init__(self, sparse=True):
        self.sparse = bool(sparse)

    def _check(self, xp, table, ids):
        if table.ndim < 1:
            raise ValueError(f"{self.name}: table must have a row axis, got shape {table.shape}")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: ids must be integers, got {ids.dtype}")
        vocab = table.shape[0]
        if ids.size:
            bad = (ids < 0) | (ids >= vocab)
            if bool(bad.any()):
                first = int(ids.reshape(-1)[int(xp.argmax(bad.reshape(-1)))])
                raise IndexError(f"{self.name}: id {first} is out of range for a vocabulary of "
                                 f"{vocab} rows (table shape {table.shape})")

    def forward(self, ctx, table, ids):
        xp = ctx.xp
        self._check(xp, table, ids)
        if _use_kernels(xp, table):
            from .. import kernels
            out = kernels.embedding_gather(table, ids)
        else:
            out = xp.take(table, ids, axis=0)
        ctx.save_for_backward(ids)
        ctx.table_shape = table.shape
        return out

    def backward(self, ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None
        (ids,) = ctx.saved
        xp = ctx.xp
        row_shape = ctx.table_shape[1:]
        flat_ids = ids.reshape(-1)
        rows = grad.reshape((flat_ids.shape[0],) + row_shape)
        if self.sparse:
            return RowTensor(Tensor._make(flat_ids, ctx.device), Tensor._make(rows, ctx.device),
                             ctx.table_shape), None
        dense = xp.zeros(ctx.table_shape, grad.dtype)
        _scatter_add(xp, dense, flat_ids, rows)
        return dense, None


_shared = {}


def embedding_lookup(table, ids, sparse=False):
    """``table[ids]`` with a dense gradient (``sparse=True`` gives a ``RowTensor`` gradient).

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> table = ms.Tensor(np.eye(4, dtype=np.float32))
    >>> ops.embedding_lookup(table, ms.Tensor(np.array([[1, 3]]))).shape
    (1, 2, 4)
    """
    op = _shared.get(bool(sparse))
    if op is None:
        op = _shared[bool(sparse)] = EmbeddingLookup(sparse=sparse)
    return op(table, ids)
