"""Pooling cells over NCHW input: MaxPool2d and AvgPool2d (MindSpore's signatures)."""
from ... import ops
from ..cell import Cell
from .basic import int_pair

__all__ = ["MaxPool2d", "AvgPool2d"]


class _Pool2d(Cell):
    primitive_name = None   # the ops class's name, set by subclasses

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", data_format="NCHW"):
        super().__init__()
        layer = type(self).__name__
        self.kernel_size = int_pair(kernel_size, layer, "kernel_size")
        self.stride = int_pair(stride, layer, "stride")
        mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
        if mode not in ("valid", "same"):
            raise ValueError(f"{layer}: pad_mode must be 'valid' or 'same', got {pad_mode!r}")
        if data_format != "NCHW":
            raise ValueError(f"{layer}: only data_format='NCHW' is supported, got {data_format!r}")
        self.pad_mode = mode
        pool = getattr(ops, self.primitive_name)   # looked up here: ops may grow after import
        self.pool = pool(kernel_size=self.kernel_size, strides=self.stride, pad_mode=mode)

    def construct(self, x):
        if x.ndim != 4:
            raise ValueError(f"{type(self).__name__} expected NCHW input (4 dimensions), "
                             f"got shape {tuple(x.shape)}")
        return self.pool(x)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}"


class MaxPool2d(_Pool2d):
    """Maximum over ``kernel_size`` windows moved by ``stride``; ``pad_mode`` "valid" (only
    whole windows) or "same" (output ``ceil(H / stride)``, padding never wins the max).

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> x = ms.Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    >>> nn.MaxPool2d(kernel_size=2, stride=2)(x).asnumpy()[0, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
    """

    primitive_name = "MaxPool"


class AvgPool2d(_Pool2d):
    """Mean over ``kernel_size`` windows moved by ``stride``; ``pad_mode`` "valid" or "same".

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> x = ms.Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    >>> nn.AvgPool2d(kernel_size=2, stride=2)(x).asnumpy()[0, 0].tolist()
    [[2.5, 4.5], [10.5, 12.5]]
    """

    primitive_name = "AvgPool"
