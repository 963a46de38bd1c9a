"""Counting, searching and scatter-into-a-copy functions (not differentiable; computed
on the host copy of the data): ``bincount``, ``searchsorted``, ``tensor_scatter_*``, ``index_add``, ...
"""
import builtins

import numpy as np

from ..tensor import Tensor
from .array_func import (_F, _constant, _host, _tensor, atleast_2d, cat, index_select, moveaxis,  # noqa: F401
                         narrow, zeros_like)
from .gather_func import _add_along_axis  # noqa: F401
from .primitive import Primitive  # noqa: F401

__all__ = ['bincount', 'bucketize', 'histc', 'index_add', 'index_fill', 'inplace_add', 'inplace_sub', 'inplace_update', 'reverse_sequence', 'searchsorted', 'tensor_scatter_add', 'tensor_scatter_div', 'tensor_scatter_elements', 'tensor_scatter_max', 'tensor_scatter_min', 'tensor_scatter_mul', 'tensor_scatter_sub', 'tensor_scatter_update', 'unique_consecutive']


# ---- counting and searching (not differentiable) -----------------------------------------
def bincount(input, weights=None, minlength=0):   # noqa: A002
    w = None if weights is None else _host(weights)
    return _constant(np.bincount(_host(input), w, minlength), input)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False):
    seq, vals = _host(sorted_sequence), _host(values)
    side = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, vals, side)
    else:
        out = np.stack([np.searchsorted(s, v, side) for s, v in zip(seq.reshape(-1, seq.shape[-1]),
                                                                      vals.reshape(-1, vals.shape[-1]))])
        out = out.reshape(vals.shape)
    return _constant(out.astype(np.int32 if out_int32 else np.int64), values)


def bucketize(input, boundaries, *, right=False):   # noqa: A002
    return searchsorted(Tensor(np.asarray(boundaries)), input, right=right)


def histc(input, bins=100, min=0.0, max=0.0):   # noqa: A002
    data = _host(input)
    lo, hi = (data.min(), data.max()) if min == max else (min, max)
    return _constant(np.histogram(data, bins, (lo, hi))[0].astype(input.dtype), input)


def unique_consecutive(input, return_idx=False, return_counts=False, axis=None):   # noqa: A002
    data = _host(input).reshape(-1) if axis is None else _host(input)
    if axis not in (None, 0) and data.ndim > 1:
        raise ValueError("unique_consecutive: only axis=None or 0 is supported here")
    starts = np.concatenate([[True], np.any(data[1:] != data[:-1], axis=tuple(
        builtins.range(1, data.ndim))) if data.ndim > 1 else data[1:] != data[:-1]])
    out = [_constant(data[starts], input)]
    if return_idx:
        out.append(_constant(np.cumsum(starts) - 1, input))
    if return_counts:
        out.append(_constant(np.diff(np.append(np.nonzero(starts)[0], len(data))), input))
    return out[0] if len(out) == 1 else tuple(out)


def reverse_sequence(x, seq_lengths, seq_dim, batch_dim=0):
    data, lengths = _host(x).copy(), _host(seq_lengths)
    for b, n in enumerate(lengths):
        index = [builtins.slice(None)] * data.ndim
        index[batch_dim] = b
        seq = [builtins.slice(None)] * (data.ndim - 1)
        seq[seq_dim - (seq_dim > batch_dim)] = builtins.slice(0, int(n))
        block = data[tuple(index)]
        block[tuple(seq)] = np.flip(block[tuple(seq)], seq_dim - (seq_dim > batch_dim))
    return _constant(data, x)


# ---- scatter into a copy (functional; not differentiable) --------------------------------
def _scatter_nd(op, input_x, indices, updates):
    data, idx, upd = _host(input_x).copy(), _host(indices), _host(updates)
    where = tuple(np.moveaxis(idx, -1, 0))
    if op is None:
        data[where] = upd
    else:
        op.at(data, where, upd)
    return _constant(data, input_x)


def tensor_scatter_update(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(None, input_x, indices, updates)


def tensor_scatter_add(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.add, input_x, indices, updates)


def tensor_scatter_sub(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.subtract, input_x, indices, updates)


def tensor_scatter_mul(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.multiply, input_x, indices, updates)


def tensor_scatter_div(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.divide, input_x, indices, updates)


def tensor_scatter_max(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.maximum, input_x, indices, updates)


def tensor_scatter_min(input_x, indices, updates):   # noqa: A002
    return _scatter_nd(np.minimum, input_x, indices, updates)


def tensor_scatter_elements(input_x, indices, updates, axis=0, reduction="none"):   # noqa: A002
    if reduction not in ("none", "add"):
        raise ValueError(f"tensor_scatter_elements: reduction must be 'none' or 'add', got {reduction!r}")
    data, idx, upd = _host(input_x).copy(), _host(indices), _host(updates)
    if reduction == "add":
        _add_along_axis(np, data, idx, upd, axis % data.ndim)
    else:
        np.put_along_axis(data, idx, upd, axis % data.ndim)
    return _constant(data, input_x)


def index_add(x, indices, y, axis, use_lock=True, check_index_bound=True):
    data = _host(x).copy()
    np.add.at(data, (builtins.slice(None),) * (axis % data.ndim) + (_host(indices),), _host(y))
    return _constant(data, x)


def index_fill(x, axis, index, value):
    data = _host(x).copy()
    value = value.item() if isinstance(value, Tensor) else value
    data[(builtins.slice(None),) * (axis % data.ndim) + (_host(index),)] = value
    return _constant(data, x)


def inplace_update(x, v, indices):
    data = _host(x).copy()
    data[_host(Tensor(indices) if not isinstance(indices, Tensor) else indices)] = _host(v)
    return _constant(data, x)


def inplace_add(x, v, indices):
    data = _host(x).copy()
    np.add.at(data, np.atleast_1d(indices), _host(v))
    return _constant(data, x)


def inplace_sub(x, v, indices):
    data = _host(x).copy()
    np.subtract.at(data, np.atleast_1d(indices), _host(v))
    return _constant(data, x)
