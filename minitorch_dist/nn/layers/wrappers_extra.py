"""More wrapper cells: ``nn.ForwardValueAndGrad``, ``nn.WithGradCell`` and
``nn.TimeDistributed``.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> net = nn.Dense(3, 2)
>>> loss, grads = nn.ForwardValueAndGrad(nn.WithLossCell(net, nn.MSELoss()), get_by_list=True,
...                                      weights=net.trainable_params())(
...     ms.Tensor(np.ones((4, 3), np.float32)), ms.Tensor(np.zeros((4, 2), np.float32)))
>>> [g.shape for g in grads]
[(2, 3), (2,)]
"""
from ... import ops
from ...gradients import value_and_grad
from ..cell import Cell

__all__ = ["ForwardValueAndGrad", "WithGradCell", "TimeDistributed"]


class ForwardValueAndGrad(Cell):
    """``(outputs, gradients)`` of ``network``: for the inputs (``get_all``), the ``weights``
    (``get_by_list``), or both."""

    def __init__(self, network, weights=None, get_all=False, get_by_list=False, sens_param=False):
        super().__init__(auto_prefix=False)   # a wrapper renames nothing
        if sens_param:
            raise ValueError("nn.ForwardValueAndGrad: sens_param=True is not supported here")
        if get_by_list and weights is None:
            raise ValueError("nn.ForwardValueAndGrad: get_by_list=True needs weights")
        self.network = network
        self.get_all, self.get_by_list = get_all, get_by_list
        self.weights = list(weights) if weights is not None else None

    def construct(self, *inputs):
        positions = tuple(range(len(inputs))) if self.get_all else (None if self.get_by_list else 0)
        fn = value_and_grad(self.network, positions, self.weights if self.get_by_list else None)
        return fn(*inputs)


class WithGradCell(Cell):
    """The gradients of ``loss_fn(network(data), label)`` for the network's weights."""

    def __init__(self, network, loss_fn=None, sens=None):
        super().__init__(auto_prefix=False)   # a wrapper renames nothing
        if sens is not None:
            raise ValueError("nn.WithGradCell: sens is not supported here")
        self.network, self.loss_fn = network, loss_fn
        self.weights = network.trainable_params()

    def construct(self, *inputs):
        def loss(*xs):
            if self.loss_fn is None:
                return self.network(*xs)
            return self.loss_fn(self.network(*xs[:-1]), xs[-1])
        return value_and_grad(loss, None, self.weights)(*inputs)[1]


class TimeDistributed(Cell):
    """Apply ``layer`` to every time step: (N, T, ...) is folded to (N*T, ...) and back."""

    def __init__(self, layer, time_axis, reshape_with_axis=None):
        super().__init__(auto_prefix=False)   # a wrapper renames nothing
        self.layer, self.time_axis = layer, time_axis

    def construct(self, x):
        axis = self.time_axis % x.ndim
        moved = ops.moveaxis(x, axis, 1) if axis != 1 else x
        n, t = moved.shape[:2]
        out = self.layer(moved.reshape((n * t,) + moved.shape[2:]))
        out = out.reshape((n, t) + out.shape[1:])
        return ops.moveaxis(out, 1, axis) if axis != 1 else out
