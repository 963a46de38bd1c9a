"""Proximal Adagrad (forward-backward splitting) with MindSpore's ``nn.ProximalAdagrad`` API.

Dense gradients run MindSpore's ``ApplyProximalAdagrad`` with the array module of the device
doing the update; ``RowTensor`` gradients update only the rows they name, through the fused
C++ kernel on the host (``target="CPU"``) or the array module on a device.
"""
import numpy as np  # host scalars only (the dtype's smallest normal number)

from ...row_tensor import RowTensor
from .optimizer import (Optimizer, effective_gradient, host_kernel, update_rows, non_negative,
                        row_gradient)

__all__ = ["ProximalAdagrad"]


class ProximalAdagrad(Optimizer):
    """Proximal Adagrad, as MindSpore's ``nn.ProximalAdagrad`` (``ApplyProximalAdagrad`` /
    ``SparseApplyProximalAdagrad``).

    With ``g = grad / loss_scale + weight_decay * w`` and ``lr`` the step's learning rate::

        accum += g * g
        prox   = w - lr * g / sqrt(accum)
        w      = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr * l2)

    An element whose accumulator and gradient are both zero keeps ``prox = w`` (the square
    root is floored at the dtype's smallest normal number, which changes nothing else).
    A dense gradient updates every element. A ``RowTensor`` gradient first sums its duplicate
    ids, then updates only those rows of ``w`` and ``accum``; other rows stay bit-for-bit as
    they were. With ``target="CPU"`` (or parameters on the host) that update is the fused,
    multithreaded C++ kernel ``kernels.proximal_adagrad``, in place; on a device it runs with
    the device's array module.

    State (where the update runs): ``accum.<param name>``, filled with ``accum``. Learning-rate
    schedules, per-step lists and parameter groups work as for every optimizer.
    ``use_locking`` is accepted for compatibility and has no effect.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor(np.array([1.0, -1.0], np.float32)), name="w")
    >>> opt = nn.ProximalAdagrad([w], accum=0.0, learning_rate=0.5, l1=0.2)
    >>> _ = opt((ms.Tensor(np.array([2.0, 2.0], np.float32)),))
    >>> [round(float(x), 4) for x in w.asnumpy()]      # prox = w - 0.5 * sign(g); then shrink by 0.1
    [0.4, -1.4]
    """

    supports_sparse = True

    def __init__(self, params, accum=0.1, learning_rate=0.001, l1=0.0, l2=0.0,
                 use_locking=False, loss_scale=1.0, weight_decay=0.0):
        owner = type(self).__name__
        accum = non_negative(owner, "accum", accum)
        l1 = non_negative(owner, "l1", l1)
        l2 = non_negative(owner, "l2", l2)
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.initial_accum, self.l1, self.l2 = accum, l1, l2
        self.use_locking = bool(use_locking)
        for state in self._add_slots("accum"):
            state.data[...] = accum

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        accum = self._slot("accum", i, device)
        xp = device.xp
        if isinstance(grad, RowTensor):
            ids, values = row_gradient(grad, param, self._inv_scale)
            kernel = host_kernel(device, param, "proximal_adagrad")
            if kernel is not None:   # fused, multithreaded: merges duplicates, updates in place
                kernel(param, accum, ids, values, lr, self.l1, self.l2, weight_decay)
                return
            update_rows(xp, param, (accum,), ids, values, weight_decay,
                        lambda w, acc, g: proximal_adagrad_update(
                            xp, w, acc[0], g, lr, self.l1, self.l2,
                            [xp.empty_like(w) for _ in range(3)]))
            return
        buf, tmp, tmp2 = self._scratch(i, device, param, 3)
        g = effective_gradient(xp, param, grad, buf, tmp, weight_decay, self._inv_scale)
        proximal_adagrad_update(xp, param, accum, g, lr, self.l1, self.l2, (buf, tmp, tmp2))

    def extra_repr(self):
        return f"{super().extra_repr()}, accum={self.initial_accum}, l1={self.l1}, l2={self.l2}"


def proximal_adagrad_update(xp, w, accum, g, lr, l1, l2, scratch):
    """Proximal Adagrad on whole arrays, in place, in the order of the C++ kernel.

    ``scratch`` is three arrays shaped like ``w``; ``g`` may be the first of them.
    """
    _, root, step = scratch
    xp.multiply(g, g, out=step)
    accum += step
    xp.sqrt(accum, out=root)
    xp.maximum(root, float(np.finfo(w.dtype).tiny), out=root)
    xp.multiply(g, lr, out=step)
    step /= root
    w -= step                                   # w holds prox from here on
    xp.abs(w, out=root)
    root -= lr * l1
    xp.maximum(root, 0.0, out=root)
    xp.copysign(root, w, out=w)
    w /= 1.0 + lr * l2
