"""Adam (L2 weight decay) and AdamWeightDecay / AdamW (decoupled weight decay).

Both follow PyTorch's formulas (bias-corrected moments, ``eps`` added after the bias
correction of the second moment) and update in place on two reused scratch arrays.
``Adam(use_lazy=True)`` (and ``LazyAdam``) instead follows MindSpore's fused Adam kernel and
applies a ``RowTensor`` gradient to its rows only.
"""
import math

import numpy as np  # host scalars only (beta1_power / beta2_power)

from ...row_tensor import RowTensor
from ..parameter import Parameter
from .fused import native_kernels
from .optimizer import (Optimizer, effective_gradient, host_kernel, update_rows, positive,
                        row_gradient, unit_interval)

__all__ = ["Adam", "AdamWeightDecay", "AdamW"]


class Adam(Optimizer):
    """Adam, exactly as ``torch.optim.Adam`` (weight decay is L2, added to the gradient).

    With ``g = grad / loss_scale + weight_decay * p`` and ``t = step + 1``::

        m  = beta1 * m + (1 - beta1) * g
        v  = beta2 * v + (1 - beta2) * g * g
        p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    ``use_nesterov`` uses ``beta1 * m + (1 - beta1) * g`` in place of ``m`` in the last line
    (MindSpore's Nesterov Adam). ``use_locking`` is accepted for MindSpore compatibility
    and has no effect. The moments are the state Parameters ``moment1.<param name>`` and
    ``moment2.<param name>``. ``RowTensor`` gradients are made dense (every row's moments
    decay, as in MindSpore's ``Adam``; ``LazyAdam`` updates only the touched rows).

    ``use_lazy=True`` makes this optimizer a :class:`LazyAdam`: MindSpore's fused form
    ``w -= lr*sqrt(1-beta2**t)/(1-beta1**t) * m / (sqrt(v) + eps)`` for every gradient, a
    ``RowTensor`` gradient updating only the rows it names (and their moments), and the
    extra state ``beta1_power``/``beta2_power`` (``beta**t`` after ``t`` steps).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor([1.0, -1.0]), name="w")
    >>> opt = nn.Adam([w], learning_rate=0.1)
    >>> _ = opt((ms.Tensor([0.5, -3.0]),))
    >>> [round(x, 4) for x in w.asnumpy().tolist()]     # first Adam step moves by lr * sign(g)
    [0.9, -0.9]
    """

    _decoupled_decay = False

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0,
                 use_lazy=False):
        owner = type(self).__name__
        beta1 = unit_interval(owner, "beta1", beta1)
        beta2 = unit_interval(owner, "beta2", beta2)
        eps = positive(owner, "eps", eps)
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.use_locking = bool(use_locking)
        self.use_nesterov = bool(use_nesterov)
        self.use_lazy = bool(use_lazy)
        if self.use_lazy:
            if self._decoupled_decay:
                raise ValueError(f"{owner}: use_lazy=True is not supported with decoupled "
                                 "weight decay; use nn.LazyAdam or nn.Adam(use_lazy=True)")
            self.supports_sparse = True   # RowTensor gradients reach _apply_one as they are
            # beta**t after t steps, as MindSpore's shape-[1] Parameters; host scalars like
            # global_step (the step size is computed on the host whatever the target)
            self.beta1_power = Parameter(np.ones(1, np.float32), name="beta1_power",
                                         requires_grad=False, device="CPU")
            self.beta2_power = Parameter(np.ones(1, np.float32), name="beta2_power",
                                         requires_grad=False, device="CPU")
        self._add_slots("moment1")
        self._add_slots("moment2")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        if self.use_lazy:
            self._apply_lazy(i, param, grad, lr, weight_decay, step, device)
            return
        xp = device.xp
        b1, b2 = self.beta1, self.beta2
        m = self._slot("moment1", i, device)
        v = self._slot("moment2", i, device)
        buf, tmp = self._scratch(i, device, param, 2)
        if self._decoupled_decay:
            if weight_decay:
                param *= 1.0 - lr * weight_decay
            weight_decay = 0.0
        g = effective_gradient(xp, param, grad, buf, tmp, weight_decay, self._inv_scale)
        accumulate_moments(xp, m, v, g, b1, b2, tmp)
        t = step + 1
        step_size = lr / (1.0 - b1 ** t)
        numerator = nesterov_numerator(xp, m, g, b1, buf, tmp) if self.use_nesterov else m
        # m / (sqrt(v) / c + eps) == c * m / (sqrt(v) + eps * c): one pass fewer, same value
        c = math.sqrt(1.0 - b2 ** t)
        xp.sqrt(v, out=tmp)
        tmp += self.eps * c
        xp.divide(numerator, tmp, out=tmp)
        tmp *= step_size * c
        param -= tmp

    def _fused_ready(self):
        return not self.use_lazy    # the lazy form is MindSpore's fused kernel, not this one

    def _fused_update(self, params, grads, states, lr, weight_decay, step):
        """``_apply_one`` for many dense host arrays in one C++ call (nn/optim/fused.py):
        the scalars of ``_apply_one``, the same operations in the same order."""
        b1, b2, t = self.beta1, self.beta2, step + 1
        decoupled = self._decoupled_decay and bool(weight_decay)
        l2 = 0.0 if self._decoupled_decay else weight_decay
        step_size = lr / (1.0 - b1 ** t)
        c = math.sqrt(1.0 - b2 ** t)
        native_kernels().multi_adam(
            params, grads, states[0], states[1], decay=1.0 - lr * weight_decay,
            inv_scale=self._inv_scale, wd=l2, beta1=b1, one_minus_b1=1.0 - b1, beta2=b2,
            one_minus_b2=1.0 - b2, eps_c=self.eps * c, step_c=step_size * c,
            decoupled_wd=decoupled, scaled=self._inv_scale != 1.0 or bool(l2),
            has_wd=bool(l2), nesterov=self.use_nesterov)

    def _apply_lazy(self, i, param, grad, lr, weight_decay, step, device):
        """MindSpore's fused Adam step; a RowTensor gradient touches only its (merged) rows."""
        b1, b2, t = self.beta1, self.beta2, step + 1
        self.beta1_power.data[0] = b1 ** t
        self.beta2_power.data[0] = b2 ** t
        m = self._slot("moment1", i, device)
        v = self._slot("moment2", i, device)
        if not isinstance(grad, RowTensor):
            buf, tmp = self._scratch(i, device, param, 2)
            g = effective_gradient(device.xp, param, grad, buf, tmp, weight_decay,
                                   self._inv_scale)
            fused_adam_update(device.xp, param, m, v, g, lr, b1, b2, self.eps, t,
                              self.use_nesterov, buf, tmp)
            return
        ids, values = row_gradient(grad, param, self._inv_scale)
        kernel = host_kernel(device, param, "lazy_adam")
        if kernel is not None:   # fused, multithreaded: merges duplicates and updates in place
            kernel(param, m, v, ids, values, lr, b1, b2, self.eps, t, weight_decay,
                   self.use_nesterov)
            return
        xp = device.xp

        def adam_rows(w, moments, g):
            fused_adam_update(xp, w, moments[0], moments[1], g, lr, b1, b2, self.eps, t,
                              self.use_nesterov, xp.empty_like(w), xp.empty_like(w))
        update_rows(xp, param, (m, v), ids, values, weight_decay, adam_rows)

    def extra_repr(self):
        lazy = ", use_lazy=True" if self.use_lazy else ""
        return (f"{super().extra_repr()}, beta1={self.beta1}, beta2={self.beta2}, "
                f"eps={self.eps}{lazy}")


Adam._fused_owner = Adam


def accumulate_moments(xp, m, v, g, beta1, beta2, tmp):
    """``m = beta1*m + (1-beta1)*g`` and ``v = beta2*v + (1-beta2)*g*g`` in place, in the
    operation order of the C++ kernels (``tmp``: scratch shaped like ``g``)."""
    m *= beta1
    xp.multiply(g, 1.0 - beta1, out=tmp)
    m += tmp
    v *= beta2
    xp.multiply(g, g, out=tmp)
    tmp *= 1.0 - beta2
    v += tmp


def nesterov_numerator(xp, m, g, beta1, buf, tmp):
    """``(1-beta1)*g + beta1*m`` into ``buf`` (``g`` may be ``buf`` itself: elementwise)."""
    xp.multiply(g, 1.0 - beta1, out=buf)
    xp.multiply(m, beta1, out=tmp)
    buf += tmp
    return buf


def fused_adam_update(xp, w, m, v, g, lr, beta1, beta2, eps, t, nesterov, buf, tmp):
    """MindSpore's fused Adam on arrays, in place (``t`` counts steps from 1)::

        m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
        w -= lr*sqrt(1-beta2**t)/(1-beta1**t) * m / (sqrt(v) + eps)

    with ``beta1*m + (1-beta1)*g`` in place of ``m`` in the numerator when ``nesterov``.
    The operations run in the order of the C++ ``lazy_adam`` kernel, so both give the same
    bits. ``buf`` and ``tmp`` are scratch arrays shaped like ``w``; ``g`` may be ``buf``.
    """
    lr_t = lr * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
    accumulate_moments(xp, m, v, g, beta1, beta2, tmp)
    if nesterov:
        nesterov_numerator(xp, m, g, beta1, buf, tmp)
        buf *= lr_t
        xp.sqrt(v, out=tmp)
        tmp += eps
        buf /= tmp
        w -= buf
    else:
        xp.multiply(m, lr_t, out=tmp)
        xp.sqrt(v, out=buf)
        buf += eps
        tmp /= buf
        w -= tmp


class AdamWeightDecay(Adam):
    """Adam with decoupled weight decay, as ``torch.optim.AdamW``: each step first scales
    ``p *= 1 - lr * weight_decay``, then applies the Adam update without L2 in the gradient.

    MindSpore's signature and defaults (``eps=1e-6``, ``weight_decay=0.0``); exclude biases
    and norm scales from decay with parameter groups. State: ``moment1.*`` and ``moment2.*``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor([2.0]), name="w")
    >>> opt = nn.AdamWeightDecay([w], learning_rate=0.1, weight_decay=0.5)
    >>> _ = opt((ms.Tensor([1.0]),))
    >>> round(float(w.asnumpy()[0]), 4)    # 2 * (1 - 0.1 * 0.5) - 0.1
    1.8
    """

    _decoupled_decay = True

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0, loss_scale=1.0):
        super().__init__(params, learning_rate, beta1, beta2, eps, weight_decay=weight_decay,
                         loss_scale=loss_scale)


class AdamW(AdamWeightDecay):
    """``AdamWeightDecay`` with PyTorch's ``AdamW`` defaults (``eps=1e-8``, ``weight_decay=1e-2``).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> opt = nn.AdamW([ms.Parameter(ms.Tensor([1.0]), name="w")])
    >>> opt.eps, opt.weight_decay
    (1e-08, 0.01)
    """

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=1e-2, loss_scale=1.0):
        super().__init__(params, learning_rate, beta1, beta2, eps, weight_decay, loss_scale)
