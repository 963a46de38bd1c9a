"""Momentum: MindSpore's heavy-ball optimizer (``nn.Momentum``)."""
from .optimizer import Optimizer, non_negative
from .sgd import check_momentum, fused_sgd, heavy_ball_step

__all__ = ["Momentum"]


class Momentum(Optimizer):
    """Heavy-ball momentum, MindSpore's ``nn.Momentum``.

    With ``g = grad / loss_scale + weight_decay * p``::

        v  = momentum * v + g
        p -= lr * v                     (p -= lr * (g + momentum * v) with use_nesterov)

    The buffers ``v`` are the state Parameters ``moments.<param name>``. This equals
    ``torch.optim.SGD`` with the same momentum and no dampening. ``RowTensor`` gradients
    are made dense.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor([1.0]), name="w")
    >>> opt = nn.Momentum([w], learning_rate=0.1, momentum=0.5)
    >>> for _ in range(2):
    ...     _ = opt((ms.Tensor([1.0]),))
    >>> round(float(w.asnumpy()[0]), 4), opt.moments[0].asnumpy().tolist()
    (0.75, [1.5])
    """

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
                 use_nesterov=False):
        momentum = non_negative("Momentum", "momentum", momentum)
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum = momentum
        self.use_nesterov = bool(use_nesterov)
        self._add_slots("moments")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        (tmp,) = self._scratch(i, device, param, 1)
        heavy_ball_step(device.xp, param, grad, self._slot("moments", i, device), tmp, lr,
                        self.momentum, 0.0, weight_decay, self._inv_scale, self.use_nesterov)

    def _fused_update(self, params, grads, states, lr, weight_decay, step):
        """``_apply_one`` for many dense host arrays in one C++ call (nn/optim/fused.py)."""
        check_momentum("Momentum", self.momentum)
        fused_sgd(params, grads, states[0], lr, self.momentum, 0.0, weight_decay,
                  self._inv_scale, self.use_nesterov, False)

    def extra_repr(self):
        return f"{super().extra_repr()}, momentum={self.momentum}, use_nesterov={self.use_nesterov}"


Momentum._fused_owner = Momentum
