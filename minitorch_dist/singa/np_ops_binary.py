"""SINGA's operators of two or more inputs (NumPy broadcasting): comparisons, logic,
``PRelu``, ``Max``/``Min``, ``Where``, ``CosSim`` and ``RankingLoss``.

Comparisons and logic return float32 0/1 tensors, as SINGA's ``LTFloat``-based kernels
do, and have no gradient (``AssertionError``, as in SINGA).

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> a = tensor.from_numpy(np.array([1.0, -2.0], np.float32))
>>> b = tensor.from_numpy(np.array([0.0, 3.0], np.float32))
>>> tensor.to_numpy(autograd.max(a, b)).tolist(), tensor.to_numpy(autograd.less(a, b)).tolist()
([1.0, 3.0], [0.0, 1.0])
"""
import numpy as np

from .np_ops import NumpyOp, unbroadcast

__all__ = ["OPERATORS"]


class _Compare(NumpyOp):
    _fn = None

    def _forward(self, x, y):
        return type(self)._fn(x, y).astype(np.float32)


def _compare(name, fn):
    return type(name, (_Compare,), {"_fn": staticmethod(fn), "__module__":
                                    "minitorch_dist.singa.autograd",
                                    "__doc__": f"SINGA's ``{name}``: 0/1 float32 result, "
                                               "no gradient."})


OPERATORS = {
    "Less": _compare("Less", lambda x, y: x < y),
    "Greater": _compare("Greater", lambda x, y: x > y),
    "Equal": _compare("Equal", lambda x, y: x == y),
    "And": _compare("And", lambda x, y: (x != 0) & (y != 0)),
    "Or": _compare("Or", lambda x, y: (x != 0) | (y != 0)),
    "Xor": _compare("Xor", lambda x, y: (x != 0) ^ (y != 0)),
}


class Not(NumpyOp):
    """SINGA's ``Not``: 1 where ``x`` is 0."""

    def _forward(self, x):
        return (x == 0).astype(np.float32)


class PRelu(NumpyOp):
    """SINGA's ``PRelu``: ``x`` where positive, ``slope * x`` elsewhere (``slope``
    broadcasts)."""

    def _forward(self, x, slope):
        self.x, self.slope = x, slope
        return np.where(x > 0, x, x * slope).astype(x.dtype)

    def _backward(self, dy):
        pos = self.x > 0
        dx = dy * np.where(pos, 1, self.slope)
        dslope = dy * np.where(pos, 0, self.x)
        return (unbroadcast(dx, self.x.shape).astype(self.x.dtype),
                unbroadcast(dslope, self.slope.shape).astype(self.slope.dtype))


class _Extreme(NumpyOp):
    """Element-wise max/min of any number of inputs; a tie goes to the earlier input."""

    _better = None

    def _forward(self, *xs):
        if not xs:
            raise AssertionError(f"{type(self).__name__} needs at least one input")
        self.shapes = [x.shape for x in xs]
        best = xs[0]
        self.winner = np.zeros(np.broadcast_shapes(*self.shapes), np.int32)
        for i, x in enumerate(xs[1:], 1):
            take = type(self)._better(x, best)
            self.winner = np.where(take, i, self.winner)
            best = np.where(take, x, best)
        return np.asarray(best + np.zeros(self.winner.shape, best.dtype))

    def _backward(self, dy):
        grads = tuple(unbroadcast(dy * (self.winner == i), s).astype(dy.dtype)
                      for i, s in enumerate(self.shapes))
        return grads[0] if len(grads) == 1 else grads


class Max(_Extreme):
    """SINGA's ``Max(*xs)``."""
    _better = staticmethod(lambda x, best: x > best)


class Min(_Extreme):
    """SINGA's ``Min(*xs)``."""
    _better = staticmethod(lambda x, best: x < best)


class Where(NumpyOp):
    """SINGA's ``Where(condition)(a, b)``: ``a`` where the condition holds, else ``b``."""

    def __init__(self, condition):
        super().__init__()
        self.condition = np.asarray(condition).astype(bool)

    def _forward(self, a, b):
        self.shapes = (a.shape, b.shape)
        dtype = np.float32 if (a.dtype.kind in "iu" or b.dtype.kind in "iu") else a.dtype
        return np.where(self.condition, a, b).astype(dtype)

    def _backward(self, dy):
        return (unbroadcast(dy * self.condition, self.shapes[0]),
                unbroadcast(dy * ~self.condition, self.shapes[1]))


class CosSim(NumpyOp):
    """SINGA's ``CosSim``: the cosine similarity of each row pair of ``a`` and ``b``."""

    def _forward(self, a, b):
        self.a, self.b = a, b
        self.an = np.sqrt((a * a).sum(axis=1))
        self.bn = np.sqrt((b * b).sum(axis=1))
        self.y = ((a * b).sum(axis=1) / (self.an * self.bn)).astype(a.dtype)
        return self.y

    def _backward(self, dy):
        ab = (self.an * self.bn)[:, None]
        y = self.y[:, None]
        da = self.b / ab - y * self.a / (self.an ** 2)[:, None]
        db = self.a / ab - y * self.b / (self.bn ** 2)[:, None]
        return (dy[:, None] * da).astype(dy.dtype), (dy[:, None] * db).astype(dy.dtype)


class RankingLoss(NumpyOp):
    """SINGA's ``RankingLoss(M=0.2)(pos, neg)``: mean of ``max(0, M - (pos - neg))``."""

    def __init__(self, M=0.2):
        super().__init__()
        self.M = M

    def _forward(self, pos, neg):
        self.shapes = (pos.shape, neg.shape)
        margin = self.M - (pos - neg)
        self.mask = (margin > 0).astype(pos.dtype)
        return np.asarray([np.maximum(margin, 0).mean()], pos.dtype)

    def _backward(self, dy):
        g = self.mask * (np.asarray(dy).reshape(-1)[0] / self.mask.size)
        return -unbroadcast(g, self.shapes[0]), unbroadcast(g, self.shapes[1])


class MeanSquareError(NumpyOp):
    """SINGA's ``MeanSquareError(t)(x)``: ``sum((x - t)^2) / x.size`` as shape ``(1,)``;
    ``t`` broadcasts against ``x`` as in SINGA (``autograd.mse_loss`` asserts one shape)."""

    def __init__(self, t):
        super().__init__()
        from .ctensor import raw
        self.t = raw(t)

    def _forward(self, x):
        self.x_shape = x.shape
        self.err = x - self.t.astype(x.dtype)
        self.n = x.size
        return np.asarray([(self.err ** 2).sum() / self.n], x.dtype)

    def _backward(self, dy=1.0):
        scale = np.asarray(dy).reshape(-1)[0] if np.size(dy) else 1.0
        return unbroadcast(self.err * (2.0 / self.n) * scale, self.x_shape).astype(
            self.err.dtype)

    def backward(self, dy=1.0):
        return super().backward(dy)


OPERATORS.update({"MeanSquareError": MeanSquareError, "Not": Not, "PRelu": PRelu, "Max": Max, "Min": Min, "Where": Where,
                  "CosSim": CosSim, "RankingLoss": RankingLoss})
