"""MindSpore's small utility layers: ``Dropout2d/3d``, ``Conv1d``, ``BiDense``, ``ClipByNorm``,
``Norm``, ``OneHot``, ``Range``, ``Roll``, ``Tril``, ``Triu``, ``L1Regularizer``, ``Moments``,
``MatrixDiag``/``MatrixDiagPart``/``MatrixSetDiag``, ``CentralCrop`` and ``ImageGradients``
(``Unfold`` is refused: use ``nn.Conv2d``).

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> nn.Conv1d(2, 3, 3, pad_mode="same")(ms.Tensor(np.ones((1, 2, 5), np.float32))).shape
(1, 3, 5)
"""
import math


from ... import ops
from ...common.initializer import HeUniform, Uniform, initializer
from ..cell import Cell
from ..parameter import Parameter

__all__ = ["Dropout2d", "Dropout3d", "Conv1d", "BiDense", "ClipByNorm", "Norm", "OneHot", "Range",
           "Roll", "Tril", "Triu", "L1Regularizer", "Moments", "MatrixDiag", "MatrixDiagPart",
           "MatrixSetDiag", "CentralCrop", "ImageGradients", "Unfold"]


class _ChannelDropout(Cell):
    fn = None

    def __init__(self, p=0.5):
        super().__init__()
        if isinstance(p, bool) or not 0 <= p < 1:
            raise ValueError(f"nn.{type(self).__name__}: p must be in [0, 1), got {p!r}")
        self.p = p

    def construct(self, x):
        return type(self).fn(x, self.p, self.training)


class Dropout2d(_ChannelDropout):
    fn = staticmethod(ops.dropout2d)


class Dropout3d(_ChannelDropout):
    fn = staticmethod(ops.dropout3d)


class Conv1d(Cell):
    """``Conv1d(in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
    dilation=1, group=1, has_bias=False)`` on (N, C, L) inputs."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
                 dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None, dtype=None):
        super().__init__()
        if pad_mode not in ("same", "valid", "pad"):
            raise ValueError(f"nn.Conv1d: pad_mode must be 'same', 'valid' or 'pad', got {pad_mode!r}")
        shape = [out_channels, in_channels // group, kernel_size]
        self.weight = Parameter(initializer(weight_init or HeUniform(math.sqrt(5)), shape), name="weight")
        bound = 1 / math.sqrt(in_channels // group * kernel_size)
        self.bias = Parameter(initializer(bias_init or Uniform(bound), [out_channels]), name="bias") \
            if has_bias else None
        self.stride, self.dilation, self.group = stride, dilation, group
        self.padding = pad_mode if pad_mode != "pad" else padding

    def construct(self, x):
        return ops.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.group)


class BiDense(Cell):
    """``y = x1^T A x2 + b`` (``A``: out x in1 x in2)."""

    def __init__(self, in1_channels, in2_channels, out_channels, weight_init=None, bias_init=None,
                 has_bias=True, dtype=None):
        super().__init__()
        bound = 1 / math.sqrt(in1_channels)
        shape = [out_channels, in1_channels, in2_channels]
        self.weight = Parameter(initializer(weight_init or Uniform(bound), shape), name="weight")
        self.bias = Parameter(initializer(bias_init or Uniform(bound), [out_channels]), name="bias") \
            if has_bias else None

    def construct(self, x1, x2):
        out = ops.einsum("bi,oij,bj->bo", x1, self.weight, x2)
        return out if self.bias is None else out + self.bias


class ClipByNorm(Cell):
    def __init__(self, axis=None):
        super().__init__()
        self.axis = axis

    def construct(self, x, clip_norm):
        norm = ops.sqrt(ops.sum(x * x, self.axis, True))
        return x * ops.minimum(1.0, clip_norm / ops.maximum(norm, 1e-12))


class Norm(Cell):
    def __init__(self, axis=(), keep_dims=False):
        super().__init__()
        self.axis, self.keep_dims = (None if axis == () else axis), keep_dims

    def construct(self, x):
        return ops.sqrt(ops.sum(x * x, self.axis, self.keep_dims))


class OneHot(Cell):
    def __init__(self, axis=-1, depth=1, on_value=1.0, off_value=0.0, dtype=None):
        super().__init__()
        self.axis, self.depth, self.on, self.off = axis, depth, on_value, off_value

    def construct(self, indices):
        return ops.one_hot(indices, self.depth, self.on, self.off, axis=self.axis)


class Range(Cell):
    def __init__(self, start, limit=None, delta=1):
        super().__init__()
        self.args = (start, limit, delta)

    def construct(self):
        return ops.arange(*self.args)


class Roll(Cell):
    def __init__(self, shift, axis):
        super().__init__()
        self.shift, self.axis = shift, axis

    def construct(self, x):
        return ops.roll(x, self.shift, self.axis)


class Tril(Cell):
    def construct(self, x, k=0):
        return ops.tril(x, k)


class Triu(Cell):
    def construct(self, x, k=0):
        return ops.triu(x, k)


class L1Regularizer(Cell):
    def __init__(self, scale):
        super().__init__()
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0 or math.isinf(scale):
            raise ValueError(f"nn.L1Regularizer: scale must be a positive finite number, got {scale!r}")
        self.scale = float(scale)

    def construct(self, weights):
        return self.scale * ops.sum(ops.abs(weights))


class Moments(Cell):
    def __init__(self, axis=None, keep_dims=None):
        super().__init__()
        self.axis, self.keep_dims = axis, bool(keep_dims)

    def construct(self, x):
        mean = ops.mean(x, self.axis, True)
        var = ops.mean((x - mean) * (x - mean), self.axis, self.keep_dims)
        return (mean if self.keep_dims else ops.mean(x, self.axis, False)), var


class MatrixDiag(Cell):
    def construct(self, x):
        return ops.matrix_diag(x)


class MatrixDiagPart(Cell):
    def construct(self, x):
        return ops.matrix_diag_part(x)


class MatrixSetDiag(Cell):
    def construct(self, x, diagonal):
        return ops.matrix_set_diag(x, diagonal)


class CentralCrop(Cell):
    def __init__(self, central_fraction):
        super().__init__()
        if not 0 < central_fraction <= 1:
            raise ValueError(f"nn.CentralCrop: central_fraction must be in (0, 1], got {central_fraction!r}")
        self.fraction = float(central_fraction)

    def construct(self, image):
        h, w = image.shape[-2:]
        ch, cw = int(h * self.fraction + 0.5), int(w * self.fraction + 0.5)
        top, left = (h - ch) // 2, (w - cw) // 2
        return image[..., top:top + ch, left:left + cw]


class ImageGradients(Cell):
    """(dy, dx) of an (N, C, H, W) image, zero in the last row/column."""

    def construct(self, images):
        dy = ops.pad(images[:, :, 1:, :] - images[:, :, :-1, :], (0, 0, 0, 1))
        dx = ops.pad(images[:, :, :, 1:] - images[:, :, :, :-1], (0, 1))
        return dy, dx


class Unfold(Cell):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("nn.Unfold is not implemented in minitorch_dist: patch extraction "
                                  "is internal to ops.conv2d here; use nn.Conv2d")


