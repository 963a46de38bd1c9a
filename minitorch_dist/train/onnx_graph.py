"""The MindSpore facade's ONNX front end: a network traced through its primitive calls and
written with the core ONNX package (``minitorch_dist.onnx``), and the kernels that run the
operators it writes when the file is loaded back.

Tracing runs the network once on the example inputs, in inference mode, with a primitive
hook that records each call (the primitive, its inputs, settings and outputs). Each record
becomes ONNX nodes: graph inputs are the example inputs, tensors produced by no call
(parameters, constants, Python numbers) become initializers. Shape-only primitives
(``Reshape``, ``Flatten``, ``Squeeze``, ``ExpandDims``) become a ``Reshape`` to the traced
shape, so the exported graph has the example's batch size, as MindSpore's does. A primitive
without a conversion is an error that names it; nothing is written then.
"""
import numpy as np

from ..autograd import no_grad
from ..ops.conv_geometry import same_pads as _same_pads
from ..ops.primitive import set_primitive_hook
from ..tensor import Tensor

__all__ = ["trace", "write_graph", "facade_kernels"]


def trace(net, inputs):
    """(records, outputs) of ``net(*inputs)``; each record is (prim, args, attrs, out)."""
    records = []

    def hook(prim, args, attrs):
        out = prim.run(*args, **attrs)
        records.append((prim, args, attrs, out))
        return out
    previous = set_primitive_hook(hook)
    if previous is not None:
        set_primitive_hook(previous)
        raise RuntimeError("export: cannot trace inside a pipeline or another traced run")
    training = getattr(net, "training", None)
    try:
        if training is not None:
            net.set_train(False)
        with no_grad():
            outputs = net(*inputs)
    finally:
        set_primitive_hook(None)
        if training is not None:
            net.set_train(training)
    return records, outputs


class _Names:
    """ONNX names of traced tensors; tensors from outside the trace become initializers."""

    def __init__(self, builder):
        self.builder, self.names = builder, {}

    def of(self, value, like=None):
        if isinstance(value, Tensor):
            if id(value) not in self.names:
                name = getattr(value, "name", None)
                self.names[id(value)] = self.builder.constant(value.asnumpy(), name)
            return self.names[id(value)]
        dtype = like.dtype if isinstance(like, Tensor) else None
        return self.builder.constant(np.asarray(value, dtype=dtype))

    def set(self, tensor, name):
        self.names[id(tensor)] = name


_ELEMENTWISE = {"Add": "Add", "TensorAdd": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div",
                "RealDiv": "Div", "Pow": "Pow", "Maximum": "Max", "Minimum": "Min",
                "Neg": "Neg", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt", "Abs": "Abs",
                "ReLU": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Erf": "Erf", "Sin": "Sin",
                "Cos": "Cos", "Sign": "Sign", "Floor": "Floor", "Ceil": "Ceil",
                "Reciprocal": "Reciprocal", "Softsign": "Softsign", "Softplus": "Softplus"}
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "ExpandDims")
_REDUCES = {"ReduceSum": "ReduceSum", "ReduceMean": "ReduceMean", "ReduceMax": "ReduceMax",
            "ReduceMin": "ReduceMin"}


def _pads(prim, x, kernel, stride, dilation=(1, 1)):
    """ONNX pads (top, left, bottom, right) of a conv or pool on input ``x``."""
    if prim.pad_mode == "same":
        top, bottom = _same_pads(x.shape[2], kernel[0], stride[0], dilation[0])
        left, right = _same_pads(x.shape[3], kernel[1], stride[1], dilation[1])
    else:
        top, bottom, left, right = getattr(prim, "pads", (0, 0, 0, 0))
    return [int(top), int(left), int(bottom), int(right)]


def _convert(b, names, prim, args, attrs, out):
    """The ONNX output name of one traced primitive call."""
    kind = type(prim).__name__
    first = next((a for a in args if isinstance(a, Tensor)), None)
    ins = [names.of(a, first) if a is not None else "" for a in args]
    if kind in _ELEMENTWISE:
        return b.node(_ELEMENTWISE[kind], ins)
    if kind == "Rsqrt":
        return b.node("Reciprocal", [b.node("Sqrt", ins)])
    if kind == "Square":
        return b.node("Mul", [ins[0], ins[0]])
    if kind in _RESHAPES:
        return b.node("Reshape", [ins[0], b.constant(np.array(out.shape, np.int64))])
    if kind == "Transpose":
        perm = attrs.get("perm") or tuple(range(first.ndim - 1, -1, -1))
        return b.node("Transpose", [ins[0]], perm=list(perm))
    if kind in ("MatMul", "BatchMatMul"):
        a, c = ins[:2]
        if prim.transpose_a:
            a = b.node("Transpose", [a], perm=_swap_last(args[0].ndim))
        if prim.transpose_b:
            c = b.node("Transpose", [c], perm=_swap_last(args[1].ndim))
        return b.node("MatMul", [a, c])
    if kind == "BiasAdd":
        shape = (1, -1) + (1,) * (first.ndim - 2)
        return b.node("Add", [ins[0], b.node("Reshape", [ins[1], b.constant(np.array(shape, np.int64))])])
    if kind in ("Softmax", "LogSoftmax"):
        axis = attrs.get("axis", getattr(prim, "axis", -1))
        axis = axis[0] if isinstance(axis, (tuple, list)) else axis
        return b.node(kind, [ins[0]], axis=int(axis))
    if kind == "Cast":
        from ..onnx.builder import _onnx
        return b.node("Cast", [ins[0]], to=_onnx().helper.np_dtype_to_tensor_dtype(out.dtype))
    if kind in _REDUCES:
        axis = attrs.get("axis", ())
        axes = list(range(first.ndim)) if axis in ((), None) else \
            [int(a) % first.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
        keep = int(bool(attrs.get("keepdims", False)))
        if kind == "ReduceSum":
            return b.node("ReduceSum", [ins[0], b.constant(np.array(axes, np.int64))], keepdims=keep)
        return b.node(_REDUCES[kind], [ins[0]], axes=axes, keepdims=keep)
    if kind == "Conv2D":
        w = args[1]
        kernel = tuple(w.shape[2:])
        pads = _pads(prim, first, kernel, prim.stride, prim.dilation)
        return b.node("Conv", ins, kernel_shape=list(kernel), strides=list(prim.stride),
                      dilations=list(prim.dilation), pads=pads, group=int(prim.group))
    if kind in ("MaxPool", "AvgPool"):
        pads = _pads(prim, first, prim.kernel_size, prim.strides)
        op = "MaxPool" if kind == "MaxPool" else "AveragePool"
        extra = {} if kind == "MaxPool" else {"count_include_pad": int(bool(prim.count_include_pad))}
        return b.node(op, [ins[0]], kernel_shape=list(prim.kernel_size), strides=list(prim.strides),
                      pads=pads, **extra)
    if kind == "BatchNorm" and not prim.is_training:
        return b.node("BatchNormalization", ins[:5], epsilon=float(prim.epsilon))
    if kind == "Concat":
        return b.node("Concat", ins, axis=int(attrs.get("axis", 0)))
    raise ValueError(f"export: the network cannot be written to ONNX: primitive {prim.name} "
                     f"({kind}) has no ONNX conversion here")


def _swap_last(ndim):
    perm = list(range(ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return perm


def write_graph(net, inputs, builder):
    """Trace ``net(*inputs)`` into ``builder`` (inputs, nodes, outputs declared)."""
    inputs = [x if isinstance(x, Tensor) else Tensor(x) for x in inputs]
    records, outputs = trace(net, inputs)
    names = _Names(builder)
    for i, x in enumerate(inputs):
        names.set(x, builder.input(x.asnumpy(), f"x{i}" if len(inputs) > 1 else "x"))
    for prim, args, attrs, out in records:
        result = _convert(builder, names, prim, args, attrs, out)
        first_out = out[0] if isinstance(out, tuple) else out
        names.set(first_out, result)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    for out in outputs:
        if not isinstance(out, Tensor) or id(out) not in names.names:
            raise ValueError("export: the network's outputs must be tensors computed from its inputs")
        name = names.names[id(out)]
        if name in [i.name for i in builder.inputs]:
            name = builder.node("Identity", [name])
        builder.output(name, out.shape, out.dtype)
    return outputs


def _kernels():
    """Kernels for the operators ``write_graph`` emits beyond the core ones."""
    from .. import ops
    from ..onnx.kernels import _values

    def conv(xs, a):
        top, left, bottom, right = a.get("pads", [0, 0, 0, 0])
        if (top, left) != (bottom, right):
            x = ops.pad(xs[0], (left, right, top, bottom))
            top = left = 0
        else:
            x = xs[0]
        return ops.conv2d(x, xs[1], xs[2] if len(xs) > 2 else None, tuple(a.get("strides", (1, 1))),
                          (top, left), tuple(a.get("dilations", (1, 1))), a.get("group", 1))

    def pool(fn):
        def kernel(xs, a):
            top, left, bottom, right = a.get("pads", [0, 0, 0, 0])
            x = xs[0]
            if any((top, left, bottom, right)):
                value = -np.inf if fn is ops.max_pool2d else 0.0
                x = ops.pad(x, (left, right, top, bottom), value=value)
            return fn(x, tuple(a["kernel_shape"]), tuple(a.get("strides", a["kernel_shape"])))
        return kernel

    def batch_norm(xs, a):
        x, scale, bias, mean, var = xs
        shape = (1, -1) + (1,) * (x.ndim - 2)
        inv = ops.rsqrt(var.reshape(shape) + a.get("epsilon", 1e-5))
        return (x - mean.reshape(shape)) * inv * scale.reshape(shape) + bias.reshape(shape)

    def reduce(fn):
        def kernel(xs, a):
            axes = a.get("axes") or (_values(xs[1]) if len(xs) > 1 and xs[1] is not None else None)
            return fn(xs[0], tuple(axes) if axes else None, bool(a.get("keepdims", 1)))
        return kernel

    from ..onnx.builder import _onnx
    to_np = _onnx().helper.tensor_dtype_to_np_dtype
    return {"Conv": conv, "MaxPool": pool(ops.max_pool2d), "AveragePool": pool(ops.avg_pool2d),
            "BatchNormalization": batch_norm, "Cast": lambda xs, a: ops.cast(xs[0], to_np(a["to"])),
            "Max": lambda xs, a: ops.maximum(xs[0], xs[1]), "Min": lambda xs, a: ops.minimum(xs[0], xs[1]),
            "Reciprocal": lambda xs, a: ops.reciprocal(xs[0]), "Erf": lambda xs, a: ops.erf(xs[0]),
            "Sin": lambda xs, a: ops.sin(xs[0]), "Cos": lambda xs, a: ops.cos(xs[0]),
            "Sign": lambda xs, a: ops.sign(xs[0]), "Floor": lambda xs, a: ops.floor(xs[0]),
            "Ceil": lambda xs, a: ops.ceil(xs[0]), "Softsign": lambda xs, a: ops.softsign(xs[0]),
            "Softplus": lambda xs, a: ops.softplus(xs[0]),
            "LogSoftmax": lambda xs, a: ops.log_softmax(xs[0], a.get("axis", -1)),
            "ReduceMax": reduce(ops.max), "ReduceMin": reduce(ops.min)}


_FACADE_KERNELS = {}


def facade_kernels():
    """The extra kernels (built once, when ONNX is first used)."""
    if not _FACADE_KERNELS:
        _FACADE_KERNELS.update(_kernels())
    return dict(_FACADE_KERNELS)
