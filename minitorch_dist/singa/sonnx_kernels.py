"""``sonnx``'s kernels: each ONNX operator as the facade's autograd operator.

A kernel is ``kernel(inputs, attrs)`` (inputs: Tensors or None) and returns a Tensor or a
tuple; because every one is a facade autograd call, results carry ``creator`` and train.
Settings that ONNX passes as inputs (shapes, axes, indices) are read from those tensors.
"""
import numpy as np

from . import autograd as ag
from . import tensor
from .handles import ConvHandle
from .sonnx_kernels_more import MORE_KERNELS, host_values

__all__ = ["KERNELS", "make_tensor"]


def make_tensor(array):
    """A facade tensor of SINGA's dtypes: booleans become 0/1 floats, other integers int32,
    float64 float32 (as SINGA's from_numpy); other types are refused there."""
    array = np.asarray(array)
    onnx_type = _narrow_type(array)
    array = host_values(array)
    if array.dtype == bool:
        array = array.astype(np.float32)
    elif array.dtype.kind in "iu" and array.dtype != np.int32:
        array = array.astype(np.int32)
    out = tensor.from_numpy(np.ascontiguousarray(array))
    if onnx_type is not None:
        out.onnx_dtype = onnx_type      # CastLike reads the type it carried
    return out


def _narrow_type(array):
    """The ONNX type code of an array whose type has no dtype here, else None."""
    if host_values(array) is array:
        return None
    from ..onnx.builder import _onnx
    return _onnx().helper.np_dtype_to_tensor_dtype(array.dtype)


def _ints(t):
    return [int(v) for v in np.asarray(t.asnumpy()).reshape(-1)]


def _scalar(t):
    return None if t is None else float(np.asarray(t.asnumpy()).reshape(-1)[0])


def _unary(fn):
    return lambda xs, attrs: fn(xs[0])


def _binary(fn):
    return lambda xs, attrs: fn(xs[0], xs[1])


def _conv(xs, attrs):
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise NotImplementedError("sonnx: Conv with dilations other than 1 is not supported")
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise NotImplementedError(f"sonnx: Conv auto_pad={attrs['auto_pad']!r} is not "
                                  "supported; export with explicit pads")
    x, W = xs[0], xs[1]
    b = xs[2] if len(xs) > 2 else None
    pads = attrs.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise NotImplementedError(f"sonnx: Conv with asymmetric pads {pads} is not supported")
    handle = ConvHandle(None, list(W.shape[2:]), attrs.get("strides", [1, 1]), pads[:2],
                        x.shape[1], W.shape[0], b is not None, attrs.get("group", 1))
    return ag.conv2d(handle, x, W, b)


def _gemm(xs, attrs):
    c = xs[2] if len(xs) > 2 else None
    return ag.gemm(xs[0], xs[1], c, float(attrs.get("alpha", 1.0)),
                   float(attrs.get("beta", 1.0)), attrs.get("transA", 0), attrs.get("transB", 0))


def _axes_input(xs, attrs):
    if "axes" in attrs:
        return list(attrs["axes"])
    return _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else None


def _reduce(fn):
    def kernel(xs, attrs):
        return fn(xs[0], _axes_input(xs, attrs), attrs.get("keepdims", 1))
    return kernel


def _slice(xs, attrs):
    axes = _ints(xs[3]) if len(xs) > 3 and xs[3] is not None else None
    steps = _ints(xs[4]) if len(xs) > 4 and xs[4] is not None else None
    return ag.slice(xs[0], _ints(xs[1]), _ints(xs[2]), axes, steps)


def _constant_of_shape(xs, attrs):
    value = attrs.get("value", np.zeros(1, np.float32))
    return ag.constant_of_shape(xs[0], float(np.asarray(value).reshape(-1)[0]))


def _constant(xs, attrs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            return make_tensor(np.asarray(attrs[key]))
    raise NotImplementedError(f"sonnx: Constant with {sorted(attrs)} is not supported")


def _reduce_extreme(is_max):
    def kernel(xs, attrs):
        from .tensor_math import new_tensor
        axes = _axes_input(xs, attrs)
        fn = np.max if is_max else np.min
        out = fn(xs[0].asnumpy(), axis=tuple(axes) if axes else None,
                 keepdims=bool(attrs.get("keepdims", 1)))
        return new_tensor(np.asarray(out), xs[0])   # no gradient (SINGA has none either)
    return kernel


KERNELS = {
    "Constant": _constant,
    "ReduceMax": _reduce_extreme(True), "ReduceMin": _reduce_extreme(False),
    "Relu": _unary(ag.relu), "Sigmoid": _unary(ag.sigmoid), "Tanh": _unary(ag.tanh),
    "Exp": _unary(ag.exp), "Log": _unary(ag.log), "Sqrt": _unary(ag.sqrt),
    "Abs": _unary(ag.abs), "Neg": _unary(ag.negative), "Reciprocal": _unary(ag.reciprocal),
    "Identity": _unary(ag.identity), "Sign": _unary(ag.sign), "Erf": _unary(ag.erf),
    "Ceil": _unary(ag.ceil), "Floor": _unary(ag.floor), "Round": _unary(ag.rounde),
    "Softsign": _unary(ag.softsign), "Softplus": _unary(ag.softplus), "Not": _unary(ag._not),
    "Cos": _unary(ag.cos), "Cosh": _unary(ag.cosh), "Acos": _unary(ag.acos),
    "Acosh": _unary(ag.acosh), "Sin": _unary(ag.sin), "Sinh": _unary(ag.sinh),
    "Asin": _unary(ag.asin), "Asinh": _unary(ag.asinh), "Tan": _unary(ag.tan),
    "Atan": _unary(ag.atan), "Atanh": _unary(ag.atanh), "NonZero": _unary(ag.nonzero),
    "GlobalAveragePool": _unary(ag.globalaveragepool),
    "Add": _binary(ag.add), "Sub": _binary(ag.sub), "Mul": _binary(ag.mul),
    "Div": _binary(ag.div), "Pow": _binary(ag.pow),
    "PRelu": _binary(ag.prelu), "Less": _binary(ag.less), "Greater": _binary(ag.greater),
    "Equal": _binary(ag.equal), "And": _binary(ag._and), "Or": _binary(ag._or),
    "Xor": _binary(ag._xor),
    "Max": lambda xs, a: ag.max(*xs), "Min": lambda xs, a: ag.min(*xs),
    "Sum": lambda xs, a: ag.sum(*xs), "Mean": lambda xs, a: ag.mean(*xs),
    "Softmax": lambda xs, a: ag.softmax(xs[0], a.get("axis", -1)),
    "LeakyRelu": lambda xs, a: ag.leakyrelu(xs[0], a.get("alpha", 0.01)),
    "Elu": lambda xs, a: ag.elu(xs[0], a.get("alpha", 1.0)),
    "Selu": lambda xs, a: ag.selu(xs[0], a.get("alpha", 1.67326), a.get("gamma", 1.0507)),
    "HardSigmoid": lambda xs, a: ag.hardsigmoid(xs[0], a.get("alpha", 0.2), a.get("beta", 0.5)),
    "Clip": lambda xs, a: ag.clip(xs[0], _scalar(xs[1]) if len(xs) > 1 else None,
                                  _scalar(xs[2]) if len(xs) > 2 else None),
    "Flatten": lambda xs, a: ag.flatten(xs[0], a.get("axis", 1)),
    "Transpose": lambda xs, a: ag.transpose(xs[0], tuple(a.get("perm", range(xs[0].ndim)[::-1]))),
    "Squeeze": lambda xs, a: ag.squeeze(xs[0], _axes_input(xs, a) or ()),
    "Unsqueeze": lambda xs, a: ag.unsqueeze(xs[0], _axes_input(xs, a)),
    "Concat": lambda xs, a: ag.cat(list(xs), a.get("axis", 0)),
    "ReduceMean": _reduce(ag.reduce_mean), "Gemm": _gemm, "Conv": _conv,
    "Slice": _slice, "ConstantOfShape": _constant_of_shape,
    "Gather": lambda xs, a: ag.gather(xs[0], a.get("axis", 0), xs[1].asnumpy()),
    "Tile": lambda xs, a: ag.tile(xs[0], _ints(xs[1])),
    "Expand": lambda xs, a: ag.expand(xs[0], _ints(xs[1])),
    "Where": lambda xs, a: ag.where(xs[1], xs[2], xs[0].asnumpy()),
    "DepthToSpace": lambda xs, a: ag.depth_to_space(xs[0], a["blocksize"], a.get("mode", "DCR")),
    "SpaceToDepth": lambda xs, a: ag.space_to_depth(xs[0], a["blocksize"],
                                                    a.get("mode", "DCR")),
}
KERNELS.update(MORE_KERNELS)
