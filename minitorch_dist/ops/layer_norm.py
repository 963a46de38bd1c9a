"""LayerNorm and L2Normalize (MindSpore's primitive forms).

* ``LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7)(x, gamma, beta)``:
  ``(y, mean, variance)``; ``x`` is normalised over the axes from ``begin_norm_axis`` on,
  then scaled by ``gamma`` and shifted by ``beta`` (shaped like ``x.shape[begin_params_axis:]``).
  ``mean`` and ``variance`` keep the normalised axes as size 1.
* ``L2Normalize(axis=0, epsilon=1e-4)(x)``: ``x / sqrt(max(sum(x ** 2, axis), epsilon))``.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> y, mean, var = ops.LayerNorm()(ms.Tensor([[1.0, 3.0]]), ms.Tensor([1.0, 1.0]), ms.Tensor([0.0, 0.0]))
>>> np.round(y.asnumpy(), 4).tolist(), mean.asnumpy().tolist(), var.asnumpy().tolist()
([[-1.0, 1.0]], [[2.0]], [[1.0]])
>>> [round(v, 4) for v in ops.L2Normalize(axis=1)(ms.Tensor([[3.0, 4.0]])).asnumpy()[0].tolist()]
[0.6, 0.8]
"""
from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["LayerNorm", "L2Normalize"]


class LayerNorm(Primitive):
    """See the module docstring."""

    def __init__(self, begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7):
        self.begin_norm_axis = int(begin_norm_axis)
        self.begin_params_axis = int(begin_params_axis)
        self.epsilon = float(epsilon)

    def forward(self, ctx, x, gamma, beta):
        xp = ctx.xp
        norm = normalize_axis(self.begin_norm_axis, x.ndim, self.name, x.shape,
                              what="begin_norm_axis")
        params = normalize_axis(self.begin_params_axis, x.ndim, self.name, x.shape,
                                what="begin_params_axis")
        if gamma.shape != x.shape[params:] or beta.shape != x.shape[params:]:
            raise ValueError(f"{self.name}: gamma and beta must have shape {x.shape[params:]} "
                             f"(x.shape[begin_params_axis:]), got {gamma.shape} and {beta.shape}")
        axes = tuple(range(norm, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=axes, keepdims=True)
        inv = 1.0 / xp.sqrt(var + self.epsilon)
        xhat = centered * inv
        ctx.save_for_backward(xhat, inv, gamma)
        ctx.axes, ctx.param_axes = axes, tuple(range(params))
        return xhat * gamma + beta, mean, var

    def backward(self, ctx, g, g_mean=None, g_var=None):
        xhat, inv, gamma = ctx.saved
        axes = ctx.axes
        g_xhat = g * gamma
        count = 1
        for a in axes:
            count *= xhat.shape[a]
        gx = inv * (g_xhat - g_xhat.mean(axis=axes, keepdims=True)
                    - xhat * (g_xhat * xhat).mean(axis=axes, keepdims=True))
        if g_mean is not None:
            gx = gx + g_mean / count
        if g_var is not None:
            gx = gx + g_var * 2.0 * xhat / inv / count
        g_gamma = (g * xhat).sum(axis=ctx.param_axes) if ctx.needs_input_grad[1] else None
        g_beta = g.sum(axis=ctx.param_axes) if ctx.needs_input_grad[2] else None
        return gx, g_gamma, g_beta


class L2Normalize(Primitive):
    """See the module docstring."""

    def __init__(self, axis=0, epsilon=1e-4):
        self.axis = axis
        self.epsilon = float(epsilon)

    def forward(self, ctx, x):
        xp = ctx.xp
        axes = (self.axis,) if isinstance(self.axis, int) else tuple(self.axis)
        axes = tuple(normalize_axis(a, x.ndim, self.name, x.shape) for a in axes)
        squares = (x * x).sum(axis=axes, keepdims=True)
        clipped = squares < self.epsilon
        norm = xp.sqrt(xp.maximum(squares, self.epsilon))
        out = x / norm
        ctx.save_for_backward(out, norm, clipped)
        ctx.axes = axes
        return out

    def backward(self, ctx, g):
        out, norm, clipped = ctx.saved
        xp = ctx.xp
        projected = (g * out).sum(axis=ctx.axes, keepdims=True)
        # where the norm was clipped to sqrt(epsilon) it is a constant: no projection term
        gx = (g - out * xp.where(clipped, 0.0, projected)) / norm
        return (gx,)
