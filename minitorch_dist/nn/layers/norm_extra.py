"""More normalisation layers: ``nn.LayerNorm`` (over the ``LayerNorm`` primitive),
``nn.GroupNorm``, ``nn.InstanceNorm1d/2d/3d`` and ``nn.BatchNorm3d`` (compositions with the
gradients of their parts). ``nn.SyncBatchNorm`` is refused: its statistics are synchronised
across devices, which a single cell here does not do; use ``nn.BatchNorm2d``.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> y = nn.LayerNorm((3,))(ms.Tensor(np.array([[1.0, 2.0, 3.0]], np.float32)))
>>> [round(v, 3) for v in y.asnumpy()[0].tolist()]
[-1.225, 0.0, 1.225]
"""
from ... import ops
from ...common.initializer import initializer
from ..cell import Cell
from ..parameter import Parameter
from .normalization import BatchNorm2d

__all__ = ["LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
           "BatchNorm3d", "SyncBatchNorm"]


class LayerNorm(Cell):
    """``LayerNorm(normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
    beta_init="zeros", epsilon=1e-7)``."""

    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
                 beta_init="zeros", epsilon=1e-7, dtype=None):
        super().__init__()
        if not isinstance(normalized_shape, (tuple, list)):
            raise TypeError(f"nn.LayerNorm: normalized_shape must be a tuple or list, got {normalized_shape!r}")
        shape = [int(n) for n in normalized_shape]
        self.gamma = Parameter(initializer(gamma_init, shape), name="gamma")
        self.beta = Parameter(initializer(beta_init, shape), name="beta")
        self.layer_norm = ops.LayerNorm(begin_norm_axis, begin_params_axis, epsilon)

    def construct(self, x):
        return self.layer_norm(x, self.gamma, self.beta)[0]


def _normalized(x, axes, eps):
    mean = ops.mean(x, axes, True)
    centred = x - mean
    var = ops.mean(centred * centred, axes, True)
    return centred * ops.rsqrt(var + eps)


class GroupNorm(Cell):
    """``GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)``."""

    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"nn.GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.gamma = Parameter(initializer(gamma_init, [num_channels]), name="gamma", requires_grad=affine)
        self.beta = Parameter(initializer(beta_init, [num_channels]), name="beta", requires_grad=affine)

    def construct(self, x):
        n, c = x.shape[:2]
        grouped = x.reshape((n, self.num_groups, -1))
        out = _normalized(grouped, (2,), self.eps).reshape(x.shape)
        shape = (1, c) + (1,) * (x.ndim - 2)
        return out * self.gamma.reshape(shape) + self.beta.reshape(shape)


class _InstanceNorm(Cell):
    rank = 4

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=None):
        super().__init__()
        self.num_features, self.eps = num_features, eps
        self.gamma = Parameter(initializer(gamma_init, [num_features]), name="gamma", requires_grad=affine)
        self.beta = Parameter(initializer(beta_init, [num_features]), name="beta", requires_grad=affine)

    def construct(self, x):
        if x.ndim != self.rank or x.shape[1] != self.num_features:
            raise ValueError(f"nn.{type(self).__name__} expected a {self.rank}-D input with "
                             f"{self.num_features} channels, got shape {tuple(x.shape)}")
        out = _normalized(x, tuple(range(2, x.ndim)), self.eps)
        shape = (1, self.num_features) + (1,) * (x.ndim - 2)
        return out * self.gamma.reshape(shape) + self.beta.reshape(shape)


class InstanceNorm1d(_InstanceNorm):
    rank = 3


class InstanceNorm2d(_InstanceNorm):
    rank = 4


class InstanceNorm3d(_InstanceNorm):
    rank = 5


class BatchNorm3d(BatchNorm2d):
    """Batch norm of a 5-D input (N, C, D, H, W): the depth folds into the height."""

    ranks = (5,)

    def construct(self, x):
        self._check_input(x)
        n, c, d, h, w = x.shape
        return self._normalize(x.reshape((n, c, d * h, w))).reshape(x.shape)


class SyncBatchNorm(Cell):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("nn.SyncBatchNorm is not implemented in minitorch_dist: its "
                                  "statistics are synchronised across devices; use nn.BatchNorm2d "
                                  "(per-rank statistics, as data parallel runs them here)")
