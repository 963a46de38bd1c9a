"""More unary math: Sin, Cos, Erf, Log1p (elementwise, float results like ``Exp``).

``Erf`` has no NumPy ufunc: the host computes it with ``math.erf`` per element (exact to
double precision), CuPy with ``cupyx.scipy.special.erf``.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> [round(v, 6) for v in ops.Erf()(ms.Tensor([0.0, 1.0])).asnumpy().tolist()]
[0.0, 0.842701]
"""
import math

import numpy as np

from .elementwise import as_float, fresh
from .primitive import Primitive

__all__ = ["Sin", "Cos", "Erf", "Log1p", "sin", "cos", "erf", "log1p"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_math_erf = np.frompyfunc(math.erf, 1, 1)


def erf_array(xp, x):
    """``erf(x)`` elementwise, in ``x``'s dtype."""
    if xp is np:
        return _math_erf(x).astype(x.dtype)
    from cupyx.scipy.special import erf
    return erf(x)


class Sin(Primitive):
    """``sin(x)``; the gradient is ``cos(x)``."""

    def forward(self, ctx, x):
        x = as_float(x)
        ctx.save_for_backward(x)
        return fresh(ctx.xp, ctx.xp.sin, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.cos, x)
        gx *= g
        return (gx,)


class Cos(Primitive):
    """``cos(x)``; the gradient is ``-sin(x)``."""

    def forward(self, ctx, x):
        x = as_float(x)
        ctx.save_for_backward(x)
        return fresh(ctx.xp, ctx.xp.cos, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.sin, x)
        gx *= g
        gx *= -1
        return (gx,)


class Erf(Primitive):
    """The error function; its derivative is ``2 / sqrt(pi) * exp(-x ** 2)``."""

    def forward(self, ctx, x):
        x = as_float(x)
        ctx.save_for_backward(x)
        return erf_array(ctx.xp, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        xp = ctx.xp
        gx = fresh(xp, xp.square, x)
        xp.negative(gx, out=gx)
        xp.exp(gx, out=gx)
        gx *= _TWO_OVER_SQRT_PI
        gx *= g
        return (gx,)


class Log1p(Primitive):
    """``log(1 + x)``, accurate near 0; the gradient is ``1 / (1 + x)``."""

    def forward(self, ctx, x):
        x = as_float(x)
        ctx.save_for_backward(x)
        return fresh(ctx.xp, ctx.xp.log1p, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        gx = x + 1
        ctx.xp.divide(g, gx, out=gx)
        return (gx,)


_sin, _cos, _erf, _log1p = Sin(), Cos(), Erf(), Log1p()


def sin(x):
    """``sin(x)`` elementwise."""
    return _sin(x)


def cos(x):
    """``cos(x)`` elementwise."""
    return _cos(x)


def erf(x):
    """The error function elementwise."""
    return _erf(x)


def log1p(x):
    """``log(1 + x)`` elementwise."""
    return _log1p(x)
