"""RowTensor: a sparse gradient made of a few rows of a large table."""


class RowTensor:
    """Rows ``values[i]`` at row ``indices[i]`` of a dense tensor of shape ``dense_shape``.

    Indices may repeat; repeated rows add up. Embedding lookups and gathers along axis 0
    return gradients of this kind so that optimizers can update only the touched rows.

    >>> import numpy as np
    >>> from minitorch_dist import Tensor, RowTensor
    >>> g = RowTensor(Tensor(np.array([2, 0, 2])), Tensor(np.ones((3, 2), np.float32)), (4, 2))
    >>> g.to_dense().asnumpy()[:, 0].tolist()
    [1.0, 0.0, 2.0, 0.0]
    """

    def __init__(self, indices, values, dense_shape):
        from .tensor import Tensor
        self.indices = indices if isinstance(indices, Tensor) else Tensor(indices)
        self.values = values if isinstance(values, Tensor) else Tensor(values)
        self.dense_shape = tuple(int(n) for n in dense_shape)
        if self.indices.ndim != 1:
            raise ValueError(f"RowTensor indices must be 1-D, got shape {self.indices.shape}")
        if self.values.shape != (self.indices.shape[0],) + self.dense_shape[1:]:
            raise ValueError(f"RowTensor values must have shape {(self.indices.shape[0],) + self.dense_shape[1:]}"
                             f" (one row per index), got {self.values.shape}")

    @property
    def shape(self):
        return self.dense_shape

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def device(self):
        return self.values.device

    def to_dense(self):
        """The dense tensor these rows describe (repeated rows summed)."""
        from .tensor import Tensor
        xp = self.values.device.xp
        dense = xp.zeros(self.dense_shape, self.values.dtype)
        xp.add.at(dense, self.indices.data, self.values.data)
        return Tensor._make(dense, self.values.device)

    @staticmethod
    def add(a, b):
        """Sum of two gradients of which at least one is a RowTensor."""
        if isinstance(a, RowTensor) and isinstance(b, RowTensor):
            xp = a.values.device.xp
            return RowTensor(_wrap(xp.concatenate([a.indices.data, b.indices.data]), a),
                             _wrap(xp.concatenate([a.values.data, b.values.data]), a),
                             a.dense_shape)
        sparse, dense = (a, b) if isinstance(a, RowTensor) else (b, a)
        out = dense.copy()
        sparse.values.device.xp.add.at(out, sparse.indices.data, sparse.values.data)
        return out

    def __repr__(self):
        return (f"RowTensor(rows={self.indices.shape[0]}, dense_shape={self.dense_shape}, "
                f"dtype={self.dtype}, device={self.device})")


def _wrap(array, like):
    from .tensor import Tensor
    return Tensor._make(array, like.values.device)
