"""Small layers without weights: Flatten, Dropout, Identity; plus the argument checks the
other layer files share."""
from ... import ops
from ..cell import Cell

__all__ = ["Flatten", "Dropout", "Identity"]


def positive_int(value, layer, what):
    """``value`` as an int, or a ValueError naming the layer and the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{layer}: {what} must be a positive int, got {value!r}")
    return value


def int_pair(value, layer, what):
    """An int or a 2-tuple of positive ints as a pair (MindSpore's names: kernel_size, stride)."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return tuple(positive_int(v, layer, what) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        positive_int(value, layer, what)
        return (value, value)
    raise ValueError(f"{layer}: {what} must be an int or a tuple of 2 ints, got {value!r}")


class Flatten(Cell):
    """Merge axes ``start_dim..end_dim``; the default keeps the batch axis: ``(N, -1)``.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> nn.Flatten()(ms.Tensor(np.zeros((2, 3, 4), np.float32))).shape
    (2, 12)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim
        if (start_dim, end_dim) == (1, -1):
            self.flatten = ops.Flatten()
        else:
            self.reshape = ops.Reshape()

    def construct(self, x):
        if (self.start_dim, self.end_dim) == (1, -1):
            return self.flatten(x)
        ndim = x.ndim
        start = self.start_dim + ndim if self.start_dim < 0 else self.start_dim
        end = self.end_dim + ndim if self.end_dim < 0 else self.end_dim
        if not 0 <= start <= end < max(ndim, 1):
            raise ValueError(f"Flatten: start_dim={self.start_dim}, end_dim={self.end_dim} do not fit "
                             f"an input of shape {tuple(x.shape)}")
        shape = x.shape
        return self.reshape(x, tuple(shape[:start]) + (-1,) + tuple(shape[end + 1:]))

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Cell):
    """Returns its input unchanged (a placeholder in SequentialCells)."""

    def construct(self, x):
        return x


class Dropout(Cell):
    """Zero each element with probability ``p = 1 - keep_prob`` and scale the rest by
    ``1/keep_prob``, only in training mode (``set_train(True)``, the default); in
    evaluation mode it is the identity. MindSpore 2.x accepts ``p``, which wins over
    ``keep_prob`` when given.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> drop = nn.Dropout(p=0.5).set_train(False)
    >>> drop(ms.Tensor(np.ones(3, np.float32))).asnumpy().tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, keep_prob=0.5, p=None):
        super().__init__()
        if p is not None:
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
                raise ValueError(f"Dropout: p (the probability of dropping) must be in [0, 1), got {p!r}")
            keep_prob = 1.0 - p
        elif isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float)) \
                or not 0 < keep_prob <= 1:
            raise ValueError(f"Dropout: keep_prob must be in (0, 1], got {keep_prob!r}")
        self.keep_prob = float(keep_prob)
        self.p = 1.0 - self.keep_prob
        self.dropout = ops.Dropout(keep_prob=self.keep_prob)

    def construct(self, x):
        if not self.training or self.keep_prob == 1.0:
            return x
        out = self.dropout(x)
        return out[0] if isinstance(out, tuple) else out   # MindSpore's primitive also returns the mask

    def extra_repr(self):
        return f"p={self.p}"
