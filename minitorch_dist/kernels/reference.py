"""NumPy twins of the C++ host kernels: the test oracle, and the fallback when ``_C`` is absent.

Each function has the same signature, results and errors as its C++ counterpart in
``minitorch_dist.kernels``; they are written for clarity first, speed second.

>>> import numpy as np
>>> from minitorch_dist.kernels import reference as ref
>>> ids, rows = ref.unique_merge(np.array([3, 1, 3]), np.array([[1.0], [2.0], [4.0]]))
>>> ids.tolist(), rows.ravel().tolist()
([1, 3], [2.0, 5.0])
"""
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import _checks as chk


# --- im2col / col2im ---------------------------------------------------------------------

def im2col(x, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    """Unfold (N, C, H, W) image patches into rows: returns (N*OH*OW, C*kh*kw).

    Rows are ordered (n, oh, ow) and columns (c, i, j); the image is zero-padded by ph/pw on
    each side and the kernel taps are dilation dh/dw apart.

    >>> import numpy as np
    >>> im2col(np.arange(9.0).reshape(1, 1, 3, 3), 2, 2).tolist()[0]
    [0.0, 1.0, 3.0, 4.0]
    """
    x = chk.float_array(x, "x")
    kh, kw, sh, sw, ph, pw, dh, dw = params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, h, w, oh, ow = chk.conv_geometry(x.shape, params)
    out = chk.out_array(out, (n * oh * ow, c * kh * kw), x.dtype)
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    s_n, s_c, s_h, s_w = x.strides
    # A read-only 6-D view (n, oh, ow, c, i, j) of the padded image; one copy fills out.
    patches = as_strided(x, (n, oh, ow, c, kh, kw),
                         (s_n, s_h * sh, s_w * sw, s_c, s_h * dh, s_w * dw), writeable=False)
    np.copyto(out.reshape(n, oh, ow, c, kh, kw), patches)
    return out


def col2im(cols, x_shape, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    """Adjoint of :func:`im2col`: fold rows back into an image, summing overlapping patches.

    >>> import numpy as np
    >>> col2im(np.ones((4, 4)), (1, 1, 3, 3), 2, 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    cols = chk.float_array(cols, "cols")
    kh, kw, sh, sw, ph, pw, dh, dw = params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    geometry = n, c, h, w, oh, ow = chk.conv_geometry(x_shape, params)
    chk.check_cols(cols, x_shape, geometry, params)
    out = chk.out_array(out, (n, c, h, w), cols.dtype)
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), cols.dtype)
    patches = cols.reshape(n, oh, ow, c, kh, kw).transpose(0, 3, 1, 2, 4, 5)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            columns = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            padded[:, :, rows, columns] += patches[..., i, j]
    out[...] = padded[:, :, ph:ph + h, pw:pw + w]
    return out


def _nhwc_shape(x_shape):
    """(N, C, H, W) of a channels-last (N, H, W, C) shape, for the shared geometry checks."""
    if len(x_shape) != 4:
        raise ValueError(f"im2col_nhwc/col2im_nhwc expect an (N, H, W, C) image, got shape "
                         f"{tuple(x_shape)}")
    n, h, w, c = x_shape
    return n, c, h, w


def im2col_nhwc(x, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    """Unfold a channels-last (N, H, W, C) image into rows: returns (N*OH*OW, kh*kw*C).

    Rows are ordered (n, oh, ow) and columns (i, j, c): every kernel tap is a run of C
    channels. Padding and dilation as in :func:`im2col`.

    >>> import numpy as np
    >>> im2col_nhwc(np.arange(18.0).reshape(1, 3, 3, 2), 2, 2).tolist()[0]
    [0.0, 1.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0]
    """
    x = chk.float_array(x, "x")
    kh, kw, sh, sw, ph, pw, dh, dw = params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, h, w, oh, ow = chk.conv_geometry(_nhwc_shape(x.shape), params)
    out = chk.out_array(out, (n * oh * ow, kh * kw * c), x.dtype)
    if ph or pw:
        x = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    s_n, s_h, s_w, s_c = x.strides
    patches = as_strided(x, (n, oh, ow, kh, kw, c),
                         (s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, s_c), writeable=False)
    np.copyto(out.reshape(n, oh, ow, kh, kw, c), patches)
    return out


def col2im_nhwc(cols, x_shape, kh, kw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, out=None):
    """Adjoint of :func:`im2col_nhwc`: fold rows back into an (N, H, W, C) image, summing.

    >>> import numpy as np
    >>> col2im_nhwc(np.ones((4, 4)), (1, 3, 3, 1), 2, 2)[0, :, :, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    cols = chk.float_array(cols, "cols")
    kh, kw, sh, sw, ph, pw, dh, dw = params = chk.conv_params(kh, kw, sh, sw, ph, pw, dh, dw)
    n, c, h, w, oh, ow = chk.conv_geometry(_nhwc_shape(x_shape), params)
    if cols.shape != (n * oh * ow, kh * kw * c):
        raise ValueError(f"cols must have shape {(n * oh * ow, kh * kw * c)} for an image of "
                         f"shape {tuple(x_shape)}, got {cols.shape}")
    out = chk.out_array(out, (n, h, w, c), cols.dtype)
    padded = np.zeros((n, h + 2 * ph, w + 2 * pw, c), cols.dtype)
    patches = cols.reshape(n, oh, ow, kh, kw, c)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            columns = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            padded[:, rows, columns] += patches[:, :, :, i, j]
    out[...] = padded[:, ph:ph + h, pw:pw + w]
    return out


# --- Winograd F(2x2, 3x3) transforms ----------------------------------------------------------

WINOGRAD_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
WINOGRAD_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def winograd_input(x, tiles_h, tiles_w, pad, out=None):
    """``out[k, t, c] = (B^T d_t B)[k]`` for the 4x4 input tiles of channels-last ``x``.

    ``x`` is (N, H, W, C); tile (a, b) of image n starts at row ``2a - pad`` and column
    ``2b - pad`` (values outside the image are zero); ``t = (n * tiles_h + a) * tiles_w + b``
    and ``k = 4 * row + column`` of the transformed tile. Returns (16, N*tiles_h*tiles_w, C).

    >>> import numpy as np
    >>> v = winograd_input(np.ones((1, 4, 4, 1)), 1, 1, 0)
    >>> float(v[:, 0, 0].reshape(4, 4)[1, 1])     # (d1 + d2) over rows and columns
    4.0
    """
    x = chk.winograd_image(x, "x", "winograd_input", "(N, H, W, C) image")
    tiles_h, tiles_w = chk.positive_ints(tiles_h=tiles_h, tiles_w=tiles_w)
    (pad,) = chk.non_negative_ints(pad=pad)
    n, h, w, c = x.shape
    out = chk.out_array(out, (16, n * tiles_h * tiles_w, c), x.dtype)
    padded = np.zeros((n, 2 * tiles_h + 2, 2 * tiles_w + 2, c), x.dtype)
    rows, cols = min(h, padded.shape[1] - pad), min(w, padded.shape[2] - pad)
    padded[:, pad:pad + rows, pad:pad + cols] = x[:, :rows, :cols]
    s_n, s_h, s_w, s_c = padded.strides
    tiles = as_strided(padded, (n, tiles_h, tiles_w, 4, 4, c),
                       (s_n, 2 * s_h, 2 * s_w, s_h, s_w, s_c), writeable=False)
    bt = WINOGRAD_BT.astype(x.dtype)
    rows = np.einsum("ki,nabijc->knabjc", bt, tiles)      # B^T d, then (B^T d) B: the
    v = np.einsum("knabjc,lj->klnabc", rows, bt)           # kernel's order, the same bits
    out[...] = v.reshape(16, -1, c)
    return out


def winograd_output(m, out_shape, tiles_h, tiles_w, out=None):
    """``A^T m_t A``: the 2x2 output tiles of ``m`` (16, N*tiles_h*tiles_w, C), written into a
    channels-last (N, OH, OW, C) array where they lie inside it.

    >>> import numpy as np
    >>> winograd_output(np.ones((16, 1, 1)), (1, 2, 2, 1), 1, 1)[0, :, :, 0].tolist()
    [[9.0, -3.0], [-3.0, 1.0]]
    """
    m, tiles_h, tiles_w, (n, oh, ow, c) = chk.winograd_products(m, out_shape, tiles_h, tiles_w)
    out = chk.out_array(out, (n, oh, ow, c), m.dtype)
    at = WINOGRAD_AT.astype(m.dtype)
    rows = np.einsum("pk,klnabc->plnabc", at, m.reshape(4, 4, n, tiles_h, tiles_w, c))
    y = np.einsum("plnabc,ql->napbqc", rows, at)
    out[...] = y.reshape(n, 2 * tiles_h, 2 * tiles_w, c)[:, :oh, :ow]
    return out


def winograd_grad(gy, tiles_h, tiles_w, out=None):
    """``out[k, t, c] = (A g_t A^T)[k]`` for the 2x2 tiles of a channels-last output gradient
    ``gy`` (N, OH, OW, C), zero outside it; the weight gradient's transform.

    >>> import numpy as np
    >>> winograd_grad(np.ones((1, 2, 2, 1)), 1, 1)[:, 0, 0].reshape(4, 4)[1].tolist()
    [2.0, 4.0, 0.0, -2.0]
    """
    gy = chk.winograd_image(gy, "gy", "winograd_grad", "(N, OH, OW, C) gradient")
    tiles_h, tiles_w = chk.positive_ints(tiles_h=tiles_h, tiles_w=tiles_w)
    n, oh, ow, c = gy.shape
    chk.winograd_cover(tiles_h, tiles_w, oh, ow)
    out = chk.out_array(out, (16, n * tiles_h * tiles_w, c), gy.dtype)
    padded = np.zeros((n, 2 * tiles_h, 2 * tiles_w, c), gy.dtype)
    padded[:, :oh, :ow] = gy
    tiles = padded.reshape(n, tiles_h, 2, tiles_w, 2, c)
    a = WINOGRAD_AT.T.astype(gy.dtype)
    rows = np.einsum("ki,naibjc->knabjc", a, tiles)
    s = np.einsum("knabjc,lj->klnabc", rows, a)
    out[...] = s.reshape(16, -1, c)
    return out


# --- batch normalisation over rows ---------------------------------------------------------

def _bn_rows_args(x, name, *vectors):
    x = chk.float_array(x, name)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"{name} must be a 2-D (rows, channels) array with rows, got shape {x.shape}")
    out = []
    for vname, v in vectors:
        v = np.asarray(v)
        if v.shape != (x.shape[1],) or v.dtype != x.dtype:
            raise ValueError(f"{vname} must be a {x.dtype} vector of {x.shape[1]} elements, got "
                             f"{v.dtype} {v.shape}")
        out.append(v)
    return x, out


def batch_norm_rows(x, gamma, beta, eps):
    """Training-mode batch norm over the rows of ``x`` (R, C): ``(out, xhat, mean, var)``.

    ``mean`` and the biased ``var`` are summed in float64; ``xhat = (x - mean) / sqrt(var +
    eps)`` and ``out = xhat * gamma + beta`` are computed in x's dtype.

    >>> import numpy as np
    >>> out, xhat, mean, var = batch_norm_rows(np.array([[1.0], [3.0]]), np.ones(1), np.zeros(1), 0.0)
    >>> out.ravel().tolist(), mean.tolist(), var.tolist()
    ([-1.0, 1.0], [2.0], [1.0])
    """
    x, (gamma, beta) = _bn_rows_args(x, "x", ("gamma", gamma), ("beta", beta))
    rows = x.shape[0]
    mean = x.sum(axis=0, dtype=np.float64) / rows
    centred = x.astype(np.float64) - mean
    var = np.einsum("rc,rc->c", centred, centred) / rows
    inv = (1.0 / np.sqrt(var + float(eps))).astype(x.dtype)
    xhat = (x - mean.astype(x.dtype)) * inv
    out = xhat * gamma + beta
    return out, xhat, mean.astype(x.dtype), var.astype(x.dtype)


def batch_norm_rows_backward(g, xhat, gamma, inv_std, need_dx=True):
    """Backward of :func:`batch_norm_rows`: ``(dx or None, dgamma, dbeta)``.

    ``dbeta = sum(g)``, ``dgamma = sum(g * xhat)`` (float64 sums) and
    ``dx = gamma * inv_std * (g - dbeta / R - xhat * dgamma / R)``.

    >>> import numpy as np
    >>> dx, dg, db = batch_norm_rows_backward(np.array([[1.0], [1.0]]), np.array([[-1.0], [1.0]]),
    ...                                        np.ones(1), np.ones(1))
    >>> dx.ravel().tolist(), dg.tolist(), db.tolist()
    ([0.0, 0.0], [0.0], [2.0])
    """
    g, (gamma, inv_std) = _bn_rows_args(g, "g", ("gamma", gamma), ("inv_std", inv_std))
    xhat = np.asarray(xhat)
    if xhat.shape != g.shape or xhat.dtype != g.dtype:
        raise ValueError(f"xhat must match g ({g.dtype} {g.shape}), got {xhat.dtype} {xhat.shape}")
    rows = g.shape[0]
    sum_g = g.sum(axis=0, dtype=np.float64)
    sum_gx = np.einsum("rc,rc->c", g.astype(np.float64), xhat.astype(np.float64))
    dx = None
    if need_dx:
        k = gamma * inv_std
        dx = k * (g - (sum_g / rows).astype(g.dtype) - xhat * (sum_gx / rows).astype(g.dtype))
    return dx, sum_gx.astype(g.dtype), sum_g.astype(g.dtype)


# --- embedding rows ----------------------------------------------------------------------

def embedding_gather(table, ids):
    """``table[ids]`` for ids of any shape: returns (*ids.shape, *table.shape[1:]).

    Out-of-range ids (negative ones included) raise IndexError naming the id and the table size.

    >>> import numpy as np
    >>> embedding_gather(np.eye(3), np.array([[2], [0]])).shape
    (2, 1, 3)
    """
    table = np.asarray(table)
    if table.ndim < 1:
        raise ValueError("table must have a row axis, got a 0-d array")
    ids = chk.index_array(ids)
    chk.check_ids(ids, table.shape[0])
    return np.take(table, ids, axis=0)


def scatter_add_rows(target, ids, values):
    """In place ``target[ids[k]] += values[k]``; duplicate ids add up.

    >>> import numpy as np
    >>> t = np.zeros((3, 1))
    >>> _ = scatter_add_rows(t, np.array([2, 2, 0]), np.ones((3, 1)))
    >>> t.ravel().tolist()
    [1.0, 0.0, 2.0]
    """
    target = chk.table(chk.writable(target, "target"), "target")
    ids = chk.index_array(ids)
    values = np.asarray(values, dtype=target.dtype)
    chk.rows_of(ids, values, target.shape[1:])
    chk.check_ids(ids, target.shape[0])
    np.add.at(target, ids, values)
    return target


def unique_merge(ids, values):
    """``(sorted distinct ids as int64, values summed per distinct id)``."""
    ids = chk.index_array(ids)
    values = chk.merged_values(ids, values)
    row_shape = values.shape[ids.ndim:]
    unique, inverse = np.unique(ids.reshape(-1), return_inverse=True)
    merged = np.zeros((unique.size,) + row_shape, values.dtype)
    np.add.at(merged, inverse, values.reshape((-1,) + row_shape))
    return unique.astype(np.int64, copy=False), merged


# --- sparse optimizer updates --------------------------------------------------------------

def _merged_rows(param, ids, grads):
    """Validated, duplicate-merged (rows, summed grads) for an in-place update of ``param``."""
    ids, grads = chk.update_args(param, ids, grads)
    chk.check_ids(ids, param.shape[0])
    return unique_merge(ids, grads)


def sparse_sgd(param, ids, grads, lr, weight_decay=0.0):
    """In place ``param[id] -= lr * (g + weight_decay * param[id])`` once per distinct id."""
    rows, g = _merged_rows(param, ids, grads)
    if weight_decay:
        g = g + weight_decay * param[rows]
    param[rows] -= lr * g
    return param


def lazy_adam(param, m, v, ids, grads, lr, beta1, beta2, eps, step, weight_decay=0.0,
              use_nesterov=False):
    """Adam on the touched rows of param, m and v only (``step`` counts updates from 1).

    The bias correction is folded into the step size, as in TensorFlow, MindSpore and
    ``torch.optim.SparseAdam``: ``w -= lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)``.
    ``weight_decay`` adds ``weight_decay * w`` to the gradient (L2 regularisation);
    ``use_nesterov`` puts ``beta1*m + (1-beta1)*g`` in the numerator (MindSpore's Nesterov).
    """
    chk.state_tables(param, m=m, v=v)
    step = chk.adam_step(step)
    rows, g = _merged_rows(param, ids, grads)
    w = param[rows]
    if weight_decay:
        g = g + weight_decay * w
    m_rows = beta1 * m[rows] + (1.0 - beta1) * g
    v_rows = beta2 * v[rows] + (1.0 - beta2) * (g * g)
    numerator = beta1 * m_rows + (1.0 - beta1) * g if use_nesterov else m_rows
    step_size = lr * math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
    param[rows] = w - step_size * numerator / (np.sqrt(v_rows) + eps)
    m[rows] = m_rows
    v[rows] = v_rows
    return param


def ftrl(param, accum, linear, ids, grads, lr, l1, l2, lr_power=-0.5, weight_decay=0.0):
    """FTRL-proximal on the touched rows, in TensorFlow's ApplyFtrl form.

    ``accum += g^2``; ``linear += g - (accum_new^-p - accum^-p)/lr * w``;
    ``w = (sign(linear)*l1 - linear) / (accum_new^-p/lr + 2*l2)`` where ``|linear| > l1``,
    else 0 (with ``p = lr_power``). ``weight_decay`` adds ``weight_decay * w`` to ``g``.
    """
    chk.state_tables(param, accum=accum, linear=linear)
    lr = chk.ftrl_lr(lr)
    rows, g = _merged_rows(param, ids, grads)
    if weight_decay:
        g = g + weight_decay * param[rows]
    acc_old = accum[rows]
    acc_new = acc_old + g * g
    if lr_power == -0.5:
        p_new, p_old = np.sqrt(acc_new), np.sqrt(acc_old)
    else:
        p_new, p_old = acc_new ** -lr_power, acc_old ** -lr_power
    z = linear[rows] + (g - (p_new - p_old) / lr * param[rows])
    quadratic = p_new / lr + 2.0 * l2
    param[rows] = np.where(np.abs(z) > l1, (np.sign(z) * l1 - z) / quadratic, 0)
    linear[rows] = z
    accum[rows] = acc_new
    return param


def proximal_adagrad(param, accum, ids, grads, lr, l1=0.0, l2=0.0, weight_decay=0.0):
    """Proximal Adagrad (MindSpore's ApplyProximalAdagrad) on the touched rows.

    ``accum += g^2``; ``prox = w - lr*g/sqrt(accum)``;
    ``w = sign(prox) * max(|prox| - lr*l1, 0) / (1 + lr*l2)``. ``weight_decay`` adds
    ``weight_decay * w`` to ``g``. An element whose accumulator and gradient are both zero
    keeps ``prox = w`` (no 0/0).

    >>> import numpy as np
    >>> w, acc = np.array([[1.0], [2.0]]), np.zeros((2, 1))
    >>> _ = proximal_adagrad(w, acc, np.array([1, 1]), np.array([[1.5], [1.5]]), 0.5)
    >>> w.ravel().tolist(), acc.ravel().tolist()      # row 1: 2 - 0.5 * 3 / 3
    ([1.0, 1.5], [0.0, 9.0])
    """
    chk.state_tables(param, accum=accum)
    lr = _non_negative_lr(lr)
    rows, g = _merged_rows(param, ids, grads)
    w = param[rows]
    if weight_decay:
        g = g + weight_decay * w
    acc_new = accum[rows] + g * g
    root = np.maximum(np.sqrt(acc_new), np.finfo(param.dtype).tiny)
    prox = w - lr * g / root
    shrunk = np.maximum(np.abs(prox) - lr * l1, 0)
    param[rows] = np.copysign(shrunk, prox) / (1.0 + lr * l2)
    accum[rows] = acc_new
    return param


# --- gradient sparsification -------------------------------------------------------------

def topk_abs(flat, k):
    """Ascending int64 indices of the k entries of 1-D ``flat`` with the largest ``|value|``.

    >>> import numpy as np
    >>> topk_abs(np.array([0.1, -3.0, 2.0, 0.5]), 2).tolist()
    [1, 2]
    """
    flat = chk.float_array(flat, "flat")
    k = chk.topk_count(flat, k)
    n = flat.size
    if k == 0 or k == n:
        return np.arange(k, dtype=np.int64)
    chosen = np.argpartition(np.abs(flat), n - k)[n - k:]
    chosen.sort()
    return chosen.astype(np.int64, copy=False)


def threshold_abs(flat, thr):
    """Ascending int64 indices where ``|flat| >= thr`` (compared in flat's dtype)."""
    flat = chk.flat_1d(flat, "threshold_abs")
    return np.flatnonzero(np.abs(flat) >= float(thr)).astype(np.int64, copy=False)


# --- fp16 transport ------------------------------------------------------------------------

def fp16_pack(x, scale=1.0, out=None):
    """``float16(x * scale)``, the product taken in x's precision, rounded to nearest even.

    >>> import numpy as np
    >>> fp16_pack(np.array([1.0, 70000.0], np.float32), scale=0.5).tolist()
    [0.5, 35008.0]
    """
    x = chk.float_array(x, "x")
    out = chk.out_array(out, x.shape, np.float16)
    scale = float(scale)
    with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf
        out[...] = x * scale if scale != 1.0 else x
    return out


def fp16_unpack(h, scale=1.0, out=None):
    """``float32(h) / scale`` for a float16 array ``h``."""
    h = chk.half_array(h)
    scale = chk.unpack_scale(scale)
    out = chk.out_array(out, h.shape, np.float32)
    out[...] = h
    if scale != 1.0:
        with np.errstate(invalid="ignore"):  # NaN payloads pass through
            out /= np.float32(scale)
    return out


def _non_negative_lr(lr):
    if not lr >= 0:
        raise ValueError(f"lr must be >= 0, got {lr!r}")
    return float(lr)


# --- one-pass element-wise passes of a dense layer's step (issue 29) ---------------------

def relu(x):
    """``max(x, 0)`` in a new array of x's layout: NaN stays NaN, -0 becomes +0.

    >>> import numpy as np
    >>> relu(np.array([-1.0, 0.0, 2.0], np.float32)).tolist()
    [0.0, 0.0, 2.0]
    """
    return np.maximum(x, 0, out=np.empty_like(x))


def relu_backward(g, y):
    """``g * (y > 0)`` in y's layout (``y``: ReLU's output): a product, so ``g * 0`` keeps
    g's sign and ``inf * 0`` is NaN."""
    return np.multiply(g, y > 0, out=np.empty_like(y, dtype=g.dtype))


def sum_rows(g):
    """``g.sum(axis=0)``: the bias gradient of a 2-D ``g``."""
    return g.sum(axis=0)


# --- max-pool backward over windows that tile the input exactly (issue 29) ---------------

def max_pool_backward(x, out, grad, kh, kw):
    """The input gradient of a max pooling whose ``kh x kw`` windows tile ``x`` exactly
    (stride == kernel, no padding): each window's ``grad`` at its FIRST tap (row-major)
    equal to the window's max in ``out``, ``grad * 0`` at every other element (so -0 for a
    negative grad, NaN for an infinite or NaN one; a NaN max has no hit). ``x`` is
    (N, C, OH*kh, OW*kw), ``out`` and ``grad`` (N, C, OH, OW); dx has x's layout.

    >>> import numpy as np
    >>> x = np.array([[[[1.0, 3.0], [3.0, 0.0]]]], np.float32)
    >>> max_pool_backward(x, np.array([[[[3.0]]]], np.float32),
    ...                   np.array([[[[2.0]]]], np.float32), 2, 2).ravel().tolist()
    [0.0, 2.0, 0.0, 0.0]
    """
    _tiling_shapes(x, out, grad, kh, kw)
    oh, ow = out.shape[2], out.shape[3]
    taps = [(i * kw + j, (Ellipsis, slice(i, i + kh * oh, kh), slice(j, j + kw * ow, kw)))
            for i in range(kh) for j in range(kw)]
    return routed_max_gradient(np, x, out, grad, taps, exact=True)


def routed_max_gradient(xp, x, out, grad, taps, exact):
    """Max pooling's input gradient, tap by tap, with NumPy or CuPy (``xp``): ``taps`` lists
    ``(t, index)`` in row-major window order, ``x[index]`` being tap t of every window.
    ``exact``: the windows tile x (each element in one window: written once); otherwise
    they overlap or pad, and the contributions add up in tap order into zeros.
    ``MaxPool``'s backward for every case the C++ pass does not take."""
    dx = xp.empty_like(x) if exact else xp.zeros_like(x)
    hit = xp.empty_like(out, dtype=bool)      # out's memory layout: fast loops
    taken = xp.empty_like(hit) if len(taps) > 1 else None
    last = len(taps) - 1
    for t, index in taps:
        # hit: this tap holds the window's max and no earlier tap did (first max wins)
        xp.equal(x[index], out, out=hit)
        if t == 0:
            if last:
                xp.copyto(taken, hit)
        else:
            xp.greater(hit, taken, out=hit)
            if t < last:
                xp.logical_or(taken, hit, out=taken)
        if exact:
            xp.multiply(grad, hit, out=dx[index])
        else:
            dx[index] += grad * hit
    return dx


def _tiling_shapes(x, out, grad, kh, kw):
    if out.ndim != 4 or grad.shape != out.shape:
        raise ValueError(f"out and grad must be 4-D (N, C, OH, OW) of one shape, got {out.shape} "
                         f"and {grad.shape}")
    n, c, oh, ow = out.shape
    if x.shape != (n, c, oh * kh, ow * kw):
        raise ValueError(f"x must have shape {(n, c, oh * kh, ow * kw)} for {kh}x{kw} windows "
                         f"that tile it, got {x.shape}")
