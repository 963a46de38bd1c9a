"""Activation cells: thin wrappers that hold one primitive each, so the placement report
names them ("block.relu") and ``set_device`` can move them.

``get_activation("relu")`` turns a name into a cell; ``nn.Dense(activation=...)`` uses it.
"""
from ... import ops
from ..cell import Cell

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax", "LeakyReLU",
           "get_activation"]


class ReLU(Cell):
    """``max(x, 0)`` elementwise.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> nn.ReLU()(ms.Tensor([-1.0, 2.0])).asnumpy().tolist()
    [0.0, 2.0]
    """

    def __init__(self):
        super().__init__()
        self.relu = ops.ReLU()

    def construct(self, x):
        return self.relu(x)


class Sigmoid(Cell):
    """``1 / (1 + exp(-x))`` elementwise."""

    def __init__(self):
        super().__init__()
        self.sigmoid = ops.Sigmoid()

    def construct(self, x):
        return self.sigmoid(x)


class Tanh(Cell):
    """Hyperbolic tangent elementwise."""

    def __init__(self):
        super().__init__()
        self.tanh = ops.Tanh()

    def construct(self, x):
        return self.tanh(x)


class GELU(Cell):
    """Gaussian error linear unit. ``approximate=True`` (MindSpore's default) uses the tanh
    form; ``approximate=False`` the exact normal CDF (PyTorch's default)."""

    def __init__(self, approximate=True):
        super().__init__()
        self.approximate = approximate
        self.gelu = ops.GeLU(approximate=approximate)

    def construct(self, x):
        return self.gelu(x)

    def extra_repr(self):
        return f"approximate={self.approximate}"


class Softmax(Cell):
    """Softmax along ``axis`` (the last by default)."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis
        self.softmax = ops.Softmax(axis)

    def construct(self, x):
        return self.softmax(x)

    def extra_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Cell):
    """``log(softmax(x))`` along ``axis``, computed without forming the softmax."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis
        self.log_softmax = ops.LogSoftmax(axis)

    def construct(self, x):
        return self.log_softmax(x)

    def extra_repr(self):
        return f"axis={self.axis}"


class LeakyReLU(Cell):
    """``x`` for ``x >= 0``, ``alpha * x`` below (MindSpore's default ``alpha`` is 0.2).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> nn.LeakyReLU(0.5)(ms.Tensor([-2.0, 3.0])).asnumpy().tolist()
    [-1.0, 3.0]
    """

    def __init__(self, alpha=0.2):
        super().__init__()
        if not 0 <= alpha <= 1:
            raise ValueError(f"LeakyReLU: alpha must be in [0, 1], got {alpha}")
        self.alpha = float(alpha)
        self.mul = ops.Mul()
        self.maximum = ops.Maximum()   # max(x, alpha x) is the leaky ReLU for alpha <= 1

    def construct(self, x):
        return self.maximum(x, self.mul(x, self.alpha))

    def extra_repr(self):
        return f"alpha={self.alpha}"


_BY_NAME = {
    "relu": ReLU, "sigmoid": Sigmoid, "tanh": Tanh, "gelu": GELU, "softmax": Softmax,
    "logsoftmax": LogSoftmax, "log_softmax": LogSoftmax, "leakyrelu": LeakyReLU,
    "leaky_relu": LeakyReLU,
}


def get_activation(name):
    """The activation cell for ``name`` ("relu", "sigmoid", "tanh", "gelu", "softmax",
    "logsoftmax", "leakyrelu"); a Cell is returned as is and None stays None.

    >>> from minitorch_dist import nn
    >>> type(nn.get_activation("relu")).__name__
    'ReLU'
    """
    if name is None or isinstance(name, Cell):
        return name
    if isinstance(name, str):
        cls = _BY_NAME.get(name.lower())
        if cls is not None:
            return cls()
    raise ValueError(f"unknown activation {name!r}; expected a Cell, None or one of "
                     f"{sorted(_BY_NAME)}")
