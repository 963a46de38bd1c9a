"""Python front of the C++ kernels in ``minitorch_dist._C``.

These wrappers validate arguments (with the same helpers as the NumPy twins), make inputs
C-contiguous, flatten row tables to 2-D views and call the C++ loops, which run without the
GIL. ``_C`` is None when the extension was not built (``IMPORT_ERROR`` says why); the
package then uses the twins instead of these wrappers.
"""
import math

import numpy as np

from . import _checks as chk
from . import reference

try:
    from .. import _C
    IMPORT_ERROR = None
except ImportError as exc:
    _C = None
    IMPORT_ERROR = str(exc)


def _row_size(a):
    return math.prod(a.shape[1:])  # np.prod costs microseconds on a tuple


def _rows2d(a):
    """``a`` as a C-contiguous (rows, row_size) array (a view when a is already contiguous)."""
    return np.ascontiguousarray(a).reshape(a.shape[0], _row_size(a))


class _InPlace:
    """Contiguous 2-D working views of arrays updated in place, written back if they were copies."""

    def __init__(self, *arrays):
        self.arrays = arrays
        self.work = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]

    def views(self):
        return [w.reshape(w.shape[0], _row_size(w)) for w in self.work]

    def write_back(self):
        for a, w in zip(self.arrays, self.work):
            if w is not a:
                a[...] = w


def im2col(x, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    x = chk.float_array(x, "x")
    params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, _, _, oh, ow = chk.conv_geometry(x.shape, params)
    out = chk.out_array(out, (n * oh * ow, c * params[0] * params[1]), x.dtype)
    _C.im2col(np.ascontiguousarray(x), out, *params)
    return out


def col2im(cols, x_shape, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    cols = chk.float_array(cols, "cols")
    params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    geometry = chk.conv_geometry(x_shape, params)
    chk.check_cols(cols, x_shape, geometry, params)
    out = chk.out_array(out, geometry[:4], cols.dtype)
    _C.col2im(np.ascontiguousarray(cols), out, *params)
    return out


def im2col_nhwc(x, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    x = chk.float_array(x, "x")
    params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, _, _, oh, ow = chk.conv_geometry(reference._nhwc_shape(x.shape), params)
    out = chk.out_array(out, (n * oh * ow, params[0] * params[1] * c), x.dtype)
    _C.im2col_nhwc(np.ascontiguousarray(x), out, *params)
    return out


def col2im_nhwc(cols, x_shape, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    cols = chk.float_array(cols, "cols")
    params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, h, w, oh, ow = chk.conv_geometry(reference._nhwc_shape(x_shape), params)
    if cols.shape != (n * oh * ow, params[0] * params[1] * c):
        raise ValueError(f"cols must have shape {(n * oh * ow, params[0] * params[1] * c)} for "
                         f"an image of shape {tuple(x_shape)}, got {cols.shape}")
    out = chk.out_array(out, (n, h, w, c), cols.dtype)
    _C.col2im_nhwc(np.ascontiguousarray(cols), out, *params)
    return out


def winograd_input(x, tiles_h, tiles_w, pad, out=None):
    x = chk.winograd_image(x, "x", "winograd_input", "(N, H, W, C) image")
    tiles_h, tiles_w = chk.positive_ints(tiles_h=tiles_h, tiles_w=tiles_w)
    (pad,) = chk.non_negative_ints(pad=pad)
    out = chk.out_array(out, (16, x.shape[0] * tiles_h * tiles_w, x.shape[3]), x.dtype)
    _C.winograd_input(np.ascontiguousarray(x), out, tiles_h, tiles_w, pad)
    return out


def winograd_output(m, out_shape, tiles_h, tiles_w, out=None):
    m, tiles_h, tiles_w, (n, oh, ow, c) = chk.winograd_products(m, out_shape, tiles_h, tiles_w)
    out = chk.out_array(out, (n, oh, ow, c), m.dtype)
    _C.winograd_output(np.ascontiguousarray(m), out, tiles_h, tiles_w)
    return out


def winograd_grad(gy, tiles_h, tiles_w, out=None):
    gy = chk.winograd_image(gy, "gy", "winograd_grad", "(N, OH, OW, C) gradient")
    tiles_h, tiles_w = chk.positive_ints(tiles_h=tiles_h, tiles_w=tiles_w)
    chk.winograd_cover(tiles_h, tiles_w, gy.shape[1], gy.shape[2])
    out = chk.out_array(out, (16, gy.shape[0] * tiles_h * tiles_w, gy.shape[3]), gy.dtype)
    _C.winograd_grad(np.ascontiguousarray(gy), out, tiles_h, tiles_w)
    return out


def batch_norm_rows(x, gamma, beta, eps):
    x, (gamma, beta) = reference._bn_rows_args(x, "x", ("gamma", gamma), ("beta", beta))
    x = np.ascontiguousarray(x)
    out, xhat = np.empty_like(x), np.empty_like(x)
    mean, var = np.empty(x.shape[1], x.dtype), np.empty(x.shape[1], x.dtype)
    _C.bn_forward(x, np.ascontiguousarray(gamma), np.ascontiguousarray(beta), float(eps), out,
                  xhat, mean, var)
    return out, xhat, mean, var


def batch_norm_rows_backward(g, xhat, gamma, inv_std, need_dx=True):
    g, (gamma, inv_std) = reference._bn_rows_args(g, "g", ("gamma", gamma), ("inv_std", inv_std))
    xhat = np.asarray(xhat)
    if xhat.shape != g.shape or xhat.dtype != g.dtype:
        raise ValueError(f"xhat must match g ({g.dtype} {g.shape}), got {xhat.dtype} {xhat.shape}")
    g = np.ascontiguousarray(g)
    dx = np.empty_like(g) if need_dx else None
    dgamma, dbeta = np.empty(g.shape[1], g.dtype), np.empty(g.shape[1], g.dtype)
    _C.bn_backward(g, np.ascontiguousarray(xhat), np.ascontiguousarray(gamma),
                   np.ascontiguousarray(inv_std), dx, dgamma, dbeta)
    return dx, dgamma, dbeta


def embedding_gather(table, ids):
    table = np.asarray(table)
    if table.ndim < 1:
        raise ValueError("table must have a row axis, got a 0-d array")
    ids = chk.index_array(ids)
    out = np.empty(ids.shape + table.shape[1:], table.dtype)
    _C.embedding_gather(_rows2d(table), np.ascontiguousarray(ids).reshape(-1),
                        out.reshape(ids.size, _row_size(table)))
    return out


def scatter_add_rows(target, ids, values):
    target = chk.table(chk.writable(target, "target"), "target")
    ids = chk.index_array(ids)
    values = np.asarray(values, dtype=target.dtype)
    chk.rows_of(ids, values, target.shape[1:])
    work = _InPlace(target)
    _C.scatter_add_rows(work.views()[0], np.ascontiguousarray(ids).reshape(-1),
                        np.ascontiguousarray(values).reshape(ids.size, _row_size(target)))
    work.write_back()
    return target


def unique_merge(ids, values):
    ids = chk.index_array(ids)
    values = chk.merged_values(ids, values)
    row_shape = values.shape[ids.ndim:]
    flat_values = np.ascontiguousarray(values).reshape(ids.size, math.prod(row_shape))
    unique, merged = _C.unique_merge(np.ascontiguousarray(ids).reshape(-1), flat_values)
    return unique, merged.reshape((unique.size,) + row_shape)


def _flat_update_args(param, ids, grads):
    ids, grads = chk.update_args(param, ids, grads)
    return (np.ascontiguousarray(ids).reshape(-1),
            np.ascontiguousarray(grads).reshape(ids.size, _row_size(param)))


def sparse_sgd(param, ids, grads, lr, weight_decay=0.0):
    """In place ``param[id] -= lr * (g + weight_decay * param[id])`` once per distinct id
    (C++); ``lr`` must be a finite number >= 0."""
    lr = chk.learning_rate(lr)
    ids, grads = _flat_update_args(param, ids, grads)
    work = _InPlace(param)
    _C.sparse_sgd(*work.views(), ids, grads, lr, float(weight_decay))
    work.write_back()
    return param


def lazy_adam(param, m, v, ids, grads, lr, beta1, beta2, eps, step, weight_decay=0.0,
              use_nesterov=False):
    ids, grads = _flat_update_args(param, ids, grads)
    chk.state_tables(param, m=m, v=v)
    step = chk.adam_step(step)
    work = _InPlace(param, m, v)
    _C.lazy_adam(*work.views(), ids, grads, float(lr), float(beta1), float(beta2), float(eps),
                 step, float(weight_decay), bool(use_nesterov))
    work.write_back()
    return param


def ftrl(param, accum, linear, ids, grads, lr, l1, l2, lr_power=-0.5, weight_decay=0.0):
    ids, grads = _flat_update_args(param, ids, grads)
    chk.state_tables(param, accum=accum, linear=linear)
    lr = chk.ftrl_lr(lr)
    work = _InPlace(param, accum, linear)
    _C.ftrl(*work.views(), ids, grads, lr, float(l1), float(l2), float(lr_power),
            float(weight_decay))
    work.write_back()
    return param


def proximal_adagrad(param, accum, ids, grads, lr, l1=0.0, l2=0.0, weight_decay=0.0):
    ids, grads = _flat_update_args(param, ids, grads)
    chk.state_tables(param, accum=accum)
    lr = _non_negative_lr(lr)
    work = _InPlace(param, accum)
    _C.proximal_adagrad(*work.views(), ids, grads, lr, float(l1), float(l2), float(weight_decay))
    work.write_back()
    return param


def set_sparse_threads(n):
    """Most threads one fused sparse optimizer update, or one large ``embedding_gather``, may
    use (0: one per core, at most 16); returns the previous setting. Results do not depend
    on it."""
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"set_sparse_threads: n must be an integer >= 0 (0: automatic), got {n!r}")
    return _C.set_sparse_threads(int(n))


def topk_abs(flat, k):
    flat = chk.float_array(flat, "flat")
    k = chk.topk_count(flat, k)
    return _C.topk_abs(np.ascontiguousarray(flat), k)


def threshold_abs(flat, thr):
    flat = chk.flat_1d(flat, "threshold_abs")
    return _C.threshold_abs(np.ascontiguousarray(flat), float(thr))


def fp16_pack(x, scale=1.0, out=None):
    x = chk.float_array(x, "x")
    out = chk.out_array(out, x.shape, np.float16)
    _C.fp16_pack(np.ascontiguousarray(x), out, float(scale))
    return out


def fp16_unpack(h, scale=1.0, out=None):
    h = chk.half_array(h)
    scale = chk.unpack_scale(scale)
    out = chk.out_array(out, h.shape, np.float32)
    _C.fp16_unpack(np.ascontiguousarray(h), out, scale)
    return out


def _non_negative_lr(lr):
    if not lr >= 0:
        raise ValueError(f"lr must be >= 0, got {lr!r}")
    return float(lr)


# One-pass element-wise kernels (cpp/elementwise.cpp). They run on every step of a dense
# network, so each takes what the C++ loop serves (float32/float64 in native byte order,
# C-contiguous, one dtype) with a few attribute reads and hands anything else to its twin.
_ndarray = np.ndarray
_HOST_FLOATS = frozenset([np.dtype(np.float32), np.dtype(np.float64)])   # '>f4' is not in it


def relu(x):
    if type(x) is _ndarray and x.dtype in _HOST_FLOATS and x.flags.c_contiguous:
        return _C.relu(x)
    return _relu_permuted(x)


def relu_backward(g, y):
    if type(g) is _ndarray and type(y) is _ndarray and g.shape == y.shape and \
            g.dtype in _HOST_FLOATS and y.dtype == g.dtype and g.flags.c_contiguous and \
            y.flags.c_contiguous:
        return _C.relu_backward(g, y)
    return _relu_backward_permuted(g, y)


def sum_rows(g):
    # NumPy adds the rows in order only when a row has two or more elements (a single
    # column is one contiguous run, which it sums pairwise): the twin takes that case
    if type(g) is _ndarray and g.ndim == 2 and g.shape[1] > 1 and g.dtype in _HOST_FLOATS \
            and g.flags.c_contiguous:
        return _C.sum_rows(g)
    return reference.sum_rows(g)


def _dense_order(a):
    """The axes of ``a`` from the largest stride to the smallest (ties in axis order, as
    ``np.empty_like`` orders them): a.transpose(order) is C-contiguous when ``a`` is dense."""
    strides = a.strides
    return sorted(range(a.ndim), key=lambda d: -abs(strides[d]))


def _inverse(order):
    back = [0] * len(order)
    for position, axis in enumerate(order):
        back[axis] = position
    return back


def _relu_permuted(x):
    """ReLU of a dense array in another axis order (a convolution's channels-last NCHW):
    the C++ loop on the C-contiguous permutation, viewed back in x's layout."""
    if type(x) is _ndarray and x.dtype in _HOST_FLOATS and x.ndim > 1:
        order = _dense_order(x)
        xt = x.transpose(order)
        if xt.flags.c_contiguous:
            return _C.relu(xt).transpose(_inverse(order))
    return reference.relu(x)


def _relu_backward_permuted(g, y):
    """relu_backward where g and y share one dense layout other than C order."""
    if type(g) is _ndarray and type(y) is _ndarray and g.shape == y.shape and g.ndim > 1 and \
            g.dtype in _HOST_FLOATS and y.dtype == g.dtype:
        order = _dense_order(y)
        gt, yt = g.transpose(order), y.transpose(order)
        if yt.flags.c_contiguous and gt.flags.c_contiguous:
            return _C.relu_backward(gt, yt).transpose(_inverse(order))
    return reference.relu_backward(g, y)


def max_pool_backward(x, out, grad, kh, kw):
    """One pass in C++ (cpp/pooling.cpp) for float32/float64 host arrays of one dtype, any
    strides; anything else goes to the twin."""
    if type(x) is _ndarray and type(out) is _ndarray and type(grad) is _ndarray and \
            x.dtype in _HOST_FLOATS and out.dtype == x.dtype and grad.dtype == x.dtype and \
            x.flags.aligned and out.flags.aligned and grad.flags.aligned:
        reference._tiling_shapes(x, out, grad, kh, kw)
        dx = np.empty_like(x)
        _C.max_pool_backward(x, out, grad, dx, kh, kw)
        return dx
    return reference.max_pool_backward(x, out, grad, kh, kw)
