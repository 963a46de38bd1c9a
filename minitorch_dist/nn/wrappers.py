"""Training wrappers: a network plus its loss (WithLossCell), one optimisation step
(TrainOneStepCell), and evaluation (WithEvalCell).

Wrappers do not add a name scope: the primitives and parameters of the network they wrap
keep the names they have inside that network ("fc1.weight", not "_backbone.fc1.weight"),
as MindSpore's ``auto_prefix=False`` wrappers do, so optimizer state and checkpoints match
whether they were built from the network or from its wrapper.
"""
from ..extension import extension
from ..gradients import value_and_grad
from ..row_tensor import RowTensor
from .cell import Cell

__all__ = ["WithLossCell", "TrainOneStepCell", "WithEvalCell"]


class _WrapperCell(Cell):
    """A cell whose children are named as if they were used on their own."""

    _name_scope = False


class WithLossCell(_WrapperCell):
    """``loss_fn(backbone(data), label)``: the network with its loss, ready for training.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> net = nn.WithLossCell(nn.Dense(2, 1, weight_init="ones", bias_init="zeros"), nn.MSELoss())
    >>> float(net(ms.Tensor([[1.0, 2.0]]), ms.Tensor([[1.0]])).asnumpy())
    4.0
    >>> [p.name for p in net.trainable_params()]
    ['weight', 'bias']
    """

    def __init__(self, backbone, loss_fn):
        super().__init__()
        if not callable(backbone) or not callable(loss_fn):
            raise TypeError("WithLossCell(backbone, loss_fn) needs a network and a loss, both callable")
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        """The wrapped network (without the loss)."""
        return self._backbone


class WithEvalCell(_WrapperCell):
    """Evaluation: returns ``(loss, outputs, label)`` for metrics such as accuracy.

    ``add_cast_fp32=True`` casts outputs and labels to float32 before the loss.
    """

    def __init__(self, network, loss_fn, add_cast_fp32=False):
        super().__init__()
        self._network = network
        self._loss_fn = loss_fn
        self.add_cast_fp32 = bool(add_cast_fp32)

    def construct(self, data, label):
        outputs = self._network(data)
        if self.add_cast_fp32:
            from .. import float32, ops
            label = ops.cast(label, float32)
            outputs = ops.cast(outputs, float32)
        return self._loss_fn(outputs, label), outputs, label


def _identity(grads):
    return grads


def _scaled(grad, factor):
    if isinstance(grad, RowTensor):
        return RowTensor(grad.indices, grad.values * factor, grad.dense_shape)
    return grad * factor


class TrainOneStepCell(_WrapperCell):
    """One training step: loss and gradients of ``network`` (a cell that returns the loss,
    e.g. a ``WithLossCell``) with respect to ``optimizer.parameters``, the gradients through
    ``grad_reducer``, then ``optimizer(grads)``; returns the loss.

    ``sens`` scales the gradients (the seed of backpropagation, as in MindSpore). With
    ``return_grad=True`` the step returns ``(loss, grads)``.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> net = nn.WithLossCell(nn.Dense(2, 1), nn.MSELoss())
    >>> step = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), 0.1))
    >>> x, y = ms.Tensor(np.ones((4, 2), np.float32)), ms.Tensor(np.zeros((4, 1), np.float32))
    >>> first = float(step(x, y).asnumpy())
    >>> bool(float(step(x, y).asnumpy()) < first)
    True
    """

    # A training step, not a network: parallel executors run the network it differentiates
    # (operator sharding), never the step itself with its optimizer update.
    _runs_training_step = True

    def __init__(self, network, optimizer, sens=1.0, return_grad=False):
        super().__init__()
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        self.sens = 1.0 if sens is None else float(sens)
        self.return_grad = bool(return_grad)
        self.grad_fn = value_and_grad(self.network, None, self.weights)
        self.grad_reducer = self._make_grad_reducer()

    def _make_grad_reducer(self):
        """The gradient reduction between computing gradients and applying them: the
        identity in one process; data parallel (``parallel_mode=DATA_PARALLEL`` over more
        than one rank) puts ``nn.DistributedGradReducer(self.weights)`` here, which averages
        over the ranks when ``gradients_mean`` (and broadcasts rank 0's values first with
        ``parameter_broadcast=True``)."""
        reducer = extension().train_step_reducer(self.weights, self.network)
        return _identity if reducer is None else reducer

    def construct(self, *inputs):
        loss, grads = self.grad_fn(*inputs)
        if self.sens != 1.0:
            grads = tuple(_scaled(g, self.sens) for g in grads)
        grads = self.grad_reducer(grads)
        self.optimizer(grads)
        return (loss, grads) if self.return_grad else loss
