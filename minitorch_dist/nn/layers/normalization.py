"""Batch normalization cells: BatchNorm2d over (N, C, H, W) and BatchNorm1d over (N, C).

MindSpore's momentum convention: ``moving = momentum * moving + (1 - momentum) * batch``,
so the default ``momentum=0.9`` is PyTorch's 0.1. The primitive takes the PyTorch
convention (the weight of the new batch), so the cell hands it ``1 - momentum``.
"""
from ... import ops
from ...backend import dtypes
from ...common.initializer import initializer
from ..cell import Cell
from ..parameter import Parameter
from .basic import positive_int
from .logical_shape import logical_shape

__all__ = ["BatchNorm2d", "BatchNorm1d"]


class _BatchNorm(Cell):
    """Shared parameters and mode switch; subclasses say which input ranks they take."""

    ranks = (4,)

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, data_format="NCHW", dtype=dtypes.float32):
        super().__init__()
        layer = type(self).__name__
        self.num_features = positive_int(num_features, layer, "num_features")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps <= 0:
            raise ValueError(f"{layer}: eps must be a positive number, got {eps!r}")
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
            raise ValueError(f"{layer}: momentum must be in [0, 1] (MindSpore's convention: the weight "
                             f"of the old moving statistics), got {momentum!r}")
        if use_batch_statistics not in (None, True, False):
            raise ValueError(f"{layer}: use_batch_statistics must be None, True or False, "
                             f"got {use_batch_statistics!r}")
        if data_format != "NCHW":
            raise ValueError(f"{layer}: only data_format='NCHW' is supported, got {data_format!r}")
        self.eps = float(eps)
        self.momentum = float(momentum)
        self.affine = bool(affine)
        self.use_batch_statistics = use_batch_statistics
        shape = [self.num_features]
        self.gamma = Parameter(initializer(gamma_init, shape, dtype), requires_grad=self.affine)
        self.beta = Parameter(initializer(beta_init, shape, dtype), requires_grad=self.affine)
        self.moving_mean = Parameter(initializer(moving_mean_init, shape, dtype), requires_grad=False)
        self.moving_variance = Parameter(initializer(moving_var_init, shape, dtype), requires_grad=False)
        self.bn_train = ops.BatchNorm(is_training=True, epsilon=self.eps, momentum=1.0 - self.momentum)
        self.bn_infer = ops.BatchNorm(is_training=False, epsilon=self.eps, momentum=1.0 - self.momentum)

    def _check_input(self, x):
        shape = logical_shape(x)      # whole, also on a rank's slice in a sharded run
        if len(shape) not in self.ranks or shape[1] != self.num_features:
            ranks = " or ".join(f"{r}-D" for r in self.ranks)
            raise ValueError(f"{type(self).__name__} expected {ranks} input with {self.num_features} "
                             f"channels on axis 1, got shape {shape}")

    def _normalize(self, x):
        use_batch = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        bn = self.bn_train if use_batch else self.bn_infer
        out = bn(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)
        return out[0] if isinstance(out, tuple) else out

    def construct(self, x):
        self._check_input(x)
        return self._normalize(x)

    def extra_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, use_batch_statistics={self.use_batch_statistics}")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over the N, H, W axes of NCHW input, per channel.

    In training mode (``set_train(True)``) it normalizes with the batch's statistics and
    updates ``moving_mean``/``moving_variance`` (Parameters without gradient); in eval
    mode it uses the moving statistics. ``use_batch_statistics=True``/``False`` forces one.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> bn = nn.BatchNorm2d(2)
    >>> y = bn(ms.Tensor(np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2)))
    >>> [round(v, 4) for v in y.asnumpy().mean(axis=(0, 2, 3)).tolist()]
    [0.0, 0.0]
    >>> [p.name for p in bn.get_parameters()]
    ['gamma', 'beta', 'moving_mean', 'moving_variance']
    """


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input, per channel (see BatchNorm2d)."""

    ranks = (2, 3)
