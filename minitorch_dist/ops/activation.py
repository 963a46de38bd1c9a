"""Activations: ReLU, Sigmoid, Tanh, GeLU, Softmax and LogSoftmax.

Everything stays accurate for any finite input: the softmaxes subtract the row maximum
before ``exp``, and the sigmoid's one possible overflow (``exp(-x)`` for very negative x)
gives 0, which is within the smallest normal float of the true value.
"""
import contextlib
import math

import numpy as np

from .. import kernels
from ..backend import dtypes
from .axes import normalize_axis
from .elementwise import as_float, fresh
from .primitive import Primitive

__all__ = ["ReLU", "Sigmoid", "Tanh", "GeLU", "Softmax", "LogSoftmax",
           "relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax"]


def sigmoid_of(xp, x, exp_neg_abs):
    """``1 / (1 + exp(-x))`` from ``exp_neg_abs = exp(-|x|)``, for callers that have it already."""
    out = xp.where(x >= 0, 1, exp_neg_abs)       # numerator: 1 for x >= 0, exp(x) for x < 0
    out /= exp_neg_abs + 1
    return out


def quiet_overflow(xp):
    """A context that silences NumPy's overflow warning (CuPy raises none)."""
    errstate = getattr(xp, "errstate", None)
    return errstate(over="ignore") if errstate is not None else contextlib.nullcontext()


def normal_cdf(xp, x):
    """Phi(x) = erfc(-x / sqrt 2) / 2, with erfc from the Chebyshev fit of Numerical Recipes.

    The fit (``erfcc``, W. H. Press et al., Numerical Recipes 2nd ed., section 6.2) has
    fractional error below 1.2e-7 for every argument. Only ``erfc(|z|)`` is evaluated, so
    the tiny tail values for very negative x keep their relative precision too.
    """
    z = fresh(xp, xp.abs, x)
    z *= 1.0 / math.sqrt(2.0)
    t = fresh(xp, xp.multiply, z, 0.5)
    t += 1
    xp.reciprocal(t, out=t)
    poly = fresh(xp, xp.multiply, t, 0.17087277)
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807,
              -0.18628806, 0.09678418, 0.37409196, 1.00002368):
        poly += c
        poly *= t
    poly -= 1.26551223
    z *= z
    poly -= z
    xp.exp(poly, out=poly)
    poly *= t                          # erfc(|x| / sqrt 2)
    poly *= 0.5                        # Phi(-|x|)
    return xp.where(x < 0, poly, 1 - poly)


class ReLU(Primitive):
    """``max(x, 0)``; the gradient at exactly 0 is 0.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.ReLU()(ms.Tensor([-1.0, 0.0, 2.0])).asnumpy().tolist()
    [0.0, 0.0, 2.0]
    """

    def forward(self, ctx, x):
        xp = ctx.xp
        if x.dtype == dtypes.float16 and xp.__name__ == "numpy":
            # NumPy's float16 maximum converts element by element; on the int16 view the
            # sign bit decides alone (negative halves and -0 become +0), a SIMD loop
            out = xp.maximum(x.view(xp.int16), 0, out=xp.empty_like(x).view(xp.int16))
            out = out.view(x.dtype)
        elif xp is np:      # one pass in C++ where built (cpp/elementwise.cpp), same bits
            out = kernels.relu(x)
        else:
            out = xp.maximum(x, 0, out=xp.empty_like(x))
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        xp = ctx.xp
        if out.dtype == dtypes.float16 and g.dtype == out.dtype and xp.__name__ == "numpy":
            # a selection, not a product: no float16 arithmetic, same bits as g * (out > 0)
            # for finite g. out holds no negative values, so its int16 view is > 0 exactly
            # where out > 0; the mask becomes all-ones/zero int16 words that AND g's bits
            # (NumPy's where and float16 multiply are 20x slower than these integer loops)
            keep = xp.greater(out.view(xp.int16), 0).astype(xp.int16)
            xp.negative(keep, out=keep)
            keep &= g.view(xp.int16)
            return (keep.view(g.dtype),)
        # in out's memory layout (channels-last after a convolution), whatever g's: the
        # gradient then reaches BatchNorm and the convolution in the layout they work in
        if xp is np:        # one pass, no bool mask (cpp/elementwise.cpp), same bits
            return (kernels.relu_backward(g, out),)
        return (xp.multiply(g, out > 0, out=xp.empty_like(out, dtype=g.dtype)),)


class Sigmoid(Primitive):
    """``1 / (1 + exp(-x))``; gradient ``out (1 - out)``.

    Written as four in-place passes. For very negative x, ``exp(-x)`` overflows to inf and
    ``1 / (1 + inf)`` gives 0 while the true value is below the smallest normal float
    (about 1e-38 in float32), so the overflow is harmless and its warning is silenced.
    No step subtracts nearly equal numbers, so small results keep full relative precision.
    """

    def forward(self, ctx, x):
        xp = ctx.xp
        out = fresh(xp, xp.negative, as_float(x))
        with quiet_overflow(xp):
            xp.exp(out, out=out)
        out += 1
        xp.reciprocal(out, out=out)
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        gx = ctx.xp.subtract(1, out, out=ctx.xp.empty_like(out))
        gx *= out
        gx *= g
        return (gx,)


class Tanh(Primitive):
    """Hyperbolic tangent; gradient ``1 - out ** 2``."""

    def forward(self, ctx, x):
        xp = ctx.xp
        out = fresh(xp, xp.tanh, as_float(x))
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.square, out)
        gx -= 1
        gx *= g
        ctx.xp.negative(gx, out=gx)
        return (gx,)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


class GeLU(Primitive):
    """Gaussian error linear unit ``x * Phi(x)``.

    ``approximate=False`` (the default, like PyTorch's ``gelu``) uses the exact normal CDF,
    evaluated through an erfc fit with relative error below 1.2e-7 (see ``normal_cdf``).
    ``approximate=True`` (or ``"tanh"``) uses the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` that MindSpore's ``GeLU`` computes.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> round(ops.GeLU()(ms.Tensor([1.0])).asnumpy()[0].item(), 6)
    0.841345
    """

    def __init__(self, approximate=False):
        if approximate not in (False, True, "none", "tanh"):
            raise ValueError(f"GeLU: approximate must be False/True or 'none'/'tanh', got {approximate!r}")
        self.approximate = approximate in (True, "tanh")

    def forward(self, ctx, x):
        xp = ctx.xp
        x = as_float(x)
        if self.approximate:
            inner = fresh(xp, xp.square, x)
            inner *= _GELU_CUBIC
            inner += 1
            inner *= x
            inner *= _SQRT_2_OVER_PI
            t = xp.tanh(inner, out=inner)
            ctx.save_for_backward(x, t)
            out = t + 1
            out *= x
            out *= 0.5
            return out
        cdf = normal_cdf(xp, x)
        ctx.save_for_backward(x, cdf)
        return x * cdf

    def backward(self, ctx, g):
        x, saved = ctx.saved
        xp = ctx.xp
        if self.approximate:
            # d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2)
            t = saved
            slope = fresh(xp, xp.square, x)
            slope *= 3 * _GELU_CUBIC
            slope += 1
            slope *= x
            slope *= 1 - t * t
            slope *= _SQRT_2_OVER_PI
            slope += 1
            slope += t
            slope *= 0.5
        else:
            # d/dx = Phi(x) + x phi(x), phi the standard normal density
            slope = fresh(xp, xp.square, x)
            slope *= -0.5
            xp.exp(slope, out=slope)
            slope *= x
            slope *= _INV_SQRT_2PI
            slope += saved
        slope *= g
        return (slope,)


def _check_axis(prim, axis, shape):
    """``axis`` checked against ``shape``; a 0-d tensor accepts 0 or -1 (its one element)."""
    normalize_axis(axis, max(len(shape), 1), prim.name, shape)
    return axis if shape else None


# Row-wise helpers (keepdims results). NumPy reduces a short contiguous last axis one row at a
# time, which is slow for many rows of a few columns (a (4096, 10) max takes ~20x longer than
# it needs to), so the last axis takes faster routes: sums and dot products go through matmul
# (BLAS), and the max of few columns reduces a transposed copy, running along rows instead.
_FEW_COLUMNS = 16


def along_max(xp, x, axis):
    """``max(x, axis, keepdims=True)``."""
    if x.ndim == 2 and axis in (1, -1) and x.shape[1] <= _FEW_COLUMNS and x.shape[0] > _FEW_COLUMNS:
        return xp.ascontiguousarray(x.T).max(axis=0)[:, None]
    return x.max(axis=axis, keepdims=True)


def along_sum(xp, x, axis):
    """``sum(x, axis, keepdims=True)`` for floating ``x``."""
    if x.ndim and axis in (x.ndim - 1, -1):
        return xp.matmul(x, xp.ones(x.shape[-1], x.dtype))[..., None]
    return x.sum(axis=axis, keepdims=True)


def along_dot(xp, a, b, axis):
    """``sum(a * b, axis, keepdims=True)`` for floating ``a`` and ``b`` of one shape."""
    if a.ndim and axis in (a.ndim - 1, -1):
        return xp.matmul(a[..., None, :], b[..., :, None])[..., 0]
    return (a * b).sum(axis=axis, keepdims=True)


def shifted(xp, x, axis):
    """``x - max(x)`` along ``axis``, in a new array (the usual guard before ``exp``)."""
    return xp.subtract(x, along_max(xp, x, axis), out=xp.empty_like(x))


class Softmax(Primitive):
    """``exp(x) / sum(exp(x))`` along ``axis`` (default the last), max-shifted for stability.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Softmax()(ms.Tensor([[0.0, 0.0]])).asnumpy().tolist()
    [[0.5, 0.5]]
    """

    def __init__(self, axis=-1):
        self.axis = axis

    def forward(self, ctx, x, axis=None):
        xp = ctx.xp
        axis = _check_axis(self, self.axis if axis is None else axis, x.shape)
        x = as_float(x)
        e = shifted(xp, x, axis)
        xp.exp(e, out=e)
        e /= along_sum(xp, e, axis)
        ctx.save_for_backward(e)
        ctx.axis = axis
        return e

    def backward(self, ctx, g):
        # dx = p * (g - sum(g * p))
        (p,) = ctx.saved
        xp = ctx.xp
        gx = xp.subtract(g, along_dot(xp, g, p, ctx.axis), out=xp.empty_like(p))
        gx *= p
        return (gx,)


class LogSoftmax(Primitive):
    """``x - log(sum(exp(x)))`` along ``axis`` (default the last), max-shifted for stability.

    The softmax probabilities come out of the forward for free and are kept for backward
    (``dx = g - p * sum(g)``) when a gradient is wanted.
    """

    def __init__(self, axis=-1):
        self.axis = axis

    def forward(self, ctx, x, axis=None):
        xp = ctx.xp
        axis = _check_axis(self, self.axis if axis is None else axis, x.shape)
        x = as_float(x)
        out = shifted(xp, x, axis)
        e = fresh(xp, xp.exp, out)
        total = along_sum(xp, e, axis)
        if ctx.needs_input_grad[0]:
            e /= total
            ctx.save_for_backward(e)
            ctx.axis = axis
        out -= xp.log(total)
        return out

    def backward(self, ctx, g):
        (p,) = ctx.saved
        gx = fresh(ctx.xp, ctx.xp.multiply, p, along_sum(ctx.xp, g, ctx.axis))
        ctx.xp.subtract(g, gx, out=gx)
        return (gx,)


# Functional forms share one instance per primitive, so they appear once in the placement report.
_relu, _sigmoid, _tanh = ReLU(), Sigmoid(), Tanh()
_gelu = {False: GeLU(False), True: GeLU(True)}
_gelu["none"], _gelu["tanh"] = _gelu[False], _gelu[True]
_softmax, _log_softmax = Softmax(), LogSoftmax()


def relu(x):
    """``max(x, 0)`` elementwise."""
    return _relu(x)


def sigmoid(x):
    """The logistic function elementwise, stable for large ``|x|``."""
    return _sigmoid(x)


def tanh(x):
    """Hyperbolic tangent elementwise."""
    return _tanh(x)


def gelu(x, approximate=False):
    """GeLU: exact (erf) form by default, the tanh form with ``approximate=True``/``"tanh"``."""
    if approximate not in _gelu:
        raise ValueError(f"gelu: approximate must be False/True or 'none'/'tanh', got {approximate!r}")
    return _gelu[approximate](x)


def softmax(x, axis=-1):
    """Softmax along ``axis``."""
    return _softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    """Log-softmax along ``axis``."""
    return _log_softmax(x, axis=axis)
