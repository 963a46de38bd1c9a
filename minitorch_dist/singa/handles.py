"""SINGA's operator handles (``singa_wrap.ConvHandle``, ``BatchNormHandle``, ...).

SINGA's layers make a handle at their first call and pass it to ``autograd.conv2d`` or
``autograd.batchnorm_2d``; user code that calls those functions directly makes one too,
from ``singa_wrap``. Here a handle is plain data: the settings the core primitive needs.

>>> from minitorch_dist.singa import singa_wrap as singa
>>> singa.BatchNormHandle(0.9).factor
0.9
>>> h = singa.ConvHandle(None, (3, 3), (1, 1), (1, 1), 8, 16, True, 1)
>>> h.stride, h.padding, h.group
((1, 1), (1, 1), 1)
"""

__all__ = ["ConvHandle", "BatchNormHandle", "PoolingHandle"]


def _pair(value, call, name):
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) and v >= 0 for v in pair):
        raise ValueError(f"singa_wrap.{call}: {name} must be an int or a pair of ints >= 0, "
                         f"got {value!r}")
    return pair


class ConvHandle:
    """``ConvHandle(x, kernel_size, stride, padding, in_channels, out_channels, bias,
    group=1)``: the settings of one convolution (``x``, SINGA's input CTensor, is unused)."""

    def __init__(self, x, kernel_size, stride, padding, in_channels, out_channels, bias,
                 group=1):
        self.kernel_size = _pair(kernel_size, "ConvHandle", "kernel_size")
        self.stride = _pair(stride, "ConvHandle", "stride")
        self.padding = _pair(padding, "ConvHandle", "padding")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.bias, self.group = bool(bias), int(group)


class BatchNormHandle:
    """``BatchNormHandle(momentum, x=None)``: ``factor`` is the weight of the batch
    statistics in the running ones (SINGA's ``momentum``, 0.9 in ``layer.BatchNorm2d``)."""

    def __init__(self, momentum, x=None):
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"singa_wrap.BatchNormHandle: momentum must be in [0, 1], got "
                             f"{momentum!r}")
        self.factor = float(momentum)


class PoolingHandle:
    """``PoolingHandle(x, kernel_size, stride, padding, is_max=True)``."""

    def __init__(self, x, kernel_size, stride, padding, is_max=True):
        self.kernel_size = _pair(kernel_size, "PoolingHandle", "kernel_size")
        self.stride = _pair(stride, "PoolingHandle", "stride")
        self.padding = _pair(padding, "PoolingHandle", "padding")
        self.is_max = bool(is_max)
