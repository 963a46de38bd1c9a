"""Argument checks shared by the C++ wrappers and the NumPy twins.

Both implementations validate through these helpers, so a bad call raises the same error with
the same message whichever one is active.
"""
import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def float_array(a, name):
    """``a`` as a float32/float64 array (TypeError for any other dtype)."""
    a = np.asarray(a)
    if a.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {a.dtype}")
    return a


def index_array(ids):
    """``ids`` as an int32/int64 array; other integer dtypes are widened to int64."""
    ids = np.asarray(ids)
    if ids.dtype in INDEX_DTYPES:
        return ids
    if ids.dtype.kind == "u" and ids.size and ids.max() > np.iinfo(np.int64).max:
        bad = ids.reshape(-1)[np.argmax(ids.reshape(-1) > np.iinfo(np.int64).max)]
        raise IndexError(f"id {int(bad)} is out of range for any table (ids above 2**63 - 1 "
                         "cannot index a row)")          # not its wrapped int64 value
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    raise TypeError(f"ids must be an integer array, got {ids.dtype}")


def check_ids(ids, rows):
    """IndexError naming the first id (in flat order) outside ``[0, rows)``."""
    if ids.size == 0:
        return
    if ids.min() < 0 or ids.max() >= rows:
        bad = ids.reshape(-1)[np.argmax((ids < 0) | (ids >= rows))]
        raise bad_id_error(int(bad), rows)


def bad_id_error(bad, rows):
    # Keep in step with bad_id_error in cpp/common.h: tests compare the two messages.
    return IndexError(f"id {bad} is out of range for a table of {rows} rows")


def rows_of(ids, values, row_shape, name="values"):
    """Check ``values.shape == ids.shape + row_shape``."""
    expected = tuple(ids.shape) + tuple(row_shape)
    if values.shape != expected:
        raise ValueError(f"{name} must have shape {expected} (one row per id), got {values.shape}")


def table(a, name):
    """A float table with at least one dimension (the row axis)."""
    a = float_array(a, name)
    if a.ndim < 1:
        raise ValueError(f"{name} must have a row axis, got a 0-d array")
    return a


def same_layout(state, name, param):
    """An optimizer state table must match param's shape and dtype."""
    if not isinstance(state, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array updated in place, "
                        f"got {type(state).__name__}")
    if state.shape != param.shape or state.dtype != param.dtype:
        raise ValueError(f"{name} must match param: shape {param.shape} dtype {param.dtype}, "
                         f"got shape {state.shape} dtype {state.dtype}")


def writable(a, name):
    """In-place targets must be writeable NumPy arrays."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} is updated in place and must be a NumPy array, "
                        f"got {type(a).__name__}")
    if not a.flags.writeable:
        raise ValueError(f"{name} is updated in place and must be writeable")
    return a


def out_array(out, shape, dtype, name="out"):
    """Validate a preallocated ``out=`` array or allocate one."""
    if out is None:
        return np.empty(shape, dtype)
    writable(out, name)
    if out.shape != tuple(shape) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"{name} must be a C-contiguous {np.dtype(dtype)} array of shape "
                         f"{tuple(shape)}, got {out.dtype} {out.shape}"
                         f"{'' if out.flags.c_contiguous else ' (not contiguous)'}")
    return out


def positive_ints(**values):
    """Each value as an int >= 1 (ValueError naming the first bad one)."""
    return _ints(values, 1, ">= 1")


def non_negative_ints(**values):
    return _ints(values, 0, ">= 0")


def _ints(values, low, text):
    result = []
    for name, v in values.items():
        if isinstance(v, (bool, np.bool_)) or int(v) != v or v < low:
            raise ValueError(f"{name} must be an integer {text}, got {v!r}")
        result.append(int(v))
    return result


def conv_params(kh, kw, sh, sw, ph, pw, dh, dw):
    """The eight im2col settings as ints, checked (kernel, stride, dilation >= 1, padding >= 0)."""
    kh, kw, sh, sw = positive_ints(kh=kh, kw=kw, sh=sh, sw=sw)
    ph, pw = non_negative_ints(ph=ph, pw=pw)
    dh, dw = positive_ints(dh=dh, dw=dw)
    return kh, kw, sh, sw, ph, pw, dh, dw


def conv_geometry(x_shape, params):
    """``(N, C, H, W, OH, OW)`` of an im2col over an image of ``x_shape``."""
    kh, kw, sh, sw, ph, pw, dh, dw = params
    if len(x_shape) != 4:
        raise ValueError(f"im2col/col2im expect an (N, C, H, W) image, got shape {tuple(x_shape)}")
    n, c, h, w = (int(d) for d in x_shape)
    span_h = h + 2 * ph - dh * (kh - 1) - 1
    span_w = w + 2 * pw - dw * (kw - 1) - 1
    if span_h < 0 or span_w < 0:
        raise ValueError(f"kernel {kh}x{kw} with dilation ({dh}, {dw}) does not fit in the "
                         f"{h}x{w} image padded by ({ph}, {pw})")
    return n, c, h, w, span_h // sh + 1, span_w // sw + 1


def check_cols(cols, x_shape, geometry, params):
    n, c, _, _, oh, ow = geometry
    expected = (n * oh * ow, c * params[0] * params[1])
    if cols.shape != expected:
        raise ValueError(f"cols must have shape {expected} for an image of shape "
                         f"{tuple(x_shape)}, got {cols.shape}")


def winograd_image(a, name, what, kind):
    """A channels-last 4-D float array for a Winograd transform (``kind`` names its axes)."""
    a = float_array(a, name)
    if a.ndim != 4:
        raise ValueError(f"{what} expects an {kind}, got shape {a.shape}")
    return a


def winograd_cover(tiles_h, tiles_w, oh, ow):
    """Raise unless ``tiles_h`` x ``tiles_w`` tiles (2x2 outputs each) cover ``oh`` x ``ow``."""
    if 2 * tiles_h < oh or 2 * tiles_w < ow:
        raise ValueError("the tiles do not cover the output")


def winograd_products(m, out_shape, tiles_h, tiles_w):
    """``(m, tiles_h, tiles_w, (n, oh, ow, c))`` for ``winograd_output``, checked."""
    m = float_array(m, "m")
    tiles_h, tiles_w = positive_ints(tiles_h=tiles_h, tiles_w=tiles_w)
    n, oh, ow, c = (int(d) for d in out_shape)
    if m.shape != (16, n * tiles_h * tiles_w, c):
        raise ValueError(f"m must have shape {(16, n * tiles_h * tiles_w, c)}, got {m.shape}")
    winograd_cover(tiles_h, tiles_w, oh, ow)
    return m, tiles_h, tiles_w, (n, oh, ow, c)


def topk_count(flat, k):
    if flat.ndim != 1:
        raise ValueError(f"topk_abs expects a 1-D array, got shape {flat.shape}")
    if isinstance(k, (bool, np.bool_)) or int(k) != k or not 0 <= k <= flat.size:
        raise ValueError(f"topk_abs: k={k!r} must be an integer between 0 and the size {flat.size}")
    return int(k)


def unpack_scale(scale):
    scale = float(scale)
    if scale == 0.0:
        raise ValueError("fp16_unpack: scale must be non-zero (the values are divided by it)")
    return scale


def half_array(h):
    h = np.asarray(h)
    if h.dtype != np.float16:
        raise TypeError(f"h must be float16, got {h.dtype}")
    return h


def flat_1d(flat, what):
    flat = float_array(flat, "flat")
    if flat.ndim != 1:
        raise ValueError(f"{what} expects a 1-D array, got shape {flat.shape}")
    return flat


def update_args(param, ids, grads):
    """Checked ``(ids, grads)`` for an in-place sparse update of ``param``.

    The ids are not range-checked here: the C++ loops do that on their own pass.
    """
    table(writable(param, "param"), "param")
    ids = index_array(ids)
    grads = float_array(grads, "grads")
    if grads.dtype != param.dtype:
        raise TypeError(f"grads must have param's dtype {param.dtype}, got {grads.dtype}")
    rows_of(ids, grads, param.shape[1:], "grads")
    return ids, grads


def state_tables(param, **tables):
    """Optimizer state tables: writeable arrays with param's shape and dtype."""
    table(writable(param, "param"), "param")
    for name, state in tables.items():
        same_layout(state, name, param)
        writable(state, name)


def adam_step(step):
    if isinstance(step, (bool, np.bool_)) or int(step) != step or step < 1:
        raise ValueError(f"step must be an integer >= 1 (it counts updates from 1), got {step!r}")
    return int(step)


def learning_rate(lr, name="lr"):
    """``lr`` as a float >= 0 (a negative or non-finite rate is a ValueError: it would
    climb the loss, or write NaN into the table)."""
    value = float(lr)
    if not (value >= 0.0 and np.isfinite(value)):
        raise ValueError(f"{name} must be a finite number >= 0, got {lr!r}")
    return value


def ftrl_lr(lr):
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    return float(lr)


def merged_values(ids, values):
    values = float_array(values, "values")
    if values.ndim < 1 or values.shape[:ids.ndim] != ids.shape:
        raise ValueError(f"values must have shape {ids.shape} + row shape (one row per id), "
                         f"got {values.shape}")
    return values
