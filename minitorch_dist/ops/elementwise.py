"""Unary elementwise math: Exp, Log, Sqrt, Rsqrt, Abs, Square and (not differentiable) Sign.

Exp, Log, Sqrt and Rsqrt turn integer or boolean inputs into ``float32`` (NumPy alone would
give ``float64``), as PyTorch and MindSpore do. Each forward keeps only what its backward
reads, usually the output, which exists anyway, so the tape holds no extra memory.
Results are written with ``out=`` into a fresh array: a ufunc on a 0-d array would
otherwise hand back a NumPy scalar, which cannot be updated in place.
"""
from ..backend import dtypes
from .primitive import Primitive

__all__ = ["Exp", "Log", "Sqrt", "Rsqrt", "Abs", "Square", "Sign",
           "exp", "log", "sqrt", "rsqrt", "abs", "square", "sign"]


def as_float(x):
    """``x`` itself when floating, else a ``float32`` copy (inputs of exp, log, sqrt, ...)."""
    return x if x.dtype.kind == "f" else x.astype(dtypes.DEFAULT_FLOAT)


def fresh(xp, ufunc, x, *others):
    """``ufunc(x, *others)`` written into a new array of ``x``'s shape and dtype.

    ``x`` must already have the result's shape (``others`` may broadcast against it).
    """
    return ufunc(x, *others, out=xp.empty_like(x))


class Exp(Primitive):
    """``e ** x``; the gradient is the output itself.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Exp()(ms.Tensor([0.0])).asnumpy().tolist()
    [1.0]
    """

    def forward(self, ctx, x):
        xp = ctx.xp
        out = fresh(xp, xp.exp, as_float(x))
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        return (fresh(ctx.xp, ctx.xp.multiply, out, g),)


class Log(Primitive):
    """Natural logarithm; ``-inf`` at 0 and ``nan`` below, as in NumPy."""

    def forward(self, ctx, x):
        xp = ctx.xp
        x = as_float(x)
        ctx.save_for_backward(x)
        return fresh(xp, xp.log, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        return (fresh(ctx.xp, ctx.xp.divide, g, x),)


class Sqrt(Primitive):
    """Square root; the gradient ``1 / (2 sqrt(x))`` is read from the saved output."""

    def forward(self, ctx, x):
        xp = ctx.xp
        out = fresh(xp, xp.sqrt, as_float(x))
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.divide, g, out)
        gx *= 0.5
        return (gx,)


class Rsqrt(Primitive):
    """``1 / sqrt(x)``; its derivative ``-x ** -1.5 / 2`` is ``-out ** 3 / 2``."""

    def forward(self, ctx, x):
        xp = ctx.xp
        out = fresh(xp, xp.sqrt, as_float(x))
        xp.reciprocal(out, out=out)
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.square, out)
        gx *= out
        gx *= g
        gx *= -0.5
        return (gx,)


class Abs(Primitive):
    """``|x|``; the gradient is ``sign(x)``, taken as 0 at 0."""

    def forward(self, ctx, x):
        xp = ctx.xp
        ctx.save_for_backward(x)
        return fresh(xp, xp.abs, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.sign, x)
        gx *= g
        return (gx,)


class Square(Primitive):
    """``x * x``; the gradient is ``2 x``."""

    def forward(self, ctx, x):
        xp = ctx.xp
        ctx.save_for_backward(x)
        return fresh(xp, xp.square, x)

    def backward(self, ctx, g):
        (x,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.multiply, x, g)
        gx *= 2
        return (gx,)


class Sign(Primitive):
    """-1, 0 or 1 by the sign of ``x``; piecewise constant, so it carries no gradient."""

    differentiable = False

    def forward(self, ctx, x):
        xp = ctx.xp
        return fresh(xp, xp.sign, x)


# Functional forms share one instance per primitive, so they appear once in the placement report.
_exp, _log, _sqrt, _rsqrt = Exp(), Log(), Sqrt(), Rsqrt()
_abs, _square, _sign = Abs(), Square(), Sign()


def exp(x):
    """``e ** x`` elementwise."""
    return _exp(x)


def log(x):
    """Natural logarithm elementwise."""
    return _log(x)


def sqrt(x):
    """Square root elementwise."""
    return _sqrt(x)


def rsqrt(x):
    """``1 / sqrt(x)`` elementwise."""
    return _rsqrt(x)


def abs(x):  # noqa: A001 - mirrors the operator's name
    """``|x|`` elementwise (gradient 0 at 0)."""
    return _abs(x)


def square(x):
    """``x * x`` elementwise."""
    return _square(x)


def sign(x):
    """-1, 0 or 1 elementwise; not differentiable."""
    return _sign(x)
