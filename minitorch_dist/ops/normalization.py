"""Batch normalization over the channel axis (axis 1) of (N, C) or (N, C, ...) input.

Training mode normalizes with the batch statistics and updates the moving statistics in
place, PyTorch's way: ``moving = (1 - momentum) * moving + momentum * batch``, with the
unbiased batch variance. Eval mode normalizes with the moving statistics. The backward is
the closed form, fused into a few whole-array operations. On the host, training-mode input in
channels-last memory (what Conv2D returns) goes through the C++ row kernels
``kernels.batch_norm_rows``/``batch_norm_rows_backward``: 3 passes over the data forward and
2 backward, where the NumPy expressions make 7-8 (statistics summed in float64).
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
            rows = _channel_rows(xp, x, gamma, beta)
            ctx.rows = rows is not None
            if ctx.rows:    # channels-last on the host: the C++ loops (3 passes, not 8)
                out, xhat, mean, var = _kernels().batch_norm_rows(rows, gamma, beta, self.epsilon)
                inv_std = (1.0 / xp.sqrt(var.astype(xp.float64) + self.epsilon)).astype(x.dtype)
                out, xhat = _from_rows(out, x.shape), _from_rows(xhat, x.shape)
            else:
                mean = x.mean(axis=axes)
                xhat = x - mean.reshape(bshape)
                var = xp.square(xhat).mean(axis=axes)
                inv_std = 1.0 / xp.sqrt(var + self.epsilon)
                xhat *= inv_std.reshape(bshape)
                out = xhat * gamma.reshape(bshape)
                out += beta.reshape(bshape)
            self._update(moving_mean, mean, moving_variance, var * (count / (count - 1)))
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
            if ctx.rows and grad.dtype == xhat.dtype:
                g_rows = _to_rows(grad)
                dx, g_gamma, g_beta = _kernels().batch_norm_rows_backward(
                    g_rows, _to_rows(xhat), gamma, inv_std, need_x)
                dx = None if dx is None else _from_rows(dx, grad.shape)
                return (dx, g_gamma if need_gamma else None, g_beta if need_beta else None,
                        None, None)
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


def _kernels():
    from .. import kernels
    return kernels


def _to_rows(a):
    """(N, C, H, W) or (N, C) as the (rows, C) matrix of its channels-last memory (a copy
    when the memory is not channels-last)."""
    if a.ndim == 2:
        return a
    return a.transpose(0, 2, 3, 1).reshape(-1, a.shape[1])


def _from_rows(rows, shape):
    """The inverse of ``_to_rows``: an NCHW view of channels-last rows."""
    if len(shape) == 2:
        return rows
    n, c, h, w = shape
    return rows.reshape(n, h, w, c).transpose(0, 3, 1, 2)


def _channel_rows(xp, x, gamma, beta):
    """x as a C-contiguous (rows, C) view when the row kernels apply, else None: the host,
    float32/64 throughout, and x (N, C) or channels-last (N, C, H, W) memory."""
    if xp.__name__ != "numpy" or x.dtype.char not in "fd" or gamma.dtype != x.dtype or \
            beta.dtype != x.dtype or x.ndim not in (2, 4):
        return None
    rows = _to_rows(x) if x.ndim == 2 or x.transpose(0, 2, 3, 1).flags.c_contiguous else None
    if rows is None or not rows.flags.c_contiguous:
        return None
    from .. import kernels
    return rows if kernels.HAVE_CPP else None


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
