"""More of SINGA's layers: BatchNorm2d, SeparableConv2d, Gemm, Add, Cat and the small ones.

They are ``layer.Layer``\\s like the others (``from minitorch_dist.singa import layer`` gives
them as ``layer.BatchNorm2d`` and so on), built from core primitives or from the facade's
autograd functions, with SINGA's arguments, parameter names and initialisation:

* ``BatchNorm2d(channels=None, momentum=0.9)``: parameters ``scale`` (ones) and ``bias``
  (zeros), states ``running_mean`` (zeros) and ``running_var`` (ones). While
  ``autograd.training`` the batch statistics normalise and
  ``running = (1 - momentum) * running + momentum * batch`` (SINGA's rule: ``momentum``
  weighs the new batch; unbiased variance); otherwise the running statistics do.
* ``SeparableConv2d(nb_kernels, kernel_size, stride=1, padding=0, bias=False)`` (also
  ``(in, out, kernel[, stride[, padding]])``): a depthwise ``Conv2d`` with
  ``group=in_channels`` (``depthwise_conv``), then a 1x1 ``Conv2d`` (``point_conv``).
* ``Gemm(nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True, bias=True,
  bias_shape=None)``: ``alpha * x' @ W' + beta * b`` with W ``(nb_kernels, in)`` when
  ``transB`` and b ``(1, nb_kernels)``.
* ``Add()(a, b)``, ``Cat(axis=0)(xs)``, ``Reshape()(x, shape)``, ``Sigmoid``, ``Tanh``,
  ``SoftMax``, and the losses ``MeanSquareError``, ``CrossEntropy``, ``BinaryCrossEntropy``.

>>> import numpy as np
>>> from minitorch_dist.singa import layer, tensor
>>> bn = layer.BatchNorm2d(3)
>>> y = bn(tensor.from_numpy(np.ones((2, 3, 4, 4), np.float32)))
>>> sorted(bn.get_states())
['bias', 'running_mean', 'running_var', 'scale']
"""
import math

import numpy as np

from .. import ops
from . import flags
from . import functional as F
from . import tensor as _tensor
from .layer_base import Layer, _check_input, _gaussian_parameter, _positive_int
from .layer_basic import Conv2d

__all__ = ["BatchNorm2d", "SeparableConv2d", "Gemm", "Add", "Cat", "Reshape", "Sigmoid",
           "Tanh", "SoftMax", "MeanSquareError", "CrossEntropy", "BinaryCrossEntropy"]


class BatchNorm2d(Layer):
    """``BatchNorm2d(channels=None, momentum=0.9)`` over NCHW input (see the module doc)."""

    def __init__(self, *args, momentum=0.9):
        super().__init__()
        call = "layer.BatchNorm2d"
        if len(args) > 2:
            raise TypeError(f"{call}: at most (channels, momentum) positionally, got "
                            f"{len(args)} arguments")
        self.channels = _positive_int(args[0], call, "channels") if args else None
        if len(args) > 1:
            momentum = args[1]
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) \
                or not 0 <= momentum <= 1:
            raise ValueError(f"{call}: momentum must be in [0, 1], got {momentum!r}")
        self.momentum = float(momentum)
        self.bn_train = ops.BatchNorm(is_training=True, momentum=self.momentum, epsilon=1e-5)
        self.bn_eval = ops.BatchNorm(is_training=False, momentum=self.momentum, epsilon=1e-5)

    def initialize(self, x):
        call = "layer.BatchNorm2d"
        _check_input(x, call, 4)
        if self.channels is not None and self.channels != x.shape[1]:
            raise ValueError(f"{call}: declared {self.channels} channels but the input has "
                             f"{x.shape[1]} (shape {x.shape})")
        self.channels = x.shape[1]
        shape = (self.channels,)
        self.scale = _tensor.Parameter.create(np.ones(shape, x.dtype), x.device)
        self.bias = _tensor.Parameter.create(np.zeros(shape, x.dtype), x.device)
        self.register_buffer("running_mean", _tensor.Tensor(shape, x.device, x.dtype))
        self.register_buffer("running_var",
                             _tensor.Tensor(shape, x.device, x.dtype).set_value(1.0))

    def forward(self, x):
        _check_input(x, "layer.BatchNorm2d", 4)
        if x.shape[1] != self.channels:
            raise ValueError(f"layer.BatchNorm2d: expected {self.channels} channels (fixed at "
                             f"the first call), got shape {x.shape}")
        bn = self.bn_train if self.training and flags.training() else self.bn_eval
        return bn(x, self.scale, self.bias, self.running_mean, self.running_var)


class SeparableConv2d(Layer):
    """``SeparableConv2d(nb_kernels, kernel_size, stride=1, padding=0, bias=False)``: a
    depthwise convolution then a pointwise (1x1) one (see the module doc)."""

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, bias=False):
        super().__init__()
        call = "layer.SeparableConv2d"
        if len(args) > 3:
            raise TypeError(f"{call}: at most (in_channels, out_channels, kernel_size, "
                            f"stride, padding) positionally")
        self.in_channels = None
        if args:            # the older form: (in_channels, out_channels, kernel_size, ...)
            self.in_channels = _positive_int(nb_kernels, call, "in_channels")
            nb_kernels, kernel_size = kernel_size, args[0]
            stride = args[1] if len(args) > 1 else stride
            padding = args[2] if len(args) > 2 else padding
        self.nb_kernels = _positive_int(nb_kernels, call, "nb_kernels")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.bias = bool(bias)
        Conv2d(1, kernel_size, stride=stride, padding=padding)     # checks the arguments now

    def initialize(self, x):
        call = "layer.SeparableConv2d"
        _check_input(x, call, 4)
        channels = x.shape[1]
        if self.in_channels is not None and self.in_channels != channels:
            raise ValueError(f"{call}: declared {self.in_channels} input channels but the input "
                             f"has {channels} (shape {x.shape})")
        self.in_channels = channels
        self.depthwise_conv = Conv2d(channels, self.kernel_size, stride=self.stride,
                                     padding=self.padding, group=channels, bias=self.bias)
        self.point_conv = Conv2d(self.nb_kernels, 1, bias=self.bias)

    def forward(self, x):
        return self.point_conv(self.depthwise_conv(x))


class Gemm(Layer):
    """``Gemm(nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True, bias=True,
    bias_shape=None)``: ``alpha * x' @ W' + beta * b`` (see the module doc)."""

    def __init__(self, nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True, bias=True,
                 bias_shape=None):
        super().__init__()
        call = "layer.Gemm"
        self.nb_kernels = _positive_int(nb_kernels, call, "nb_kernels")
        for name, value in (("alpha", alpha), ("beta", beta)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{call}: {name} must be a number, got {value!r}")
        self.alpha, self.beta = float(alpha), float(beta)
        self.transA, self.transB = int(bool(transA)), int(bool(transB))
        self.bias = bool(bias)
        self.bias_shape = tuple(bias_shape) if bias_shape else None

    def initialize(self, x):
        call = "layer.Gemm"
        _check_input(x, call, 2)
        self.in_features = x.shape[0] if self.transA else x.shape[-1]
        n_in, n_out = self.in_features, self.nb_kernels
        shape = (n_out, n_in) if self.transB else (n_in, n_out)
        self.W = _gaussian_parameter(shape, math.sqrt(2.0 / (n_in + n_out)), x)
        if self.bias:
            b_shape = self.bias_shape or (1, n_out)
            self.b = _tensor.Parameter.create(np.zeros(b_shape, x.dtype), x.device)

    def forward(self, x):
        n_in = x.shape[0] if self.transA else x.shape[-1]
        if n_in != self.in_features:
            raise ValueError(f"layer.Gemm: expected {self.in_features} input features (fixed "
                             f"at the first call), got shape {x.shape}")
        return F.gemm(x, self.W, self.b if self.bias else None, self.alpha, self.beta,
                      self.transA, self.transB)


class Add(Layer):
    """``Add()(a, b)``: ``a + b`` with broadcasting."""

    def __init__(self):
        super().__init__()
        self.add = ops.Add()

    def forward(self, a, b):
        return self.add(a, b)


class Cat(Layer):
    """``Cat(axis=0)(xs)``: the list ``xs`` joined along ``axis``."""

    def __init__(self, axis=0):
        super().__init__()
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"layer.Cat: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def forward(self, xs):
        return F.cat(xs, self.axis)


class Reshape(Layer):
    """``Reshape()(x, shape)``."""

    def forward(self, x, shape):
        return F.reshape(x, shape)


class Sigmoid(Layer):
    """``Sigmoid()(x)``."""

    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Layer):
    """``Tanh()(x)``."""

    def forward(self, x):
        return F.tanh(x)


class SoftMax(Layer):
    """``SoftMax()(x)``: softmax over axis 1."""

    def forward(self, x):
        return F.softmax(x, 1)


class MeanSquareError(Layer):
    """``MeanSquareError()(x, t)``: ``autograd.mse_loss``."""

    def forward(self, x, t):
        return F.mse_loss(x, t)


class CrossEntropy(Layer):
    """``CrossEntropy()(x, t)``: ``autograd.cross_entropy`` (``x`` are probabilities)."""

    def forward(self, x, t):
        return F.cross_entropy(x, t)


class BinaryCrossEntropy(Layer):
    """``BinaryCrossEntropy()(x, t)``: ``autograd.binary_cross_entropy``."""

    def forward(self, x, t):
        return F.binary_cross_entropy(x, t)
