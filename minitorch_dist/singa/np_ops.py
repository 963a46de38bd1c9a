"""SINGA's element-wise autograd operators, each an ``autograd.Operator`` on arrays.

Every class computes SINGA's forward and backward on NumPy (or CuPy) arrays and runs as
a core primitive (through :class:`~minitorch_dist.singa.operator.Operator`), so the core
tape, ``autograd.backward`` and the optimizers see it like any other primitive. Called
directly, ``op.backward(dy)`` takes arrays or ``CTensor``\\s and returns ``CTensor``\\s,
as SINGA's ``y.creator.backward(dy)`` does. Operators without a gradient in SINGA
(comparisons, logic) raise ``AssertionError`` from ``backward``, as SINGA's do.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> y = autograd.cos(tensor.from_numpy(np.zeros((2,), np.float32)))
>>> tensor.to_numpy(y).tolist(), np.asarray(y.creator.backward(np.ones(2))).tolist()
([1.0, 1.0], [-0.0, -0.0])
"""
import math

import numpy as np

from .ctensor import as_ctensor, raw
from .operator import Operator

__all__ = ["NumpyOp", "unbroadcast", "xp_of"]


def xp_of(a):
    """NumPy, or CuPy for a CuPy array."""
    if isinstance(a, np.ndarray) or np.isscalar(a):
        return np
    import cupy
    return cupy


def unbroadcast(g, shape):
    """Sum ``g`` down to ``shape`` (the backward of NumPy broadcasting)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


class NumpyOp(Operator):
    """Base of the built-in operators: subclasses define ``_forward(*arrays)`` and
    ``_backward(*dys)``; ``forward``/``backward`` accept CTensors too."""

    def forward(self, *xs):
        return self._forward(*[raw(x) for x in xs])

    def backward(self, *dys):
        dxs = self._backward(*[raw(d) for d in dys])
        if isinstance(dxs, (tuple, list)):
            return tuple(as_ctensor(d) for d in dxs)
        return as_ctensor(dxs)

    def _backward(self, *dys):
        raise AssertionError(f"no backward function for {type(self).__name__} "
                             "(SINGA's operator has none)")


class _Unary(NumpyOp):
    """``y = f(x)``, ``dx = dy * g(x, y)``."""

    def _forward(self, x):
        self.x = x
        self.y = self._f(x)
        return self.y

    def _backward(self, dy):
        return (dy * self._g(self.x, self.y)).astype(self.x.dtype, copy=False)


def _unary(name, f, g, doc):
    cls = type(name, (_Unary,), {"_f": staticmethod(f), "_g": staticmethod(g),
                                 "__doc__": f"SINGA's ``{name}``: {doc}.",
                                 "__module__": "minitorch_dist.singa.autograd"})
    return cls


def _sigmoid(x):
    return 1.0 / (1.0 + xp_of(x).exp(-x))


def _erf(x):
    xp = xp_of(x)
    if xp is np:
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    import cupyx.scipy.special as special
    return special.erf(x)


def _zero(x, y):
    return x * 0


UNARY = {
    "Cos": (lambda x: np.cos(x), lambda x, y: -np.sin(x), "cos(x)"),
    "Cosh": (lambda x: np.cosh(x), lambda x, y: np.sinh(x), "cosh(x)"),
    "Acos": (lambda x: np.arccos(x), lambda x, y: -1.0 / np.sqrt(1 - x * x), "arccos(x)"),
    "Acosh": (lambda x: np.arccosh(x), lambda x, y: 1.0 / np.sqrt(x * x - 1), "arccosh(x)"),
    "Sin": (lambda x: np.sin(x), lambda x, y: np.cos(x), "sin(x)"),
    "Sinh": (lambda x: np.sinh(x), lambda x, y: np.cosh(x), "sinh(x)"),
    "Asin": (lambda x: np.arcsin(x), lambda x, y: 1.0 / np.sqrt(1 - x * x), "arcsin(x)"),
    "Asinh": (lambda x: np.arcsinh(x), lambda x, y: 1.0 / np.sqrt(x * x + 1), "arcsinh(x)"),
    "Tan": (lambda x: np.tan(x), lambda x, y: 1.0 / np.cos(x) ** 2, "tan(x)"),
    "Atan": (lambda x: np.arctan(x), lambda x, y: 1.0 / (1 + x * x), "arctan(x)"),
    "Atanh": (lambda x: np.arctanh(x), lambda x, y: 1.0 / (1 - x * x), "arctanh(x)"),
    "Sign": (lambda x: np.sign(x), _zero, "sign(x); its gradient is 0"),
    "SoftSign": (lambda x: x / (1 + np.abs(x)), lambda x, y: 1.0 / (1 + np.abs(x)) ** 2,
                 "x / (1 + |x|)"),
    "SoftPlus": (lambda x: np.log(np.exp(x) + 1), lambda x, y: _sigmoid(x),
                 "log(exp(x) + 1)"),
    "Erf": (_erf, lambda x, y: 2.0 / math.sqrt(math.pi) * np.exp(-x * x), "erf(x)"),
    "Ceil": (lambda x: np.ceil(x), _zero, "ceil(x); its gradient is 0"),
    "Floor": (lambda x: np.floor(x), _zero, "floor(x); its gradient is 0"),
    "Round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), _zero,
              "round half away from zero; its gradient is 0"),
    "Rounde": (lambda x: np.round(x), _zero, "round half to even; its gradient is 0"),
}
OPERATORS = {name: _unary(name, *spec) for name, spec in UNARY.items()}


class HardSigmoid(NumpyOp):
    """SINGA's ``HardSigmoid(alpha=0.2, gamma=0.5)``: ``max(0, min(1, alpha x + gamma))``."""

    def __init__(self, alpha=0.2, gamma=0.5):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def _forward(self, x):
        self.z = self.alpha * x + self.gamma
        return np.clip(self.z, 0.0, 1.0).astype(x.dtype)

    def _backward(self, dy):
        mask = (self.z > 0) & (self.z < 1)
        return (dy * mask * self.alpha).astype(dy.dtype)


class Elu(NumpyOp):
    """SINGA's ``Elu(alpha=1)``: ``x`` where positive, ``alpha (exp(x) - 1)`` elsewhere."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = alpha

    def _forward(self, x):
        self.x = x
        return np.where(x > 0, x, self.alpha * (np.exp(x) - 1)).astype(x.dtype)

    def _backward(self, dy):
        return (dy * np.where(self.x > 0, 1.0, self.alpha * np.exp(self.x))).astype(dy.dtype)


class SeLU(NumpyOp):
    """SINGA's ``SeLU(alpha=1.67326, gamma=1.0507)``: ``gamma * elu_alpha(x)``."""

    def __init__(self, alpha=1.67326, gamma=1.0507):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def _forward(self, x):
        self.x = x
        neg = self.alpha * (np.exp(x) - 1)
        return (self.gamma * np.where(x > 0, x, neg)).astype(x.dtype)

    def _backward(self, dy):
        slope = np.where(self.x > 0, 1.0, self.alpha * np.exp(self.x))
        return (dy * self.gamma * slope).astype(dy.dtype)


class Clip(NumpyOp):
    """SINGA's ``Clip(min, max)``; the gradient passes where ``min <= x <= max``."""

    def __init__(self, min=None, max=None):  # noqa: A002 - SINGA's names
        super().__init__()
        self.min, self.max = min, max

    def _forward(self, x):
        self.mask = np.ones(x.shape, x.dtype)
        if self.min is not None:
            self.mask *= x >= self.min
            x = np.maximum(x, np.asarray(self.min, x.dtype))
        if self.max is not None:
            self.mask *= x <= self.max
            x = np.minimum(x, np.asarray(self.max, x.dtype))
        return x

    def _backward(self, dy):
        return dy * self.mask


OPERATORS.update({"HardSigmoid": HardSigmoid, "Elu": Elu, "SeLU": SeLU, "Clip": Clip})
