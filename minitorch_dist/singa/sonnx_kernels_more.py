"""``sonnx`` kernels for ONNX's finer points: pooling with ``auto_pad`` and asymmetric
pads, 1-d ``MatMul``, Dropout's mask, ``Shape(start, end)``, Split into equal parts,
``Pad`` over chosen axes, ``OneHot`` with negative indices, ``ReduceSum``'s
``noop_with_empty_axes``, ``Reshape``'s ``allowzero``, ``ScatterElements``, ``Upsample``
and ``Cast`` to ONNX's narrow types.

ONNX types that have no dtype here (bfloat16, the float8 and float4 formats, int4/int2)
travel as their exact values in float32 (or int32); a Cast to one of them rounds with
ONNX's reference rules (``onnx.reference``), and the backend API hands back arrays of the
declared type.
"""
import numpy as np

from . import autograd as ag
from .tensor_math import new_tensor

__all__ = ["MORE_KERNELS", "host_values"]

_NARROW_INTS = ("int4", "uint4", "int2", "uint2")
_STANDARD = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
             "uint16", "uint32", "uint64")


def host_values(array):
    """``array`` with a narrow ONNX type as float32 (or int32) values, others unchanged."""
    array = np.asarray(array)
    if array.dtype.kind == "V" or array.dtype.name.startswith(("bfloat16", "float8", "float4")):
        return array.astype(np.float32)
    if array.dtype.name in _NARROW_INTS:
        return array.astype(np.int32)
    return array


def _ints(t):
    return [int(v) for v in np.asarray(t.asnumpy()).reshape(-1)]


def _given(xs, i):
    return len(xs) > i and xs[i] is not None


# ---- pooling ----------------------------------------------------------------------------
def _pool_pads(x, attrs, kernel, strides):
    """(begin, end) pads per spatial axis, from ``pads`` or ``auto_pad``."""
    mode = attrs.get("auto_pad", "NOTSET")
    spatial = x.shape[2:]
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s in zip(spatial, kernel, strides):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if mode == "SAME_UPPER" else (large, small))
        return pads
    if mode not in ("NOTSET", "VALID"):
        raise ValueError(f"sonnx: pooling auto_pad={mode!r} is not an ONNX value")
    flat = list(attrs.get("pads", [0] * 2 * len(spatial))) if mode == "NOTSET" else \
        [0] * 2 * len(spatial)
    half = len(flat) // 2
    return list(zip(flat[:half], flat[half:]))


def _pool(is_max):
    def kernel(xs, attrs):
        x = xs[0]
        if attrs.get("ceil_mode", 0) or any(d != 1 for d in attrs.get("dilations", [1])):
            raise NotImplementedError("sonnx: pooling with ceil_mode or dilations is not "
                                      "supported")
        kernel_shape = tuple(attrs["kernel_shape"])
        strides = tuple(attrs.get("strides", [1] * len(kernel_shape)))   # ONNX's default
        pads = _pool_pads(x, attrs, kernel_shape, strides)
        if all(b == e for b, e in pads):
            fn = ag.max_pool_2d if is_max else ag.avg_pool_2d
            if all(b < k for (b, _), k in zip(pads, kernel_shape)):
                return fn(x, kernel_shape, strides, tuple(b for b, _ in pads))
        return _padded_pool(x, is_max, kernel_shape, strides, pads,
                            attrs.get("count_include_pad", 0))
    return kernel


def _padded_pool(x, is_max, kernel_shape, strides, pads, count_pad):
    """Pooling after explicit padding: -inf-like for max; for an average, the sum over the
    window divided by the count of real (or, with ``count_include_pad``, all) cells."""
    onnx_pads = [0, 0] + [b for b, _ in pads] + [0, 0] + [e for _, e in pads]
    if is_max:
        low = float(np.finfo(x.dtype).min)
        return ag.max_pool_2d(ag.pad(x, "constant", onnx_pads, low), kernel_shape, strides, 0)
    summed = ag.avg_pool_2d(ag.pad(x, "constant", onnx_pads, 0.0), kernel_shape, strides, 0)
    if count_pad:
        return summed
    ones = new_tensor(np.ones((1, 1) + tuple(x.shape[2:]), x.dtype), x)
    share = ag.avg_pool_2d(ag.pad(ones, "constant", onnx_pads, 0.0), kernel_shape, strides, 0)
    return ag.div(summed, share)


# ---- shapes and selections ----------------------------------------------------------------
def _matmul(xs, attrs):
    a, b = xs[0], xs[1]
    if a.ndim > 1 and b.ndim > 1:
        return ag.matmul(a, b)
    a2 = ag.reshape(a, [1, a.shape[0]]) if a.ndim == 1 else a
    b2 = ag.reshape(b, [b.shape[0], 1]) if b.ndim == 1 else b
    out = ag.matmul(a2, b2)
    shape = list(out.shape)
    if b.ndim == 1:
        shape.pop(-1)
    if a.ndim == 1:
        shape.pop(-1 if b.ndim == 1 else -2)
    return ag.reshape(out, shape)


def _shape(xs, attrs):
    dims = list(xs[0].shape)
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return new_tensor(np.asarray(dims[start:end], np.int32), xs[0])


def _split(xs, attrs):
    axis = attrs.get("axis", 0)
    if _given(xs, 1):
        return ag.split(xs[0], axis, _ints(xs[1]))
    if "split" in attrs:
        return ag.split(xs[0], axis, list(attrs["split"]))
    count = attrs.get("num_outputs", attrs.get("_outputs", 1))
    size = xs[0].shape[axis]
    step = -(-size // count)                  # ONNX: equal parts, the last one smaller
    parts = [min(step, size - i * step) for i in range(count)]
    return ag.split(xs[0], axis, parts)


def _pad(xs, attrs):
    x = xs[0]
    pads = _ints(xs[1])
    if _given(xs, 3):
        axes = [a % x.ndim for a in _ints(xs[3])]
        full = [0] * (2 * x.ndim)
        for i, axis in enumerate(axes):
            full[axis], full[x.ndim + axis] = pads[i], pads[len(axes) + i]
        pads = full
    constant = float(np.asarray(xs[2].asnumpy()).reshape(-1)[0]) if _given(xs, 2) else 0.0
    return ag.pad(x, attrs.get("mode", "constant"), pads, constant)


def _onehot(xs, attrs):
    depth = _ints(xs[1])[0]
    indices = np.asarray(xs[0].asnumpy()).astype(np.int64)
    indices = np.where(indices < 0, indices + depth, indices)
    indices = np.where((indices < 0) | (indices >= depth), depth, indices)  # out: all off
    values = np.asarray(xs[2].asnumpy())
    hot = ag.onehot(attrs.get("axis", -1), new_tensor(indices.astype(np.int32), xs[0]),
                    depth + 1, values)
    return ag.slice(hot, [0], [depth], [attrs.get("axis", -1)], [1])


def _reduce_sum(xs, attrs):
    axes = list(attrs["axes"]) if "axes" in attrs else (_ints(xs[1]) if _given(xs, 1) else [])
    if not axes and attrs.get("noop_with_empty_axes", 0):
        return ag.identity(xs[0])
    return ag.reduce_sum(xs[0], axes or None, attrs.get("keepdims", 1))


def _reshape(xs, attrs):
    shape = _ints(xs[1])
    if attrs.get("allowzero", 0) and 0 in shape:
        return new_tensor(xs[0].asnumpy().reshape(shape), xs[0])   # an empty result
    return ag.reshape(xs[0], shape)


def _dropout(xs, attrs):
    ratio = float(np.asarray(xs[1].asnumpy()).reshape(-1)[0]) if _given(xs, 1) else \
        attrs.get("ratio", 0.5)
    training = _given(xs, 2) and bool(np.asarray(xs[2].asnumpy()).reshape(-1)[0])
    if not training:
        return ag.identity(xs[0]), new_tensor(np.ones(xs[0].shape, np.float32), xs[0])
    y = ag.dropout(xs[0], attrs.get("seed", 0), ratio)
    return y, new_tensor((np.asarray(y.asnumpy()) != 0).astype(np.float32), xs[0])


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_elements(xs, attrs):
    indices = np.asarray(xs[1].asnumpy()).astype(np.int64)
    axis = attrs.get("axis", 0) % xs[0].ndim
    indices = np.where(indices < 0, indices + xs[0].shape[axis], indices)
    updates = np.asarray(xs[2].asnumpy())
    reduction = attrs.get("reduction", "none")
    if reduction == "none":
        return ag.scatter_elements(xs[0], indices, updates, axis)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"sonnx: ScatterElements reduction={reduction!r} is not one of "
                         f"{['none'] + sorted(_REDUCTIONS)}")
    # repeated indices combine, so this one is computed directly (no gradient, as SINGA
    # has no such operator)
    out = np.array(xs[0].asnumpy())
    coords = list(np.indices(indices.shape))
    coords[axis] = indices
    _REDUCTIONS[reduction].at(out, tuple(coords), updates.astype(out.dtype))
    return new_tensor(out, xs[0])


def _upsample(xs, attrs):
    scales = np.asarray(xs[1].asnumpy()).reshape(-1) if _given(xs, 1) else attrs["scales"]
    return ag.upsample(xs[0], attrs.get("mode", "nearest"), [float(s) for s in scales])


def _channel_view(t, x):
    return ag.reshape(t, [1, -1] + [1] * (x.ndim - 2))


def _batchnorm(xs, attrs):
    """SINGA's batch norm for the usual case (epsilon 1e-5, SINGA's training flag); ONNX's
    own formula for another ``epsilon`` or ``training_mode=1`` (which also returns the
    running statistics, ``momentum`` weighing the old ones)."""
    from .handles import BatchNormHandle
    from . import flags
    x, scale, bias, mean, var = xs[:5]
    eps, momentum = float(attrs.get("epsilon", 1e-5)), float(attrs.get("momentum", 0.9))
    if not attrs.get("training_mode", 0):
        if abs(eps - 1e-5) < 1e-12 or flags.training():
            return ag.batchnorm_2d(BatchNormHandle(1.0 - momentum), x, scale, bias, mean, var)
        return _normalise(x, scale, bias, mean, var, eps)
    array = np.asarray(x.asnumpy())
    axes = (0,) + tuple(range(2, array.ndim))
    batch_mean, batch_var = array.mean(axis=axes), array.var(axis=axes)
    y = _normalise(x, scale, bias, new_tensor(batch_mean.astype(array.dtype), x),
                   new_tensor(batch_var.astype(array.dtype), x), eps)
    new_mean = np.asarray(mean.asnumpy()) * momentum + batch_mean * (1 - momentum)
    new_var = np.asarray(var.asnumpy()) * momentum + batch_var * (1 - momentum)
    return y, new_tensor(new_mean.astype(array.dtype), x), \
        new_tensor(new_var.astype(array.dtype), x)


def _normalise(x, scale, bias, mean, var, eps):
    centred = ag.sub(x, _channel_view(mean, x))
    std = ag.sqrt(ag.add(_channel_view(var, x), new_tensor(np.asarray(eps, x.dtype), x)))
    return ag.add(ag.mul(ag.div(centred, std), _channel_view(scale, x)),
                  _channel_view(bias, x))


# ---- casts ------------------------------------------------------------------------------
def _onnx_dtype(to):
    from ..onnx.builder import _onnx
    return np.dtype(_onnx().helper.tensor_dtype_to_np_dtype(to))


def _cast_to(x, to, saturate):
    dtype = _onnx_dtype(to)
    if dtype == np.bool_:
        return ag.cast(x, np.float32) if x.dtype != np.float32 else ag.identity(x)
    if dtype.name in _STANDARD:          # SINGA's dtypes: float32, float16, int32
        return ag.cast(x, np.float16 if dtype == np.float16 else
                       np.float32 if dtype.kind == "f" else np.int32)
    from onnx.reference.ops.op_cast import cast_to
    narrow = cast_to(np.asarray(x.asnumpy()), to, bool(saturate))
    out = new_tensor(host_values(narrow), x)
    out.onnx_dtype = to
    return out


def _cast(xs, attrs):
    return _cast_to(xs[0], attrs["to"], attrs.get("saturate", 1))


def _cast_like(xs, attrs):
    from ..onnx.builder import _onnx
    to = getattr(xs[1], "onnx_dtype", None)
    if to is None:
        to = _onnx().helper.np_dtype_to_tensor_dtype(np.dtype(xs[1].dtype))
    return _cast_to(xs[0], to, attrs.get("saturate", 1))


MORE_KERNELS = {
    "MaxPool": _pool(True), "AveragePool": _pool(False), "MatMul": _matmul, "Shape": _shape,
    "Split": _split, "Pad": _pad, "OneHot": _onehot, "ReduceSum": _reduce_sum,
    "Reshape": _reshape, "Dropout": _dropout, "ScatterElements": _scatter_elements,
    "Upsample": _upsample, "Cast": _cast, "CastLike": _cast_like,
    "BatchNormalization": _batchnorm,
}
