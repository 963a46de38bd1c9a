"""Batch normalization over the channel axis (axis 1) of (N, C) or (N, C, ...) input.

Training mode normalizes with the batch statistics and updates the moving statistics in
place, PyTorch's way: ``moving = (1 - momentum) * moving + momentum * batch``, with the
unbiased batch variance. Eval mode normalizes with the moving statistics. The backward is
the closed form, fused into a few whole-array operations.
"""
from .primitive import Primitive

__all__ = ["BatchNorm", "batch_norm"]


class BatchNorm(Primitive):
    """``BatchNorm(is_training, epsilon, momentum)(x, gamma, beta, moving_mean, moving_variance)``.

    ``gamma``, ``beta`` and the moving statistics have shape (C,). The moving statistics are
    not differentiable; in training mode their arrays are updated in place (keep them on the
    device the primitive runs on, or the update lands in a temporary copy).

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor([[1.0], [3.0]])
    >>> mean, var = ms.Tensor([0.0]), ms.Tensor([1.0])
    >>> y = ops.BatchNorm(epsilon=0.0, momentum=0.5)(x, ms.Tensor([1.0]), ms.Tensor([0.0]), mean, var)
    >>> y.asnumpy().ravel().tolist(), mean.asnumpy().tolist(), var.asnumpy().tolist()
    ([-1.0, 1.0], [1.0], [1.5])
    """

    def __init__(self, is_training=True, epsilon=1e-5, momentum=0.1, data_format="NCHW"):
        if data_format != "NCHW":
            raise ValueError(f"BatchNorm: only data_format='NCHW' is supported, got {data_format!r}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm: momentum must be in [0, 1], got {momentum!r}")
        if not epsilon >= 0.0:
            raise ValueError(f"BatchNorm: epsilon must be non-negative, got {epsilon!r}")
        self.is_training = bool(is_training)
        self.epsilon = float(epsilon)
        self.momentum = float(momentum)

    def _check(self, x, params):
        if x.ndim < 2:
            raise ValueError(f"{self.name}: expects input of shape (N, C) or (N, C, ...), got {x.shape}")
        if x.dtype.kind != "f":
            raise TypeError(f"{self.name}: input must be floating point, got {x.dtype}")
        channels = x.shape[1]
        names = ("gamma", "beta", "moving_mean", "moving_variance")
        for name, p in zip(names, params):
            if p.shape != (channels,):
                raise ValueError(f"{self.name}: {name} must have shape ({channels},) for input of "
                                 f"shape {x.shape}, got {p.shape}")

    def forward(self, ctx, x, gamma, beta, moving_mean, moving_variance):
        self._check(x, (gamma, beta, moving_mean, moving_variance))
        xp = ctx.xp
        axes = (0,) + tuple(range(2, x.ndim))
        bshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        count = x.size // x.shape[1]
        if self.is_training:
            if count < 2:
                raise ValueError(f"{self.name}: training needs more than one value per channel, "
                                 f"got input of shape {x.shape}")
            mean = x.mean(axis=axes)
            xhat = x - mean.reshape(bshape)
            var = xp.square(xhat).mean(axis=axes)
            inv_std = 1.0 / xp.sqrt(var + self.epsilon)
            xhat *= inv_std.reshape(bshape)
            self._update(moving_mean, mean, moving_variance, var * (count / (count - 1)))
            out = xhat * gamma.reshape(bshape)
            out += beta.reshape(bshape)
            ctx.save_for_backward(xhat, inv_std, gamma)
        else:
            inv_std = 1.0 / xp.sqrt(moving_variance + self.epsilon)
            scale = gamma * inv_std
            out = x * scale.reshape(bshape)
            out += (beta - moving_mean * scale).reshape(bshape)
            ctx.save_for_backward(x, moving_mean, inv_std, scale)
        ctx.axes, ctx.bshape, ctx.count = axes, bshape, count
        return out

    def _update(self, moving_mean, mean, moving_variance, unbiased_var):
        keep = 1.0 - self.momentum
        moving_mean *= keep
        moving_mean += self.momentum * mean
        moving_variance *= keep
        moving_variance += self.momentum * unbiased_var

    def backward(self, ctx, grad):
        axes, bshape = ctx.axes, ctx.bshape
        need_x, need_gamma, need_beta = ctx.needs_input_grad[:3]
        if self.is_training:
            xhat, inv_std, gamma = ctx.saved
        else:
            x, moving_mean, inv_std, scale = ctx.saved
            xhat = (x - moving_mean.reshape(bshape)) * inv_std.reshape(bshape) if need_gamma else None
        g_beta = grad.sum(axis=axes) if (need_beta or (need_x and self.is_training)) else None
        g_gamma = (grad * xhat).sum(axis=axes) if (need_gamma or (need_x and self.is_training)) else None
        g_x = None
        if need_x and self.is_training:
            # dx = gamma / std * (g - mean(g) - xhat * mean(g * xhat))
            count = ctx.count
            g_x = xhat * (-g_gamma / count).reshape(bshape)
            g_x += grad
            g_x -= (g_beta / count).reshape(bshape)
            g_x *= (gamma * inv_std).reshape(bshape)
        elif need_x:
            g_x = grad * scale.reshape(bshape)
        return (g_x, g_gamma if need_gamma else None, g_beta if need_beta else None, None, None)


_shared = {}


def batch_norm(x, gamma, beta, moving_mean, moving_variance, training=True, momentum=0.1, eps=1e-5):
    """Functional batch normalization (channel axis 1); see :class:`BatchNorm`.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor(np.random.default_rng(0).normal(size=(8, 3, 4, 4)).astype(np.float32))
    >>> ones, zeros = ms.Tensor(np.ones(3, np.float32)), ms.Tensor(np.zeros(3, np.float32))
    >>> y = ops.batch_norm(x, ones, zeros, ms.Tensor(np.zeros(3, np.float32)), ms.Tensor(np.ones(3, np.float32)))
    >>> bool(abs(y.asnumpy().mean()) < 1e-5)
    True
    """
    key = (bool(training), float(momentum), float(eps))
    op = _shared.get(key)
    if op is None:
        op = _shared[key] = BatchNorm(is_training=training, epsilon=eps, momentum=momentum)
    return op(x, gamma, beta, moving_mean, moving_variance)
