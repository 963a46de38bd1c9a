"""Masks, triangles and diagonals (``tril``, ``masked_fill``, ``diag``, ``matrix_band_part``, ...)
as selections with constant masks, so gradients come from ``Select``; plus ``clamp``.
"""
import builtins

import numpy as np

from ..backend import dtypes
from ..tensor import Tensor
from .array_func import (full_like, _F, _constant, _host, _tensor, atleast_2d, cat, index_select, moveaxis,  # noqa: F401
                         narrow, zeros_like)
from .primitive import Primitive  # noqa: F401

__all__ = ['clamp', 'clip', 'clip_by_value', 'count_nonzero', 'diag', 'diagonal', 'masked_fill', 'masked_select', 'matrix_band_part', 'matrix_diag', 'matrix_diag_part', 'matrix_set_diag', 'nonzero', 'sequence_mask', 'trace', 'tril', 'triu']


# ---- masks and triangles (multiplications by constant masks: gradients for free) ---------
def tril(input, diagonal=0):   # noqa: A002
    mask = np.tril(np.ones(input.shape[-2:], bool), diagonal)
    return _F().select(_constant(np.broadcast_to(mask, input.shape), input), input,
                       zeros_like(input))


def triu(input, diagonal=0):   # noqa: A002
    mask = np.triu(np.ones(input.shape[-2:], bool), diagonal)
    return _F().select(_constant(np.broadcast_to(mask, input.shape), input), input,
                       zeros_like(input))


def matrix_band_part(x, lower, upper):
    m, n = x.shape[-2:]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return _F().select(_constant(np.broadcast_to(keep, x.shape), x), x, zeros_like(x))


def masked_fill(input_x, mask, value):   # noqa: A002
    value = value if isinstance(value, Tensor) else full_like(input_x, value)
    mask = _tensor(mask)
    return _F().select(_F().broadcast_to(mask, input_x.shape), _F().broadcast_to(value, input_x.shape),
                       input_x)


def masked_select(input, mask):   # noqa: A002
    mask = _host(mask).astype(bool)
    shape = np.broadcast_shapes(input.shape, mask.shape)
    return _F().broadcast_to(input, shape)[_constant(np.broadcast_to(mask, shape), input)]


def diag(input):   # noqa: A002
    if input.ndim == 1:
        n = input.shape[0]
        return _F().broadcast_to(input.reshape(1, n), (n, n)) * _constant(np.eye(n, dtype=input.dtype), input)
    return diagonal(input)


def diagonal(input, offset=0, dim1=0, dim2=1):   # noqa: A002
    x = moveaxis(input, (dim1, dim2), (-2, -1))
    m, n = x.shape[-2:]
    rows = np.arange(builtins.max(0, -offset), builtins.min(m, n - offset))
    return x[(Ellipsis, _constant(rows, x), _constant(rows + offset, x))]


def matrix_diag_part(x):
    return diagonal(x, 0, -2, -1)


def matrix_diag(x):
    n = x.shape[-1]
    return _F().expand_dims(x, -2) * _constant(np.eye(n, dtype=x.dtype), x)


def matrix_set_diag(x, diag_values):
    n = builtins.min(x.shape[-2:])
    eye_mask = np.zeros(x.shape[-2:], bool)
    eye_mask[np.arange(n), np.arange(n)] = True
    placed = _F().expand_dims(diag_values, -1) * _constant(np.eye(*x.shape[-2:], dtype=x.dtype)[:n], x)
    if x.shape[-2] > n:
        placed = cat([placed, zeros_like(x[..., n:, :])], -2)
    return _F().select(_constant(np.broadcast_to(eye_mask, x.shape), x), placed, x)


def trace(input):   # noqa: A002
    return diagonal(input).sum()


def sequence_mask(lengths, maxlen=None):
    lengths = _host(lengths)
    maxlen = int(lengths.max()) if maxlen is None else int(maxlen)
    return _constant(np.arange(maxlen) < lengths[..., None])


def clamp(input, min=None, max=None):   # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: give min, max or both")
    out = input
    if min is not None:
        out = _F().maximum(out, min)
    if max is not None:
        out = _F().minimum(out, max)
    return out


clip = clamp


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    return clamp(x, clip_value_min, clip_value_max)


def where_(condition):
    return nonzero(condition)


def nonzero(input, as_tuple=False):   # noqa: A002
    found = np.nonzero(_host(input))
    if as_tuple:
        return tuple(_constant(i.astype(np.int64), input) for i in found)
    return _constant(np.stack(found, -1).astype(np.int64), input)


def count_nonzero(x, axis=(), keep_dims=False, dtype=dtypes.int32):
    axis = None if axis == () else axis
    return _constant(np.asarray(np.count_nonzero(_host(x), axis=axis, keepdims=keep_dims),
                                dtype=dtypes.to_dtype(dtype)), x)


