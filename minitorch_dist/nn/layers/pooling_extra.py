"""1-d and adaptive pooling layers (``nn.AvgPool1d``, ``nn.AdaptiveAvgPool2d``, ...) over the
functional ops; the 3-d ones are refused with an error saying what exists.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> nn.AdaptiveAvgPool2d((1, 1))(ms.Tensor(np.ones((2, 3, 5, 5), np.float32))).shape
(2, 3, 1, 1)
"""
from ... import ops
from ..cell import Cell

__all__ = ["AvgPool1d", "MaxPool1d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d"]


def _positive(value, owner, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"nn.{owner}: {name} must be a positive int, got {value!r}")
    return value


class _Pool1d(Cell):
    def __init__(self, kernel_size=1, stride=1, pad_mode="valid"):
        super().__init__()
        owner = type(self).__name__
        self.kernel_size = _positive(kernel_size, owner, "kernel_size")
        self.stride = _positive(stride, owner, "stride")
        if str(pad_mode).lower() != "valid":
            raise ValueError(f"nn.{owner}: only pad_mode='valid' is supported here, got {pad_mode!r}")


class AvgPool1d(_Pool1d):
    def construct(self, x):
        return ops.avg_pool1d(x, self.kernel_size, self.stride)


class MaxPool1d(_Pool1d):
    def construct(self, x):
        return ops.max_pool1d(x, self.kernel_size, self.stride)


class _Adaptive(Cell):
    fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def construct(self, x):
        return type(self).fn(x, self.output_size)


class AdaptiveAvgPool1d(_Adaptive):
    fn = staticmethod(ops.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_Adaptive):
    fn = staticmethod(ops.adaptive_avg_pool2d)


class AdaptiveMaxPool1d(_Adaptive):
    fn = staticmethod(ops.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_Adaptive):
    fn = staticmethod(ops.adaptive_max_pool2d)

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        if return_indices:
            raise ValueError("nn.AdaptiveMaxPool2d: return_indices=True is not supported here")


class _Refused3d(Cell):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"nn.{type(self).__name__} is not implemented in minitorch_dist: "
                                  "3-d pooling has no kernel here (2-d: nn.AdaptiveAvgPool2d)")


class AdaptiveAvgPool3d(_Refused3d):
    pass


class AdaptiveMaxPool3d(_Refused3d):
    pass
