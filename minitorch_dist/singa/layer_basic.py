"""SINGA's basic layers: Conv2d, Linear, pooling, ReLU, Flatten, Dropout, SoftMaxCrossEntropy.

``minitorch_dist.singa.layer`` gives them with the rest (``layer.Linear``, ...); the module
docstring there says how SINGA layers map onto Cells.
"""
import math

import numpy as np

from .. import ops
from ..tensor import Tensor as CoreTensor
from . import flags
from .layer_base import (Layer, _check_input, _gaussian_parameter, _pad_mode, _pair,
                         _positive_int, _same_lower, _zero_parameter)
from . import pool_wide as _pool_wide
from .unsupported import not_supported

__all__ = ["Conv2d", "Linear", "Pooling2d", "MaxPool2d", "AvgPool2d", "ReLU",
           "Flatten", "Dropout", "SoftMaxCrossEntropy"]


# ---- layers ---------------------------------------------------------------------------
class Conv2d(Layer):
    """``Conv2d(nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1, group=1,
    bias=True, pad_mode="NOTSET", activation="NOTSET")`` over NCHW input.

    The older form ``Conv2d(in_channels, out_channels, kernel_size[, stride[, padding]])`` is
    accepted, as in SINGA; the input channels always come from the input (a declared
    ``in_channels`` that disagrees with it is an error). ``activation="RELU"`` applies a ReLU.
    ``padding`` is an int or ``(pad_h, pad_w)``; ``pad_mode`` "SAME_UPPER"/"SAME_LOWER"
    pad to an output of ``ceil(H / stride)`` (the odd pixel after / before), "VALID" pads
    nothing. W is ``(nb_kernels, C/group, kh, kw)``, b is ``(nb_kernels,)``.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 group=1, bias=True, pad_mode="NOTSET", activation="NOTSET", **kwargs):
        call = "layer.Conv2d"
        if len(args) > 3:
            raise TypeError(f"{call}: at most (in_channels, out_channels, kernel_size, stride, "
                            f"padding) positionally, got {2 + len(args)} arguments")
        super().__init__()
        self.in_channels = None
        if args:            # the older form: (in_channels, out_channels, kernel_size, ...)
            self.in_channels = _positive_int(nb_kernels, call, "in_channels")
            nb_kernels, kernel_size = kernel_size, args[0]
            stride = args[1] if len(args) > 1 else stride
            padding = args[2] if len(args) > 2 else padding
        extra = sorted(set(kwargs) - {"cudnn_prefer", "workspace_MB_limit"})
        if extra:
            raise TypeError(f"{call}: unexpected keyword arguments {extra}")
        self.nb_kernels = _positive_int(nb_kernels, call, "nb_kernels")
        self.kernel_size = _pair(kernel_size, call, "kernel_size")
        self.stride = _pair(stride, call, "stride")
        self.dilation = _pair(dilation, call, "dilation")
        self.group = _positive_int(group, call, "group")
        if isinstance(padding, (tuple, list)) and len(padding) == 4:
            raise not_supported(f"{call}(padding={tuple(padding)})",
                                "give padding as an int or (pad_h, pad_w)")
        self.padding = _pair(padding, call, "padding", minimum=0)
        self.pad_mode = _pad_mode(pad_mode, call)
        self.bias = bool(bias)
        act = activation.upper() if isinstance(activation, str) else activation
        if act not in ("NOTSET", "RELU"):
            raise ValueError(f"{call}: activation must be 'NOTSET' or 'RELU', got {activation!r}")
        self.activation = act
        ph, pw = self.padding
        mode = {"SAME_UPPER": "same", "VALID": "valid"}.get(self.pad_mode, "pad")
        pads = (ph, ph, pw, pw) if self.pad_mode == "NOTSET" else 0
        self.conv2d = ops.Conv2D(out_channel=self.nb_kernels, kernel_size=self.kernel_size,
                                 pad_mode=mode, pad=pads, stride=self.stride,
                                 dilation=self.dilation, group=self.group)
        self.relu = ops.ReLU() if act == "RELU" else None

    def initialize(self, x):
        call = "layer.Conv2d"
        _check_input(x, call, 4)
        channels = x.shape[1]
        if self.in_channels is not None and self.in_channels != channels:
            raise ValueError(f"{call}: declared {self.in_channels} input channels but the input "
                             f"has {channels} (shape {x.shape})")
        if channels % self.group or self.nb_kernels % self.group:
            raise ValueError(f"{call}: input channels ({channels}) and nb_kernels "
                             f"({self.nb_kernels}) must both divide by group ({self.group})")
        kh, kw = self.kernel_size
        fan_in = channels // self.group * kh * kw
        self.W = _gaussian_parameter((self.nb_kernels, channels // self.group, kh, kw),
                                     math.sqrt(2.0 / (fan_in + self.nb_kernels)), x)
        if self.bias:
            self.b = _zero_parameter((self.nb_kernels,), x)

    def forward(self, x):
        _check_input(x, "layer.Conv2d", 4)
        if self.pad_mode == "SAME_LOWER":
            self.conv2d.pads = (_same_lower(x.shape[2], self.kernel_size[0], self.stride[0],
                                            self.dilation[0])
                                + _same_lower(x.shape[3], self.kernel_size[1], self.stride[1],
                                              self.dilation[1]))
        y = self.conv2d(x, self.W, self.b) if self.bias else self.conv2d(x, self.W)
        return self.relu(y) if self.relu is not None else y


class Linear(Layer):
    """``Linear(out_features, *args, bias=True)``: ``y = x @ W + b`` with W ``(in, out)``.

    The input size is read from the first input ``(N, in)``. The older form
    ``Linear(in_features, out_features[, bias])`` is accepted; a declared ``in_features``
    that disagrees with the input is an error.
    """

    def __init__(self, out_features, *args, bias=True, **kwargs):
        call = "layer.Linear"
        if len(args) > 2:
            raise TypeError(f"{call}: at most (in_features, out_features, bias) positionally, "
                            f"got {1 + len(args)} arguments")
        if kwargs:
            raise TypeError(f"{call}: unexpected keyword arguments {sorted(kwargs)}")
        super().__init__()
        self.in_features = None
        if args:            # the older form: (in_features, out_features[, bias])
            self.in_features = _positive_int(out_features, call, "in_features")
            out_features = args[0]
            bias = args[1] if len(args) > 1 else bias
        self.out_features = _positive_int(out_features, call, "out_features")
        self.bias = bool(bias)
        self.matmul = ops.MatMul()
        self.bias_add = ops.Add()

    def initialize(self, x):
        call = "layer.Linear"
        _check_input(x, call, 2)
        n_in = x.shape[1]
        if self.in_features is not None and self.in_features != n_in:
            raise ValueError(f"{call}: declared in_features={self.in_features} but the input "
                             f"has {n_in} features (shape {x.shape})")
        self.in_features = n_in
        self.W = _gaussian_parameter((n_in, self.out_features),
                                     math.sqrt(2.0 / (n_in + self.out_features)), x)
        if self.bias:
            self.b = _zero_parameter((self.out_features,), x)

    def forward(self, x):
        _check_input(x, "layer.Linear", 2)
        if x.shape[1] != self.in_features:
            raise ValueError(f"layer.Linear: expected {self.in_features} input features (fixed "
                             f"at the first call), got shape {x.shape}")
        y = self.matmul(x, self.W)
        return self.bias_add(y, self.b) if self.bias else y


class Pooling2d(Layer):
    """``Pooling2d(kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET")``;
    ``stride`` defaults to ``kernel_size``. ``padding`` is an int or ``(pad_h, pad_w)``; it
    never wins a max, and an average leaves it out of the count (SINGA's CPU and cuDNN
    kernels exclude padding)."""

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET"):
        call = f"layer.{type(self).__name__}"
        super().__init__()
        self.kernel_size = _pair(kernel_size, call, "kernel_size")
        self.stride = self.kernel_size if stride is None else _pair(stride, call, "stride")
        self.padding = _pair(padding, call, "padding", minimum=0)
        # padding past half the kernel (SINGA accepts it) goes through pool_wide
        self.wide = _pool_wide.needs_wide(self.kernel_size, self.padding)
        if any(p >= k for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(f"{call}: padding {self.padding} must be smaller than the kernel "
                             f"size {self.kernel_size} (a window of padding only has no value)")
        self.pad_mode = _pad_mode(pad_mode, call)
        self.is_max = bool(is_max)
        prim = ops.MaxPool if self.is_max else ops.AvgPool
        mode = "same" if self.pad_mode == "SAME_UPPER" else "valid"
        self.pool = prim(kernel_size=self.kernel_size, strides=self.stride, pad_mode=mode)
        if not self.is_max:
            self.pool.count_include_pad = False
        if self.pad_mode == "NOTSET" and not self.wide:
            ph, pw = self.padding
            self.pool.pads = (ph, ph, pw, pw)

    def forward(self, x):
        _check_input(x, f"layer.{type(self).__name__}", 4)
        if self.wide and self.pad_mode == "NOTSET":
            return _pool_wide.pool(x, self.kernel_size, self.stride, self.padding, self.is_max,
                                   f"layer.{type(self).__name__}")
        if self.pad_mode == "SAME_LOWER":
            self.pool.pads = (_same_lower(x.shape[2], self.kernel_size[0], self.stride[0])
                              + _same_lower(x.shape[3], self.kernel_size[1], self.stride[1]))
        return self.pool(x)


class MaxPool2d(Pooling2d):
    """``MaxPool2d(kernel_size, stride=None, padding=0, pad_mode="NOTSET")``."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, True, pad_mode)


class AvgPool2d(Pooling2d):
    """``AvgPool2d(kernel_size, stride=None, padding=0, pad_mode="NOTSET")`` (padding 0)."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, False, pad_mode)


class ReLU(Layer):
    """``max(x, 0)``."""

    def __init__(self):
        super().__init__()
        self.relu = ops.ReLU()

    def forward(self, x):
        return self.relu(x)


class Flatten(Layer):
    """``Flatten(axis=1)``: ``(prod(shape[:axis]), prod(shape[axis:]))``."""

    def __init__(self, axis=1):
        super().__init__()
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"layer.Flatten: axis must be an int, got {axis!r}")
        self.axis = int(axis)
        self.reshape = ops.Reshape()

    def forward(self, x):
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        if not 0 <= axis <= x.ndim:
            raise ValueError(f"layer.Flatten: axis {self.axis} is out of range for an input of "
                             f"shape {x.shape}")
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return self.reshape(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))))


class Dropout(Layer):
    """``Dropout(ratio=0.5)``: while ``autograd.training`` (``model.train()``), zero each
    element with probability ``ratio`` and scale the rest by ``1 / (1 - ratio)``; the
    identity otherwise (and after ``set_train(False)``)."""

    def __init__(self, ratio=0.5):
        super().__init__()
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio < 1:
            raise ValueError(f"layer.Dropout: ratio must be in [0, 1), got {ratio!r}")
        self.ratio = float(ratio)

    def forward(self, x):
        return ops.dropout(x, self.ratio, training=self.training and flags.training())


class SoftMaxCrossEntropy(Layer):
    """``forward(x, t)``: the batch mean of ``-log softmax(x)[label]``, shape ``(1,)``.

    ``x`` is ``(B, C)`` logits. ``t`` holds B integer class indices (shape ``(B,)`` or
    ``(B, 1)``), or a ``(B, C)`` target whose rows are normalised by their sums (SINGA's
    one-hot form: ``tensor.Tensor((batch_size, num_classes), dev, tensor.int32)``).
    """

    def __init__(self):
        super().__init__()
        self.sparse_ce = ops.SparseSoftmaxCrossEntropyWithLogits("mean")
        self.dense_ce = ops.SoftmaxCrossEntropyWithLogits("mean")
        self.reshape = ops.Reshape()

    def forward(self, x, t):
        call = "layer.SoftMaxCrossEntropy"
        _check_input(x, call, 2)
        if not isinstance(t, CoreTensor):
            raise TypeError(f"{call}: the target must be a Tensor, got {type(t).__name__}")
        batch, classes = x.shape
        dev = x.device
        target = t.data if t.device is dev else dev.copy_from(t.data, t.device)
        if t.size == batch and t.ndim <= 2:
            # SINGA reads a float target's bytes as int labels, so its pages build label
            # tensors with the default float32 dtype: whole-number floats are labels here
            if target.dtype.kind not in "iu" and not bool((target == target.round()).all()):
                raise TypeError(f"{call}: class-index targets must be integers (tensor.int32 "
                                f"or whole numbers), got {target.dtype} with fractions")
            labels = target.reshape(batch).astype(np.int32, copy=False)
            loss = self._sparse(x, labels, call)
        elif tuple(t.shape) == (batch, classes):
            loss = self._dense(x, target, call)
        else:
            raise ValueError(f"{call}: the target must hold {batch} class indices or be "
                             f"({batch}, {classes}) like the logits, got shape {t.shape}")
        return self.reshape(loss, (1,))

    def _sparse(self, x, labels, call):
        try:
            return self.sparse_ce(x, CoreTensor._make(labels, x.device))
        except ValueError as err:      # a label out of range: say which SINGA call saw it
            raise ValueError(f"{call}: {err}") from None

    def _dense(self, x, target, call):
        xp = x.device.xp
        nonzero = target != 0
        if target.dtype.kind in "iub" and bool((nonzero.sum(axis=1) == 1).all()):
            # every row has one entry: normalised it is one-hot, i.e. class indices
            return self._sparse(x, xp.argmax(nonzero, axis=1).astype(np.int32), call)
        rows = target.astype(x.dtype).sum(axis=1, keepdims=True)
        # an all-zero row is "no target": it adds nothing to the loss or the gradient
        # (SINGA divides by its zero sum; its examples feed such rows to a warm-up
        # backward whose gradients they ignore)
        probs = target.astype(x.dtype) / xp.where(rows == 0, 1, rows)
        return self.dense_ce(x, CoreTensor._make(probs, x.device))
