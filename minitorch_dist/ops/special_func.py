"""Bessel functions (``ops.bessel_j0`` ... ``ops.bessel_k1e``), ``unique`` and ``intopk``.

The Bessel values come from SciPy (``scipy.special``, read only when one is called; without
SciPy the call says so); their derivatives are the standard recurrences
(``j0' = -j1``, ``i1' = i0 - i1 / x``, ...), so each is differentiable.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> round(ops.bessel_j0(ms.Tensor([1.0])).item(), 5)
0.7652
"""
import numpy as np

from .array_func import _F, _constant, _host
from .math_func import _op, _Unary
from .selection import Unique

__all__ = ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "bessel_j0", "bessel_j1",
           "bessel_k0", "bessel_k0e", "bessel_k1", "bessel_k1e", "bessel_y0", "bessel_y1",
           "unique", "intopk", "lgamma", "digamma", "erfinv", "igamma", "igammac", "i0",
           "nan_to_num", "float_power", "ldexp", "signbit", "sgn"]


def _special(name):
    def value(xp, x):
        try:
            from scipy import special
        except ImportError:
            raise ImportError(f"ops.bessel_{name} needs SciPy (pip install scipy)") from None
        return getattr(special, name)(np.asarray(x)).astype(x.dtype)
    return value


_V = {n: _special(n) for n in ("i0", "i0e", "i1", "i1e", "j0", "j1", "y0", "y1", "k0", "k0e",
                               "k1", "k1e")}
_DERIV = {
    "i0": lambda xp, x, o: _V["i1"](xp, x),
    "i0e": lambda xp, x, o: _V["i1e"](xp, x) - xp.sign(x) * o,
    "i1": lambda xp, x, o: _V["i0"](xp, x) - o / x,
    "i1e": lambda xp, x, o: _V["i0e"](xp, x) - o * (xp.sign(x) + 1 / x),
    "j0": lambda xp, x, o: -_V["j1"](xp, x),
    "j1": lambda xp, x, o: _V["j0"](xp, x) - o / x,
    "y0": lambda xp, x, o: -_V["y1"](xp, x),
    "y1": lambda xp, x, o: _V["y0"](xp, x) - o / x,
    "k0": lambda xp, x, o: -_V["k1"](xp, x),
    "k0e": lambda xp, x, o: o - _V["k1e"](xp, x),
    "k1": lambda xp, x, o: -_V["k0"](xp, x) - o / x,
    "k1e": lambda xp, x, o: o - _V["k0e"](xp, x) - o / x,
}
_PRIMS = {n: _op(_Unary, "Bessel" + n.upper(), _V[n], _DERIV[n])() for n in _V}
_V.update({n: _special(n) for n in ("gammaln", "psi", "erfinv")})
_Lgamma = _op(_Unary, "Lgamma", _V["gammaln"], lambda xp, x, o: _V["psi"](xp, x))()
_Digamma = _op(_Unary, "Digamma", _V["psi"],
               lambda xp, x, o: _polygamma1(x))()
_Erfinv = _op(_Unary, "Erfinv", _V["erfinv"],
              lambda xp, x, o: (np.sqrt(np.pi) / 2) * xp.exp(o * o))()


def _polygamma1(x):
    from scipy import special
    return special.polygamma(1, np.asarray(x)).astype(x.dtype)


def lgamma(input):   # noqa: A002
    """log |Gamma(x)| elementwise; the gradient is digamma."""
    return _Lgamma(input)


def digamma(input):   # noqa: A002
    return _Digamma(input)


def erfinv(input):   # noqa: A002
    return _Erfinv(input)


def _host_special(name, *tensors):
    from scipy import special
    arrays = [_host(t) for t in tensors]
    return _constant(getattr(special, name)(*arrays).astype(arrays[0].dtype), tensors[0])


def igamma(input, other):   # noqa: A002
    """The regularised lower incomplete gamma function (not differentiable here)."""
    return _host_special("gammainc", input, other)


def igammac(input, other):   # noqa: A002
    return _host_special("gammaincc", input, other)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):   # noqa: A002
    F = _F()
    big = np.finfo(input.dtype).max
    out = F.select(F.isnan(input), F.full_like(input, nan), input)
    out = F.select(F.isposinf(out), F.full_like(out, big if posinf is None else posinf), out)
    return F.select(F.isneginf(out), F.full_like(out, -big if neginf is None else neginf), out)


def float_power(input, exponent):   # noqa: A002
    F = _F()
    return F.pow(F.cast(input, np.float64), exponent)


def ldexp(x, other):
    F = _F()
    return x * F.pow(2.0, F.cast(other, x.dtype if x.dtype.kind == "f" else np.float32))


def signbit(input):   # noqa: A002
    return _constant(np.signbit(_host(input)), input)


def sgn(input):   # noqa: A002
    F = _F()
    return F.sign(input)


def _bessel(name):
    prim = _PRIMS[name]

    def fn(x):
        return prim(x)
    fn.__name__ = fn.__qualname__ = "bessel_" + name
    fn.__doc__ = f"The Bessel function ``{name}`` elementwise (SciPy's ``special.{name}``)."
    return fn


for _n in _PRIMS:
    globals()["bessel_" + _n] = _bessel(_n)
i0 = globals()["bessel_i0"]


def unique(input):   # noqa: A002
    """(unique values in order of first appearance, the index of each element in them)."""
    return Unique()(input)


def intopk(x1, x2, k):
    """Whether each row's target ``x2[i]`` is among the ``k`` largest of ``x1[i]``."""
    scores, targets = _host(x1), _host(x2).astype(np.int64)
    target_scores = scores[np.arange(len(targets)), targets]
    better = (scores > target_scores[:, None]).sum(1)
    return _constant(better < k, x1)
