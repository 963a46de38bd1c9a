"""FTRL-proximal (McMahan et al., 2013) with MindSpore's ``nn.FTRL`` signature and state.

Dense gradients run MindSpore's ``ApplyFtrl`` on the whole parameter with the array module of
the device doing the update; ``RowTensor`` gradients update only the rows they name, through
the fused C++ kernel on the host (``target="CPU"``) or the array module on a device.
"""
from ...row_tensor import RowTensor
from .optimizer import (Optimizer, _as_float, effective_gradient, host_kernel, update_rows,
                        non_negative, row_gradient)

__all__ = ["FTRL"]


class FTRL(Optimizer):
    """FTRL-proximal, as MindSpore's ``nn.FTRL`` (``ApplyFtrl`` / ``FusedSparseFtrl``).

    With ``g = grad / loss_scale + weight_decay * w`` and ``p = lr_power``, per element::

        moments_new = moments + g * g
        linear     += g - (moments_new**-p - moments**-p) / learning_rate * w
        w           = (sign(linear) * l1 - linear) / (moments_new**-p / learning_rate + 2 * l2)
                      if |linear| > l1, else 0
        moments     = moments_new

    A dense gradient updates every element. A ``RowTensor`` gradient first sums its duplicate
    ids, then updates only those rows of ``w``, ``moments`` and ``linear`` (weight decay
    applies once per distinct row); all other rows stay bit-for-bit as they were. With
    ``target="CPU"`` (or parameters on the host) that update is the fused, multithreaded C++
    kernel ``kernels.ftrl``, in place on the host table; on a device it runs with the device's
    array module.

    State (where the update runs): ``moments.<param name>``, filled with ``initial_accum``,
    and ``linear.<param name>``, zeros. As in MindSpore, ``learning_rate`` must be one float
    (no schedule, list or per-group ``lr``); groups may set ``weight_decay``. ``use_locking``
    is accepted for compatibility and has no effect.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor(np.zeros((3, 1), np.float32)), name="w")
    >>> opt = nn.FTRL([w], initial_accum=1.0, learning_rate=0.5)
    >>> _ = opt((ms.RowTensor(ms.Tensor([0]), ms.Tensor([[1.0]]), (3, 1)),))
    >>> [round(float(x), 4) for x in w.asnumpy().ravel()]    # -linear / (sqrt(2) / 0.5) on row 0 only
    [-0.3536, 0.0, 0.0]
    >>> [name for name, _ in opt.parameters_and_names()]
    ['global_step', 'moments.w', 'linear.w']
    """

    supports_sparse = True

    def __init__(self, params, initial_accum=0.1, learning_rate=0.001, lr_power=-0.5, l1=0.0,
                 l2=0.0, use_locking=False, loss_scale=1.0, weight_decay=0.0):
        owner = type(self).__name__
        initial_accum = non_negative(owner, "initial_accum", initial_accum)
        l1 = non_negative(owner, "l1", l1)
        l2 = non_negative(owner, "l2", l2)
        lr_power = _as_float(owner, "lr_power", lr_power)
        if not lr_power <= 0:
            raise ValueError(f"{owner}: lr_power must be <= 0, got {lr_power!r}")
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if self.dynamic_lr or self.is_group_lr:
            raise ValueError(f"{owner}: learning_rate must be one float; dynamic (list or "
                             "schedule) and per-group learning rates are not supported, "
                             "as in MindSpore's FTRL")
        if not self._group_lrs[0] > 0:
            raise ValueError(f"{owner}: learning_rate must be > 0, got {self._group_lrs[0]!r}")
        self.initial_accum, self.lr_power, self.l1, self.l2 = initial_accum, lr_power, l1, l2
        self.use_locking = bool(use_locking)
        for state in self._add_slots("moments"):
            state.data[...] = initial_accum
        self._add_slots("linear")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        accum = self._slot("moments", i, device)
        linear = self._slot("linear", i, device)
        if isinstance(grad, RowTensor):
            self._apply_rows(param, accum, linear, grad, lr, weight_decay, device)
            return
        xp = device.xp
        buf, tmp, tmp2 = self._scratch(i, device, param, 3)
        g = effective_gradient(xp, param, grad, buf, tmp, weight_decay, self._inv_scale)
        ftrl_update(xp, param, accum, linear, g, lr, self.l1, self.l2, self.lr_power,
                    (buf, tmp, tmp2))

    def _apply_rows(self, param, accum, linear, grad, lr, weight_decay, device):
        ids, values = row_gradient(grad, param, self._inv_scale)
        kernel = host_kernel(device, param, "ftrl")
        if kernel is not None:   # fused, multithreaded: merges duplicates and updates in place
            kernel(param, accum, linear, ids, values, lr, self.l1, self.l2, self.lr_power,
                   weight_decay)
            return
        xp = device.xp

        def ftrl_rows(w, states, g):
            ftrl_update(xp, w, states[0], states[1], g, lr, self.l1, self.l2, self.lr_power,
                        [xp.empty_like(w) for _ in range(3)])
        update_rows(xp, param, (accum, linear), ids, values, weight_decay, ftrl_rows)

    def extra_repr(self):
        return (f"{super().extra_repr()}, initial_accum={self.initial_accum}, "
                f"lr_power={self.lr_power}, l1={self.l1}, l2={self.l2}")


def ftrl_update(xp, w, accum, linear, g, lr, l1, l2, lr_power, scratch):
    """FTRL-proximal on whole arrays, in place, in the order of the C++ ``ftrl`` kernel.

    ``scratch`` is three arrays shaped like ``w``; ``g`` may be the first of them.
    """
    buf, acc_new, quadratic = scratch
    xp.multiply(g, g, out=acc_new)
    acc_new += accum
    _power(xp, acc_new, lr_power, quadratic)              # moments_new ** -p
    _power(xp, accum, lr_power, accum)                     # moments ** -p (accum is scratch now)
    xp.subtract(quadratic, accum, out=accum)
    accum /= lr
    accum *= w                                             # sigma * w
    xp.subtract(g, accum, out=accum)
    linear += accum                                        # linear is z from here on
    xp.copyto(accum, acc_new)
    quadratic /= lr
    quadratic += 2.0 * l2
    xp.abs(linear, out=acc_new)
    inactive = acc_new <= l1
    xp.copysign(l1, linear, out=buf)
    buf -= linear
    xp.copyto(buf, 0.0, where=inactive)                    # numerator 0 and denominator 1:
    xp.copyto(quadratic, 1.0, where=inactive)              # w = 0 with no division by zero
    xp.divide(buf, quadratic, out=w)


def _power(xp, a, lr_power, out):
    if lr_power == -0.5:
        xp.sqrt(a, out=out)
    else:
        xp.power(a, -lr_power, out=out)

