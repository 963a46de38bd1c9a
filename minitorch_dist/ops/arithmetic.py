"""Binary arithmetic and comparisons with NumPy broadcasting.

Backward returns gradients of the broadcast shape; the engine sums them back down.

Dtypes follow NumPy, except where an integer (or bool) operand meets a floating one: then
the result keeps the floating operand's dtype, as in PyTorch and MindSpore, so
``int_tensor * 0.5`` is float32 rather than NumPy's float64. Dividing two integer tensors
gives float32 for the same reason.
"""
import numpy as np

from .. import kernels
from ..backend import half
from ..backend.dtypes import DEFAULT_FLOAT
from .primitive import Primitive

__all__ = ["Add", "BiasAdd", "Sub", "Mul", "Div", "Pow", "Neg", "Maximum", "Minimum",
           "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
           "add", "sub", "mul", "div", "pow", "neg", "maximum", "minimum",
           "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


def _float_wins(x, y):
    """Cast an integer/bool operand to the dtype of a floating one (no-op when kinds agree)."""
    if x is None or y is None:
        raise TypeError("expected tensors or numbers as operands, got None")
    fx, fy = x.dtype.kind == "f", y.dtype.kind == "f"
    if fx == fy:
        return x, y
    return (x, y.astype(x.dtype)) if fx else (x.astype(y.dtype), y)


def _plus(x, y):
    return x + y


def _times(x, y):
    return x * y


class Add(Primitive):
    def forward(self, ctx, x, y):
        x, y = _float_wins(x, y)
        return half.elementwise(_plus, x, y)

    def backward(self, ctx, g):
        return g, g


class BiasAdd(Primitive):
    """``x + bias`` along the channel axis: the last axis for "NHWC" or a 2-D ``x``, axis 1
    for "NCHW" (MindSpore's default) and "NCDHW".

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.BiasAdd()(ms.Tensor([[[[0.0]], [[0.0]]]]), ms.Tensor([1.0, 2.0])).asnumpy().ravel().tolist()
    [1.0, 2.0]
    """

    def __init__(self, data_format="NCHW"):
        if data_format not in ("NCHW", "NHWC", "NCDHW"):
            raise ValueError(f"BiasAdd: data_format must be 'NCHW', 'NHWC' or 'NCDHW', got {data_format!r}")
        self.data_format = data_format

    def _axis(self, x):
        return x.ndim - 1 if self.data_format == "NHWC" or x.ndim == 2 else 1

    def forward(self, ctx, x, bias):
        if x.ndim < 2 or bias.ndim != 1 or bias.shape[0] != x.shape[self._axis(x)]:
            raise ValueError(f"{self.name}: bias must be 1-D with one entry per channel of x "
                             f"(axis {self._axis(x) if x.ndim >= 2 else '?'} of shape {tuple(x.shape)}), "
                             f"got shape {tuple(bias.shape)}")
        shape = [1] * x.ndim
        ctx.axis = self._axis(x)
        shape[ctx.axis] = bias.shape[0]
        return half.elementwise(_plus, x, bias.reshape(shape))

    def backward(self, ctx, g):
        others = tuple(a for a in range(g.ndim) if a != ctx.axis)
        if not ctx.needs_input_grad[1]:
            return g, None
        if g.ndim == 2 and type(g) is np.ndarray and g.dtype.char in "fd":
            return g, kernels.sum_rows(g)       # one pass in C++ where built, same bits
        return g, half.elementwise(lambda a: a.sum(axis=others), g)


class Sub(Primitive):
    def forward(self, ctx, x, y):
        x, y = _float_wins(x, y)
        return x - y

    def backward(self, ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Primitive):
    def forward(self, ctx, x, y):
        x, y = _float_wins(x, y)
        ctx.save_for_backward(x, y)
        return half.elementwise(_times, x, y)

    def backward(self, ctx, g):
        x, y = ctx.saved
        return (half.elementwise(_times, g, y) if ctx.needs_input_grad[0] else None,
                half.elementwise(_times, g, x) if ctx.needs_input_grad[1] else None)


class Div(Primitive):
    def forward(self, ctx, x, y):
        if x.dtype.kind != "f" and y.dtype.kind != "f":
            x = x.astype(DEFAULT_FLOAT)   # true division of integers is float32, not float64
        x, y = _float_wins(x, y)
        out = x / y
        ctx.save_for_backward(y, out)
        return out

    def backward(self, ctx, g):
        y, out = ctx.saved
        gx = g / y
        return gx, (-gx * out if ctx.needs_input_grad[1] else None)


class Pow(Primitive):
    def forward(self, ctx, x, y):
        x, y = _float_wins(x, y)
        out = x ** y
        ctx.save_for_backward(x, y, out)
        return out

    def backward(self, ctx, g):
        x, y, out = ctx.saved
        xp = ctx.xp
        gx = g * y * x ** (y - 1) if ctx.needs_input_grad[0] else None
        gy = None
        if ctx.needs_input_grad[1]:
            # d(x^y)/dy = x^y log x, taken as 0 where x == 0 (the limit for y > 0)
            safe = xp.where(x > 0, x, 1)
            gy = g * out * xp.log(safe)
        return gx, gy


class Neg(Primitive):
    def forward(self, ctx, x):
        return -x

    def backward(self, ctx, g):
        return (-g,)


class _Select(Primitive):
    """Maximum/minimum: the gradient goes to the chosen input; ties split it in half."""

    def forward(self, ctx, x, y):
        x, y = _float_wins(x, y)
        out = self.pick(ctx.xp, x, y)
        ctx.save_for_backward(x, y, out)
        return out

    def backward(self, ctx, g):
        x, y, out = ctx.saved
        wx = (x == out).astype(g.dtype)
        wy = (y == out).astype(g.dtype)
        share = wx + wy  # 2 on ties
        return g * wx / share, g * wy / share


class Maximum(_Select):
    @staticmethod
    def pick(xp, x, y):
        return xp.maximum(x, y)


class Minimum(_Select):
    @staticmethod
    def pick(xp, x, y):
        return xp.minimum(x, y)


class _Compare(Primitive):
    differentiable = False


class Equal(_Compare):
    def forward(self, ctx, x, y): return x == y


class NotEqual(_Compare):
    def forward(self, ctx, x, y): return x != y


class Less(_Compare):
    def forward(self, ctx, x, y): return x < y


class LessEqual(_Compare):
    def forward(self, ctx, x, y): return x <= y


class Greater(_Compare):
    def forward(self, ctx, x, y): return x > y


class GreaterEqual(_Compare):
    def forward(self, ctx, x, y): return x >= y


# Functional forms share one instance per primitive, so they appear once in the placement report.
_add, _sub, _mul, _div, _pow, _neg = Add(), Sub(), Mul(), Div(), Pow(), Neg()
_maximum, _minimum = Maximum(), Minimum()
_eq, _ne, _lt, _le, _gt, _ge = Equal(), NotEqual(), Less(), LessEqual(), Greater(), GreaterEqual()


def add(x, y): return _add(x, y)
def sub(x, y): return _sub(x, y)
def mul(x, y): return _mul(x, y)
def div(x, y): return _div(x, y)
def pow(x, y): return _pow(x, y)  # noqa: A001 - mirrors the operator's name
def neg(x): return _neg(x)
def maximum(x, y): return _maximum(x, y)
def minimum(x, y): return _minimum(x, y)
def equal(x, y): return _eq(x, y)
def not_equal(x, y): return _ne(x, y)
def less(x, y): return _lt(x, y)
def less_equal(x, y): return _le(x, y)
def greater(x, y): return _gt(x, y)
def greater_equal(x, y): return _ge(x, y)
