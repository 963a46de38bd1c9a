"""Products built on ``matmul``: ``outer``, ``tensor_dot``, ``kron``, ``cross``, ``diff``, ...
"""
import builtins

import numpy as np

from .array_func import (_F, _constant, _host, _tensor, atleast_2d, cat, index_select, moveaxis,  # noqa: F401
                         narrow, zeros_like)
from .primitive import Primitive  # noqa: F401

__all__ = ['batch_dot', 'bmm', 'cross', 'diff', 'dot', 'ger', 'inner', 'kron', 'outer', 'tensor_dot']


# ---- products ---------------------------------------------------------------------------
def outer(input, vec2):   # noqa: A002
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


ger = outer


def inner(input, other):   # noqa: A002
    if not input.ndim or not other.ndim:
        return input * other
    return tensor_dot(input, other, ((input.ndim - 1,), (other.ndim - 1,)))


def dot(input, other):   # noqa: A002
    return _F().matmul(input, other)


def bmm(input_x, mat2):   # noqa: A002
    return _F().matmul(input_x, mat2)


def batch_dot(x1, x2, axes=None):
    if axes is None:
        axes = (x1.ndim - 1, x2.ndim - 1 if x2.ndim == 2 else x2.ndim - 2)
    return _F().einsum("bi,bi->b", x1, x2) if x1.ndim == x2.ndim == 2 else \
        _F().matmul(x1, x2)


def tensor_dot(x1, x2, axes):
    if isinstance(axes, int):
        axes = (list(builtins.range(x1.ndim - axes, x1.ndim)), list(builtins.range(axes)))
    a_axes = [a % x1.ndim for a in np.atleast_1d(axes[0])]
    b_axes = [b % x2.ndim for b in np.atleast_1d(axes[1])]
    a_free = [i for i in builtins.range(x1.ndim) if i not in a_axes]
    b_free = [i for i in builtins.range(x2.ndim) if i not in b_axes]
    k = int(np.prod([x1.shape[i] for i in a_axes]))
    a = _F().transpose(x1, tuple(a_free + a_axes)).reshape(-1, k)
    b = _F().transpose(x2, tuple(b_axes + b_free)).reshape(k, -1)
    shape = tuple(x1.shape[i] for i in a_free) + tuple(x2.shape[i] for i in b_free)
    return _F().matmul(a, b).reshape(shape)


def kron(input, other):   # noqa: A002
    a, b = atleast_2d(input), atleast_2d(other)
    (m, n), (p, q) = a.shape, b.shape
    return (a.reshape(m, 1, n, 1) * b.reshape(1, p, 1, q)).reshape(m * p, n * q)


def cross(input, other, dim=-1):   # noqa: A002
    def part(t, i):
        return narrow(t, dim % t.ndim, i, 1)
    a = [part(input, i) for i in builtins.range(3)]
    b = [part(other, i) for i in builtins.range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]],
               dim)


def diff(x, n=1, axis=-1):
    for _ in builtins.range(n):
        length = x.shape[axis]
        x = narrow(x, axis % x.ndim, 1, length - 1) - narrow(x, axis % x.ndim, 0, length - 1)
    return x


