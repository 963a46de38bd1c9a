"""MindSpore's elementwise math functions (``ops.acos`` ... ``ops.xlogy``), each a primitive.

Each op is a small class made from two formulas written against ``xp``: the value, and the
local derivative(s) that backward multiplies by the incoming gradient. Rounding ops
(``floor``, ``round``, ...) have a zero gradient, as in PyTorch and MindSpore; comparisons,
logical and bitwise ops are not differentiable. Integer inputs of a floating op become float32.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> '%.4f' % ops.atan2(ms.Tensor([1.0]), ms.Tensor([1.0])).item()
'0.7854'
>>> (ms.Tensor([7, -7]) % ms.Tensor([3, 3])).asnumpy().tolist()
[1, 2]
"""
import math

import numpy as np

from .arithmetic import _float_wins
from .elementwise import as_float
from .primitive import Primitive
from .trigonometric import erf_array

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class _Unary(Primitive):
    """``fn(xp, x)``, with derivative ``dfn(xp, x, out)`` (None: not differentiable)."""
    fn = dfn = None
    floating = True

    def forward(self, ctx, x):
        if self.floating:
            x = as_float(x)
        out = ctx.xp.asarray(self.fn(ctx.xp, x))
        if self.floating and out.dtype != x.dtype:
            out = out.astype(x.dtype)
        ctx.save_for_backward(x, out)
        return out

    def backward(self, ctx, g):
        x, out = ctx.saved
        return (g * self.dfn(ctx.xp, x, out).astype(g.dtype, copy=False),)


class _Binary(Primitive):
    """``fn(xp, x, y)``, with derivatives ``dfn(xp, x, y, out) -> (dx, dy)``."""
    fn = dfn = None
    floating = True

    def forward(self, ctx, x, y):
        if self.floating:
            x, y = _float_wins(as_float(x), as_float(y))
        out = ctx.xp.asarray(self.fn(ctx.xp, x, y))
        ctx.save_for_backward(x, y, out)
        return out

    def backward(self, ctx, g):
        x, y, out = ctx.saved
        dx, dy = self.dfn(ctx.xp, x, y, out)
        shape = out.shape
        return (g * ctx.xp.broadcast_to(dx, shape).astype(g.dtype, copy=False),
                g * ctx.xp.broadcast_to(dy, shape).astype(g.dtype, copy=False))


def _op(base, name, fn, dfn=None, floating=True):
    attrs = {"fn": staticmethod(fn), "dfn": staticmethod(dfn) if dfn else None,
             "differentiable": dfn is not None, "floating": floating,
             "__doc__": f"MindSpore's ``{name}`` elementwise.", "__module__": __name__}
    return type(name, (base,), attrs)


def _zero(xp, x, out):
    return xp.zeros_like(x)


def _zeros2(xp, x, y, out):
    return xp.zeros_like(out), xp.zeros_like(out)


_UNARY = {
    "ACos": (lambda xp, x: xp.arccos(x), lambda xp, x, o: -1 / xp.sqrt(1 - x * x)),
    "Acosh": (lambda xp, x: xp.arccosh(x), lambda xp, x, o: 1 / xp.sqrt(x * x - 1)),
    "Asin": (lambda xp, x: xp.arcsin(x), lambda xp, x, o: 1 / xp.sqrt(1 - x * x)),
    "Asinh": (lambda xp, x: xp.arcsinh(x), lambda xp, x, o: 1 / xp.sqrt(x * x + 1)),
    "Atan": (lambda xp, x: xp.arctan(x), lambda xp, x, o: 1 / (1 + x * x)),
    "Atanh": (lambda xp, x: xp.arctanh(x), lambda xp, x, o: 1 / (1 - x * x)),
    "Sinh": (lambda xp, x: xp.sinh(x), lambda xp, x, o: xp.cosh(x)),
    "Cosh": (lambda xp, x: xp.cosh(x), lambda xp, x, o: xp.sinh(x)),
    "Tan": (lambda xp, x: xp.tan(x), lambda xp, x, o: 1 + o * o),
    "Erfc": (lambda xp, x: 1 - erf_array(xp, x),
             lambda xp, x, o: -_TWO_OVER_SQRT_PI * xp.exp(-x * x)),
    "Expm1": (lambda xp, x: xp.expm1(x), lambda xp, x, o: o + 1),
    "Exp2": (lambda xp, x: xp.exp2(x), lambda xp, x, o: o * _LN2),
    "Log2": (lambda xp, x: xp.log2(x), lambda xp, x, o: 1 / (x * _LN2)),
    "Log10": (lambda xp, x: xp.log10(x), lambda xp, x, o: 1 / (x * _LN10)),
    "Reciprocal": (lambda xp, x: 1 / x, lambda xp, x, o: -o * o),
    "Softsign": (lambda xp, x: x / (1 + xp.abs(x)), lambda xp, x, o: 1 / (1 + xp.abs(x)) ** 2),
    "Softplus": (lambda xp, x: xp.logaddexp(0, x), lambda xp, x, o: 1 - xp.exp(-o)),
    "Logit": (lambda xp, x: xp.log(x / (1 - x)), lambda xp, x, o: 1 / (x * (1 - x))),
    "Sinc": (lambda xp, x: xp.sinc(x),
             lambda xp, x, o: xp.where(x == 0, 0, (xp.cos(np.pi * x) - o) / xp.where(x == 0, 1, x))),
    "Deg2Rad": (lambda xp, x: x * (np.pi / 180), lambda xp, x, o: xp.full_like(x, np.pi / 180)),
    "Rad2Deg": (lambda xp, x: x * (180 / np.pi), lambda xp, x, o: xp.full_like(x, 180 / np.pi)),
    "Frac": (lambda xp, x: x - xp.trunc(x), lambda xp, x, o: xp.ones_like(x)),
    "Floor": (lambda xp, x: xp.floor(x), _zero),
    "Ceil": (lambda xp, x: xp.ceil(x), _zero),
    "Round": (lambda xp, x: xp.round(x), _zero),
    "Rint": (lambda xp, x: xp.rint(x), _zero),
    "Trunc": (lambda xp, x: xp.trunc(x), _zero),
    "Relu6": (lambda xp, x: xp.clip(x, 0, 6), lambda xp, x, o: ((x > 0) & (x < 6)).astype(x.dtype)),
    "HSigmoid": (lambda xp, x: xp.clip(x / 6 + 0.5, 0, 1),
                 lambda xp, x, o: ((x > -3) & (x < 3)).astype(x.dtype) / 6),
    "HSwish": (lambda xp, x: x * xp.clip(x / 6 + 0.5, 0, 1),
               lambda xp, x, o: xp.where(x < -3, 0, xp.where(x > 3, 1, x / 3 + 0.5))),
    "Silu": (lambda xp, x: x / (1 + xp.exp(-x)),
             lambda xp, x, o: (1 / (1 + xp.exp(-x))) * (1 + x * (1 - 1 / (1 + xp.exp(-x))))),
    "LogSigmoid": (lambda xp, x: -xp.logaddexp(0, -x), lambda xp, x, o: 1 / (1 + xp.exp(x))),
    "Mish": (lambda xp, x: x * xp.tanh(xp.logaddexp(0, x)),
             lambda xp, x, o: xp.tanh(xp.logaddexp(0, x))
             + x * (1 - xp.tanh(xp.logaddexp(0, x)) ** 2) / (1 + xp.exp(-x))),
    "TanhShrink": (lambda xp, x: x - xp.tanh(x), lambda xp, x, o: xp.tanh(x) ** 2),
    "SeLU": (lambda xp, x: 1.0507009873554805 * xp.where(x > 0, x, 1.6732632423543772 * xp.expm1(x)),
             lambda xp, x, o: 1.0507009873554805 * xp.where(x > 0, 1, 1.6732632423543772 * xp.exp(x))),
    "FastGeLU": (lambda xp, x: x / (1 + xp.exp(-1.702 * x)),
                 lambda xp, x, o: (1 / (1 + xp.exp(-1.702 * x)))
                 * (1 + 1.702 * x * (1 - 1 / (1 + xp.exp(-1.702 * x))))),
}
_NONDIFF_UNARY = {    # boolean or integer results
    "IsNan": lambda xp, x: xp.isnan(x), "IsInf": lambda xp, x: xp.isinf(x),
    "IsFinite": lambda xp, x: xp.isfinite(x), "IsNegInf": lambda xp, x: xp.isneginf(x),
    "IsPosInf": lambda xp, x: xp.isposinf(x), "LogicalNot": lambda xp, x: xp.logical_not(x),
    "Invert": lambda xp, x: xp.invert(x),
    "PopulationCount": lambda xp, x: np.array([bin(int(v) & 0xFFFFFFFFFFFFFFFF).count("1")
                                               for v in np.asarray(x).ravel()],
                                              dtype=np.uint8).reshape(x.shape),
}


def _xlogy(xp, x, y):
    return xp.where(x == 0, 0, x * xp.log(xp.where(x == 0, 1, y)))


def _xdivy(xp, x, y):
    return xp.where(x == 0, 0, x / xp.where(x == 0, 1, y))


def _div_no_nan(xp, x, y):
    return xp.where(y == 0, 0, x / xp.where(y == 0, 1, y))


def _floor_mod_grad(xp, x, y, o):
    return xp.ones_like(o), -xp.floor(x / y)


def _trunc_mod_grad(xp, x, y, o):
    return xp.ones_like(o), -xp.trunc(x / y)


_BINARY = {
    "Atan2": (lambda xp, x, y: xp.arctan2(x, y),
              lambda xp, x, y, o: (y / (x * x + y * y), -x / (x * x + y * y))),
    "Hypot": (lambda xp, x, y: xp.hypot(x, y), lambda xp, x, y, o: (x / o, y / o)),
    "Xlogy": (_xlogy, lambda xp, x, y, o: (xp.where(x == 0, 0, xp.log(xp.where(x == 0, 1, y))),
                                           _xdivy(xp, x, y))),
    "Xdivy": (_xdivy, lambda xp, x, y, o: (_xdivy(xp, xp.ones_like(x) * (x != 0), y),
                                           -_xdivy(xp, x, y * y))),
    "DivNoNan": (_div_no_nan, lambda xp, x, y, o: (_div_no_nan(xp, xp.ones_like(o), y),
                                                    -_div_no_nan(xp, o, y))),
    "MulNoNan": (lambda xp, x, y: xp.where(y == 0, 0, x * y),
                 lambda xp, x, y, o: (xp.where(y == 0, 0, y), xp.where(y == 0, 0, x))),
    "LogAddExp": (lambda xp, x, y: xp.logaddexp(x, y),
                  lambda xp, x, y, o: (xp.exp(x - o), xp.exp(y - o))),
    "LogAddExp2": (lambda xp, x, y: xp.logaddexp2(x, y),
                   lambda xp, x, y, o: (xp.exp2(x - o), xp.exp2(y - o))),
    "SquaredDifference": (lambda xp, x, y: (x - y) ** 2,
                          lambda xp, x, y, o: (2 * (x - y), -2 * (x - y))),
    "Fmod": (lambda xp, x, y: xp.fmod(x, y), _trunc_mod_grad),
    "Copysign": (lambda xp, x, y: xp.copysign(x, y),
                 lambda xp, x, y, o: (xp.sign(x) * xp.sign(o), xp.zeros_like(y))),
}
# integer-preserving arithmetic: floor division and modulo keep the operands' dtype
_INT_BINARY = {
    "FloorDiv": (lambda xp, x, y: xp.floor_divide(x, y), _zeros2),
    "FloorMod": (lambda xp, x, y: xp.mod(x, y), _floor_mod_grad),
    "TruncateDiv": (lambda xp, x, y: xp.trunc(x / y).astype(np.result_type(x, y)), _zeros2),
    "TruncateMod": (lambda xp, x, y: xp.fmod(x, y), _trunc_mod_grad),
}
_NONDIFF_BINARY = {
    "BitwiseAnd": lambda xp, x, y: xp.bitwise_and(x, y),
    "BitwiseOr": lambda xp, x, y: xp.bitwise_or(x, y),
    "BitwiseXor": lambda xp, x, y: xp.bitwise_xor(x, y),
    "LeftShift": lambda xp, x, y: xp.left_shift(x, y),
    "RightShift": lambda xp, x, y: xp.right_shift(x, y),
    "LogicalAnd": lambda xp, x, y: xp.logical_and(x, y),
    "LogicalOr": lambda xp, x, y: xp.logical_or(x, y),
    "LogicalXor": lambda xp, x, y: xp.logical_xor(x, y),
    "Gcd": lambda xp, x, y: xp.gcd(x, y), "Lcm": lambda xp, x, y: xp.lcm(x, y),
    "Heaviside": lambda xp, x, y: xp.heaviside(x, y),
}

_CLASSES = {}
for _name, (_fn, _dfn) in _UNARY.items():
    _CLASSES[_name] = _op(_Unary, _name, _fn, _dfn)
for _name, _fn in _NONDIFF_UNARY.items():
    _CLASSES[_name] = _op(_Unary, _name, _fn, floating=False)
for _name, (_fn, _dfn) in _BINARY.items():
    _CLASSES[_name] = _op(_Binary, _name, _fn, _dfn)
for _name, (_fn, _dfn) in _INT_BINARY.items():
    _CLASSES[_name] = _op(_Binary, _name, _fn, _dfn, floating=False)
for _name, _fn in _NONDIFF_BINARY.items():
    _CLASSES[_name] = _op(_Binary, _name, _fn, floating=False)
_INSTANCES = {name: cls() for name, cls in _CLASSES.items()}
globals().update(_CLASSES)

# functional names (MindSpore's, plus the PyTorch-style aliases MindSpore 2.x also has)
_FUNCTIONS = {
    "acos": "ACos", "arccos": "ACos", "acosh": "Acosh", "arccosh": "Acosh", "asin": "Asin",
    "arcsin": "Asin", "asinh": "Asinh", "arcsinh": "Asinh", "atan": "Atan", "arctan": "Atan",
    "atanh": "Atanh", "arctanh": "Atanh", "sinh": "Sinh", "cosh": "Cosh", "tan": "Tan",
    "erfc": "Erfc", "expm1": "Expm1", "exp2": "Exp2", "log2": "Log2", "log10": "Log10",
    "reciprocal": "Reciprocal", "inv": "Reciprocal", "softsign": "Softsign",
    "softplus": "Softplus", "logit": "Logit", "sinc": "Sinc", "deg2rad": "Deg2Rad",
    "rad2deg": "Rad2Deg", "frac": "Frac", "floor": "Floor", "ceil": "Ceil", "round": "Round",
    "rint": "Rint", "trunc": "Trunc", "fix": "Trunc", "relu6": "Relu6", "hardsigmoid": "HSigmoid",
    "hardswish": "HSwish", "silu": "Silu", "logsigmoid": "LogSigmoid", "mish": "Mish",
    "tanhshrink": "TanhShrink", "selu": "SeLU", "fast_gelu": "FastGeLU", "isnan": "IsNan",
    "isinf": "IsInf", "isfinite": "IsFinite", "isneginf": "IsNegInf", "isposinf": "IsPosInf",
    "logical_not": "LogicalNot", "invert": "Invert", "bitwise_not": "Invert",
    "population_count": "PopulationCount", "atan2": "Atan2", "arctan2": "Atan2",
    "hypot": "Hypot", "xlogy": "Xlogy", "xdivy": "Xdivy", "div_no_nan": "DivNoNan",
    "mul_no_nan": "MulNoNan", "logaddexp": "LogAddExp", "logaddexp2": "LogAddExp2",
    "squared_difference": "SquaredDifference", "fmod": "Fmod", "copysign": "Copysign",
    "floor_div": "FloorDiv", "floor_divide": "FloorDiv", "floor_mod": "FloorMod",
    "remainder": "FloorMod", "truncate_div": "TruncateDiv", "truncate_mod": "TruncateMod",
    "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor",
    "bitwise_left_shift": "LeftShift", "bitwise_right_shift": "RightShift",
    "logical_and": "LogicalAnd", "logical_or": "LogicalOr", "logical_xor": "LogicalXor",
    "gcd": "Gcd", "lcm": "Lcm", "heaviside": "Heaviside",
}


def _functional(fname, prim):
    def fn(*args):
        return prim(*args)
    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = f"``{fname}`` elementwise (primitive ``{type(prim).__name__}``)."
    return fn


for _fname, _cls in _FUNCTIONS.items():
    globals()[_fname] = _functional(_fname, _INSTANCES[_cls])
# MindSpore's older class names
Inv, Mod = _CLASSES["Reciprocal"], _CLASSES["TruncateMod"]

__all__ = sorted(_CLASSES) + sorted(_FUNCTIONS) + ["Inv", "Mod"]
