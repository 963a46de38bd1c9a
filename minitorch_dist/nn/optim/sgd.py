"""SGD with optional momentum, dampening, Nesterov and weight decay (torch.optim.SGD's rule).

Updates run in place on reused scratch arrays: a step allocates nothing for dense
gradients. Sparse ``RowTensor`` gradients without momentum update only the touched rows.
"""
from ...backend import half
from ...row_tensor import RowTensor
from .fused import native_kernels
from .optimizer import Optimizer, non_negative

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, exactly as ``torch.optim.SGD``.

    With ``g = grad / loss_scale + weight_decay * p``::

        buf = g                                   (first step)
        buf = momentum * buf + (1 - dampening) * g (later steps)
        p  -= lr * (g + momentum * buf)  if nesterov else  lr * buf

    and ``p -= lr * g`` when ``momentum == 0``. The momentum buffers are the state
    Parameters ``moments.<param name>``. A ``RowTensor`` gradient without momentum updates
    only its rows (duplicate rows summed; weight decay applies to those rows only); with
    momentum it is made dense first.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor([1.0]), name="w")
    >>> opt = nn.SGD([w], learning_rate=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     _ = opt((ms.Tensor([1.0]),))
    >>> round(float(w.asnumpy()[0]), 4), [name for name, _ in opt.parameters_and_names()]
    (0.71, ['global_step', 'moments.w'])
    """

    supports_sparse = True

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, loss_scale=1.0):
        momentum = check_momentum("SGD", non_negative("SGD", "momentum", momentum))
        dampening = non_negative("SGD", "dampening", dampening)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"SGD: nesterov=True needs momentum > 0 and dampening == 0, "
                             f"got momentum={momentum} and dampening={dampening}")
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum = momentum
        self.dampening = dampening
        self.nesterov = bool(nesterov)
        if momentum > 0:
            self._add_slots("moments")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        xp = device.xp
        if isinstance(grad, RowTensor):
            if self.momentum == 0:
                sparse_rows_step(device, param, grad.indices.data, grad.values.data, lr,
                                 weight_decay, self._inv_scale)
                return
            grad = grad.to_dense().data
        (tmp,) = self._scratch(i, device, param, 1)
        if self.momentum == 0:
            step_fn, arrays, written = (
                lambda p, g, t: plain_step(xp, p, g, t, lr, weight_decay, self._inv_scale),
                (param, grad, tmp), (0,))
        else:
            step_fn, arrays, written = (
                lambda p, g, b, t: heavy_ball_step(xp, p, g, b, t, lr, self.momentum,
                                                   self.dampening, weight_decay, self._inv_scale,
                                                   self.nesterov, first=step == 0),
                (param, grad, self._slot("moments", i, device), tmp), (0, 2))
        if half.is_host_half(xp, param):
            # NumPy's float16 loops run 20-30x slower than float32's: update in float32 and
            # round the parameter and the momentum once (backend/half.py)
            half.run_in_float32(step_fn, *arrays, write_back=written)
        else:
            step_fn(*arrays)

    def _fused_update(self, params, grads, states, lr, weight_decay, step):
        """``_apply_one`` for many dense host arrays in one C++ call (nn/optim/fused.py)."""
        fused_sgd(params, grads, states[0] if self.momentum > 0 else None, lr, self.momentum,
                  self.dampening, weight_decay, self._inv_scale, self.nesterov, step == 0)

    def extra_repr(self):
        return (f"{super().extra_repr()}, momentum={self.momentum}, dampening={self.dampening}, "
                f"nesterov={self.nesterov}")


SGD._fused_owner = SGD


def fused_sgd(params, grads, bufs, lr, momentum, dampening, weight_decay, inv_scale, nesterov,
              first):
    """``plain_step`` (``bufs`` None) or ``heavy_ball_step`` on every array of ``params``
    at once (C++ ``multi_sgd``): the same scalars, the same operations in the same order."""
    keep = 1.0 - dampening
    native_kernels().multi_sgd(
        params, grads, bufs, decay=1.0 - lr * weight_decay, g_scale=lr * inv_scale,
        momentum=momentum, keep_scale=keep * inv_scale, keep_wd=keep * weight_decay,
        inv_scale=inv_scale, wd=weight_decay, step_scale=lr * momentum if nesterov else lr,
        has_wd=bool(weight_decay), first_dampened=bool(first and dampening != 0),
        unit_keep=keep * inv_scale == 1.0, nesterov=bool(nesterov))


def plain_step(xp, param, grad, tmp, lr, weight_decay, inv_scale):
    """``param -= lr * (grad * inv_scale + weight_decay * param)`` in place."""
    if weight_decay:
        param *= 1.0 - lr * weight_decay
    xp.multiply(grad, lr * inv_scale, out=tmp)
    param -= tmp


def check_momentum(owner, momentum):
    """``momentum`` when it lies in [0, 1); a ValueError otherwise: with momentum >= 1 the
    buffer never forgets a gradient and training diverges (5.0 reaches 1e36 in a few dozen
    steps).

    >>> check_momentum("SGD", 0.9)
    0.9
    """
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"{owner}: momentum must lie in [0, 1), got {momentum!r} (with "
                         "momentum >= 1 the update grows without bound; 0.9 is the usual value)")
    return momentum


def heavy_ball_step(xp, param, grad, buf, tmp, lr, momentum, dampening, weight_decay, inv_scale,
                    nesterov, first=False):
    """One momentum step (torch's SGD rule; ``first`` starts the buffer at the gradient).
    ``momentum`` outside [0, 1) is a ValueError (``nn.Momentum`` gets its check here)."""
    if not 0.0 <= momentum < 1.0:
        check_momentum("Momentum", momentum)
    if first and dampening != 0:
        xp.multiply(grad, inv_scale, out=buf)
        if weight_decay:
            xp.multiply(param, weight_decay, out=tmp)
            buf += tmp
    else:   # with dampening == 0 a zero buffer makes the first step buf = g as well
        keep = 1.0 - dampening
        buf *= momentum
        if keep * inv_scale == 1.0:
            buf += grad
        else:
            xp.multiply(grad, keep * inv_scale, out=tmp)
            buf += tmp
        if weight_decay:
            xp.multiply(param, keep * weight_decay, out=tmp)
            buf += tmp
    if nesterov:   # p -= lr * (g + momentum * buf), g = grad * inv_scale + weight_decay * p
        if weight_decay:
            param *= 1.0 - lr * weight_decay
        xp.multiply(grad, lr * inv_scale, out=tmp)
        param -= tmp
        xp.multiply(buf, lr * momentum, out=tmp)
    else:
        xp.multiply(buf, lr, out=tmp)
    param -= tmp


def sparse_rows_step(device, param, ids, values, lr, weight_decay, inv_scale):
    """``plain_step`` on the rows named by ``ids`` only; duplicate ids are summed first."""
    kernel = _host_sparse_sgd() if device.is_host else None
    if kernel is not None and values.dtype == param.dtype:
        # fused C++ merge-and-update: p[r] -= lr' * (g + wd' * p[r]) with the scale folded in
        kernel(param, ids, values, lr * inv_scale, weight_decay / inv_scale)
        return
    xp = device.xp
    rows, inverse = xp.unique(ids, return_inverse=True)
    merged = xp.zeros((rows.shape[0],) + param.shape[1:], param.dtype)
    xp.add.at(merged, inverse.reshape(-1), values)
    merged *= lr * inv_scale
    if weight_decay:
        touched = param[rows]
        touched *= 1.0 - lr * weight_decay
        touched -= merged
        param[rows] = touched
    else:
        param[rows] -= merged


_KERNEL = []


def _host_sparse_sgd():
    """The fused C++ ``sparse_sgd`` kernel when ``minitorch_dist.kernels`` provides it."""
    if not _KERNEL:
        try:
            from ...kernels import sparse_sgd
        except ImportError:
            sparse_sgd = None
        _KERNEL.append(sparse_sgd)
    return _KERNEL[0]
