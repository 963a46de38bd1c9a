"""Conv2d: 2-D convolution over NCHW input with MindSpore's signature and defaults."""
import math

from ... import ops
from ...backend import dtypes
from ...common.initializer import HeUniform, Uniform, initializer
from ..cell import Cell
from ..parameter import Parameter
from .basic import positive_int, int_pair
from .logical_shape import logical_shape

__all__ = ["Conv2d"]

_PAD_MODES = ("same", "valid", "pad")


def _padding(padding):
    """MindSpore's ``padding``: an int or (top, bottom, left, right), all non-negative."""
    if isinstance(padding, int) and not isinstance(padding, bool):
        pads = (padding,) * 4
    elif isinstance(padding, (tuple, list)) and len(padding) == 4:
        pads = tuple(padding)
    else:
        raise ValueError(f"Conv2d: padding must be an int or a tuple of 4 ints "
                         f"(top, bottom, left, right), got {padding!r}")
    if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pads):
        raise ValueError(f"Conv2d: padding must hold non-negative ints, got {padding!r}")
    return pads


class Conv2d(Cell):
    """2-D convolution: ``weight`` of shape ``(out_channels, in_channels/group, kh, kw)``.

    MindSpore's defaults: ``pad_mode="same"`` (output size ``ceil(H/stride)``) and no bias.
    ``pad_mode="pad"`` uses ``padding`` (an int or ``(top, bottom, left, right)``);
    ``"valid"`` pads nothing. The defaults draw the weight from ``HeUniform(sqrt(5))`` and
    the bias from ``Uniform(1/sqrt(fan_in))``, as PyTorch's ``Conv2d`` does.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> conv = nn.Conv2d(3, 8, 3)
    >>> conv(ms.Tensor(np.zeros((2, 3, 5, 5), np.float32))).shape, conv.weight.shape
    ((2, 8, 5, 5), (8, 3, 3, 3))
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, data_format="NCHW", dtype=dtypes.float32):
        super().__init__()
        self.in_channels = positive_int(in_channels, "Conv2d", "in_channels")
        self.out_channels = positive_int(out_channels, "Conv2d", "out_channels")
        self.group = positive_int(group, "Conv2d", "group")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"Conv2d: in_channels ({self.in_channels}) and out_channels "
                             f"({self.out_channels}) must both be divisible by group ({self.group})")
        self.kernel_size = int_pair(kernel_size, "Conv2d", "kernel_size")
        self.stride = int_pair(stride, "Conv2d", "stride")
        self.dilation = int_pair(dilation, "Conv2d", "dilation")
        mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
        if mode not in _PAD_MODES:
            raise ValueError(f"Conv2d: pad_mode must be one of {list(_PAD_MODES)}, got {pad_mode!r}")
        self.pad_mode = mode
        self.padding = _padding(padding)
        if mode != "pad" and any(self.padding):
            raise ValueError(f"Conv2d: padding={padding!r} needs pad_mode='pad', "
                             f"got pad_mode={pad_mode!r}")
        if data_format != "NCHW":
            raise ValueError(f"Conv2d: only data_format='NCHW' is supported, got {data_format!r}")
        self.data_format = data_format
        self.has_bias = bool(has_bias)
        shape = [self.out_channels, self.in_channels // self.group, *self.kernel_size]
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(initializer(weight_init, shape, dtype))
        self.bias = None
        if self.has_bias:
            if bias_init is None:
                fan_in = shape[1] * shape[2] * shape[3]
                bias_init = Uniform(1.0 / math.sqrt(fan_in))
            self.bias = Parameter(initializer(bias_init, [self.out_channels], dtype))
        self.conv2d = ops.Conv2D(out_channel=self.out_channels, kernel_size=self.kernel_size,
                                 mode=1, pad_mode=mode, pad=self.padding, stride=self.stride,
                                 dilation=self.dilation, group=self.group)

    def construct(self, x):
        shape = logical_shape(x)      # whole, also on a rank's slice in a sharded run
        if len(shape) != 4 or shape[1] != self.in_channels:
            raise ValueError(f"Conv2d expected NCHW input with {self.in_channels} channels, "
                             f"got shape {tuple(shape)}"
                             + (f" ({shape[1]} channels)" if len(shape) == 4 else ""))
        if self.has_bias:
            return self.conv2d(x, self.weight, self.bias)   # the primitive adds the bias in place
        return self.conv2d(x, self.weight)

    def extra_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, "
                f"has_bias={self.has_bias}")
