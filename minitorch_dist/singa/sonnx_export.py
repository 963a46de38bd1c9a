"""``sonnx.to_onnx``'s walker: from results back to inputs through each ``creator``.

Every facade result knows its creator (a NumPy ``Operator`` holding its inputs in ``src``,
or a :class:`~minitorch_dist.singa.results.Recompute` holding the function and arguments,
a layer's ``forward`` for a layer). The walker emits ONNX nodes for each creator through
:class:`minitorch_dist.onnx.GraphBuilder`; a leaf that is not a graph input becomes an
initializer (weights keep their values). A creator it cannot translate raises
``NotImplementedError`` naming it.
"""
import inspect

import numpy as np

from ..tensor import Tensor as CoreTensor
from . import functional as _f
from .np_ops import NumpyOp

__all__ = ["walk"]

_SAME = ("Cos", "Cosh", "Acos", "Acosh", "Sin", "Sinh", "Asin", "Asinh", "Tan", "Atan",
         "Atanh", "Sign", "Erf", "Ceil", "Floor", "Not", "PRelu", "Max", "Min", "Gather",
         "NonZero", "Expand", "Tile", "Where")
_RENAMED = {"SoftSign": "Softsign", "SoftPlus": "Softplus", "SeLU": "Selu", "Rounde": "Round"}
_FUNCS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "abs": "Abs", "negative": "Neg", "reciprocal": "Reciprocal",
          "identity": "Identity", "matmul": "MatMul", "add": "Add", "sub": "Sub", "mul": "Mul",
          "div": "Div", "pow": "Pow", "globalaveragepool": "GlobalAveragePool",
          "add_all": "Sum", "sum": "Sum", "mean": "Mean"}
_DUNDER = {"__add__": "Add", "__sub__": "Sub", "__mul__": "Mul", "__truediv__": "Div",
           "__pow__": "Pow", "__matmul__": "MatMul", "__radd__": "Add", "__rsub__": "Sub",
           "__rmul__": "Mul", "__rtruediv__": "Div", "__rpow__": "Pow", "__neg__": "Neg"}


def _i64(values):
    return np.asarray(values, np.int64).reshape(-1)


class _Walk:
    def __init__(self, builder, inputs):
        self.g = builder
        self.names = {}
        tensors = [x for x in inputs if isinstance(x, CoreTensor)]
        for i, x in enumerate(tensors):
            # SINGA's run([x]) may give only the first inputs: the others keep the values
            # they had here (an initializer named like the input is its default)
            self.names[id(x)] = builder.input(x.asnumpy())
            if i:
                builder.constant(x.asnumpy(), name=self.names[id(x)])
        self.done = {}          # id(creator) -> output names

    def name(self, t):
        if not isinstance(t, CoreTensor):
            return self.g.constant(np.asarray(t, np.float32))
        if id(t) in self.names:
            return self.names[id(t)]
        creator = getattr(t, "creator", None)
        if creator is None or not hasattr(creator, "backward"):
            self.names[id(t)] = self.g.constant(t.asnumpy())
            return self.names[id(t)]
        if id(creator) not in self.done:
            outs = self.emit(creator)
            self.done[id(creator)] = outs if isinstance(outs, list) else [outs]
        ids = creator.out_ids if hasattr(creator, "out_ids") else \
            sorted(creator.y_id2idx, key=creator.y_id2idx.get)
        outs = self.done[id(creator)]
        key = getattr(t, "_ghost_of", None) or id(t)      # a gone result: its own id
        index = ids.index(key) if key in ids else 0
        self.names[id(t)] = outs[index]
        return outs[index]

    def const(self, values, dtype=np.int64):
        return self.g.constant(np.asarray(values, dtype))

    # ---- creators -----------------------------------------------------------------------
    def emit(self, creator):
        if isinstance(creator, NumpyOp):
            return self.numpy_op(creator)
        fn = creator.fn
        owner = getattr(fn, "__self__", None)
        if owner is not None and hasattr(owner, "get_params"):
            return self.layer(owner, creator)
        name = getattr(fn, "__name__", "")
        if name in _DUNDER:
            return self.dunder(name, creator.args)
        if hasattr(_f, name) and getattr(_f, name) is fn:
            bound = inspect.signature(fn).bind(*creator.args, **creator.kwargs)
            bound.apply_defaults()
            return self.function(name, bound.arguments)
        if name in ("reshape", "transpose") and fn is getattr(CoreTensor, name):
            x, *rest = creator.args
            if name == "reshape":
                return self.g.node("Reshape", [self.name(x), self.const(rest[0])])
            perm = rest or list(range(x.ndim))[::-1]
            return self.g.node("Transpose", [self.name(x)], perm=list(perm))
        raise NotImplementedError(f"sonnx.to_onnx: no ONNX translation for {name!r}")

    def dunder(self, name, args):
        x, other = (args + (None,))[:2]
        a = self.name(x)
        if name == "__neg__":
            return self.g.node("Neg", [a])
        b = self.name(other) if isinstance(other, CoreTensor) else \
            self.g.constant(np.asarray(other, x.dtype))
        return self.g.node(_DUNDER[name], [b, a] if name.startswith("__r") else [a, b])

    def numpy_op(self, op):
        kind = type(op).__name__
        xs = [self.name(x) for x in op.src]
        g = self.g
        if kind in _SAME:
            if kind == "Gather":
                return g.node("Gather", xs + [self.const(op.indices)], axis=op.axis)
            if kind == "Tile":
                reps = [1] * (op.src[0].ndim - len(op.repeats)) + op.repeats
                return g.node("Tile", xs + [self.const(reps)])
            if kind == "Expand":
                return g.node("Expand", xs + [self.const(op.shape)])
            if kind == "Where":
                cond = g.constant(np.asarray(op.condition, bool))
                return g.node("Where", [cond] + xs)
            if kind == "NonZero":
                return g.node("Cast", [g.node("NonZero", xs)], to=6)   # int32, as here
            if kind == "Not":
                return self._to_float(g.node("Not", [self._to_bool(xs[0])]))
            return g.node(kind, xs)
        if kind in _RENAMED:
            attrs = {"alpha": op.alpha, "gamma": op.gamma} if kind == "SeLU" else {}
            return g.node(_RENAMED[kind], xs, **attrs)
        if kind in ("Less", "Greater", "Equal"):
            return self._to_float(g.node(kind, xs))
        if kind in ("And", "Or", "Xor"):
            return self._to_float(g.node(kind, [self._to_bool(x) for x in xs]))
        handler = getattr(self, f"op_{kind}", None)
        if handler is None:
            raise NotImplementedError(f"sonnx.to_onnx: no ONNX translation for the operator "
                                      f"{kind}")
        return handler(op, xs)

    def _to_float(self, name):
        return self.g.node("Cast", [name], to=1)

    def _to_bool(self, name):
        return self.g.node("Cast", [name], to=9)

    def op_HardSigmoid(self, op, xs):
        return self.g.node("HardSigmoid", xs, alpha=op.alpha, beta=op.gamma)

    def op_Elu(self, op, xs):
        return self.g.node("Elu", xs, alpha=float(op.alpha))

    def op_Clip(self, op, xs):
        lo = "" if op.min is None else self.g.constant(np.asarray(op.min, np.float32))
        hi = "" if op.max is None else self.g.constant(np.asarray(op.max, np.float32))
        return self.g.node("Clip", xs + [lo, hi])

    def op_Shape(self, op, xs):
        return self.g.node("Cast", [self.g.node("Shape", xs)], to=6)

    def op_Cast(self, op, xs):
        from ..onnx.builder import _onnx
        return self.g.node("Cast", xs, to=_onnx().helper.np_dtype_to_tensor_dtype(op.to))

    def op_ConstantOfShape(self, op, xs):
        from ..onnx.builder import _onnx
        value = _onnx().numpy_helper.from_array(np.asarray([op.value], np.float32), "value")
        shape = self.g.node("Cast", xs, to=7)
        return self.g.node("ConstantOfShape", [shape], value=value)

    def op_Slice(self, op, xs):
        return self.g.node("Slice", xs + [self.const(op.starts), self.const(op.ends),
                                          self.const(op.axes), self.const(op.steps)])

    def op_Split(self, op, xs):
        parts = op.parts
        if parts is None:
            size = op.src[0].shape[op.axis] // op.num_output
            parts = [size] * op.num_output
        return self.g.node("Split", xs + [self.const(parts)], n_outputs=len(parts),
                           axis=op.axis)

    def op_OneHot(self, op, xs):
        depth = self.const([op.depth])
        values = self.g.constant(np.asarray(op.values, np.float32))
        return self.g.node("OneHot", xs + [depth, values], axis=op.axis)

    def op_Pad(self, op, xs):
        return self.g.node("Pad", xs + [self.const(op.pads),
                                        self.g.constant(np.asarray(op.constant, np.float32))],
                           mode=op.mode)

    def op_DepthToSpace(self, op, xs):
        return self.g.node("DepthToSpace", xs, blocksize=op.blocksize, mode=op.mode)

    def op_SpaceToDepth(self, op, xs):
        return self.g.node("SpaceToDepth", xs, blocksize=op.blocksize)

    def op_Embedding(self, op, xs):
        ids = self.g.node("Cast", [xs[0]], to=7)
        return self.g.node("Gather", [xs[1], ids], axis=0)

    def op_ScatterElements(self, op, xs):
        return self.g.node("ScatterElements", xs + [self.const(op.indices),
                                                    self.g.constant(op.updates)], axis=op.axis)

    # ---- core-built functions -----------------------------------------------------------
    def function(self, name, a):
        g = self.g
        if name in _FUNCS:
            tensors = [v for v in a.values() if isinstance(v, CoreTensor)]
            if name in ("add_all", "sum", "mean"):
                tensors = list(a["xs"])
            return g.node(_FUNCS[name], [self.name(t) for t in tensors])
        x = self.name(a["x"]) if "x" in a else None
        if name == "softmax":
            return g.node("Softmax", [x], axis=a["axis"])
        if name == "leakyrelu":
            return g.node("LeakyRelu", [x], alpha=float(a["a"]))
        if name == "flatten":
            return g.node("Flatten", [x], axis=a["axis"])
        if name == "reshape":
            return g.node("Reshape", [x, self.const(a["shape"])])
        if name == "transpose":
            return g.node("Transpose", [x], perm=list(a["shape"]))
        if name in ("squeeze", "unsqueeze"):
            axes = a["axis"]
            axes = [axes] if isinstance(axes, int) else list(axes)
            extra = [self.const(axes)] if axes else []
            return g.node(name.capitalize(), [x] + extra)
        if name == "cat":
            return g.node("Concat", [self.name(t) for t in a["xs"]], axis=a["axis"])
        if name in ("reduce_sum", "reduce_mean"):
            axes = a["axes"]
            axes = [axes] if isinstance(axes, int) else axes
            if name == "reduce_sum":
                extra = [self.const(axes)] if axes else []
                return g.node("ReduceSum", [x] + extra, keepdims=int(a["keepdims"]))
            return g.node("ReduceMean", [x], axes=list(axes) if axes else None,
                          keepdims=int(a["keepdims"]))
        if name == "add_bias":
            b = self.name(a["b"])
            if a["axis"] == 1:
                b = g.node("Reshape", [b, self.const([-1, 1])])
            return g.node("Add", [x, b])
        if name == "gemm":
            ins = [self.name(a["A"]), self.name(a["B"])]
            ins += [self.name(a["C"])] if a["C"] is not None else []
            return g.node("Gemm", ins, alpha=float(a["alpha"]), beta=float(a["beta"]),
                          transA=int(a["transA"]), transB=int(a["transB"]))
        if name == "dropout":
            return g.node("Dropout", [x, g.constant(np.asarray(a["ratio"], np.float32))])
        if name in ("max_pool_2d", "avg_pool_2d"):
            return self._pool(x, name == "max_pool_2d", a["kernel_size"],
                              a["stride"] or a["kernel_size"], a["padding"])
        if name == "conv2d":
            h = a["handle"]
            ins = [self.name(a["x"]), self.name(a["W"])]
            ins += [self.name(a["b"])] if a["b"] is not None else []
            return g.node("Conv", ins, kernel_shape=list(h.kernel_size), strides=list(h.stride),
                          pads=list(h.padding) * 2, group=h.group)
        if name == "batchnorm_2d":
            ins = [self.name(a[k]) for k in ("x", "scale", "bias", "running_mean",
                                              "running_var")]
            # ONNX's momentum weighs the running value; SINGA's factor weighs the batch
            return g.node("BatchNormalization", ins, momentum=1.0 - float(a["handle"].factor))
        raise NotImplementedError(f"sonnx.to_onnx: no ONNX translation for autograd.{name}")

    def _pool(self, x, is_max, kernel, stride, padding):
        def pair(v):
            return list(v) if isinstance(v, (tuple, list)) else [int(v), int(v)]
        attrs = {"kernel_shape": pair(kernel), "strides": pair(stride),
                 "pads": pair(padding) * 2}
        if not is_max:
            attrs["count_include_pad"] = 0
        return self.g.node("MaxPool" if is_max else "AveragePool", [x], **attrs)

    # ---- layers -------------------------------------------------------------------------
    def layer(self, layer, creator):
        kind = type(layer).__name__
        xs = [self.name(t) for t in creator.args if isinstance(t, CoreTensor)]
        g = self.g
        if kind == "Conv2d":
            ins = xs + [self.name(layer.W)] + ([self.name(layer.b)] if layer.bias else [])
            attrs = {"kernel_shape": list(layer.kernel_size), "strides": list(layer.stride),
                     "dilations": list(layer.dilation), "group": layer.group}
            if layer.pad_mode == "NOTSET":
                attrs["pads"] = list(layer.padding) * 2
            else:
                attrs["auto_pad"] = layer.pad_mode
            y = g.node("Conv", ins, **attrs)
            return g.node("Relu", [y]) if layer.activation == "RELU" else y
        if kind == "Linear":
            y = g.node("MatMul", [xs[0], self.name(layer.W)])
            return g.node("Add", [y, self.name(layer.b)]) if layer.bias else y
        if kind == "Gemm":
            ins = xs + [self.name(layer.W)] + ([self.name(layer.b)] if layer.bias else [])
            return g.node("Gemm", ins, alpha=layer.alpha, beta=layer.beta,
                          transA=layer.transA, transB=layer.transB)
        if kind in ("MaxPool2d", "AvgPool2d", "Pooling2d"):
            if layer.pad_mode != "NOTSET":
                raise NotImplementedError(f"sonnx.to_onnx: {kind} with pad_mode="
                                          f"{layer.pad_mode!r} has no ONNX translation here")
            return self._pool(xs[0], layer.is_max, layer.kernel_size, layer.stride,
                              layer.padding)
        if kind == "BatchNorm2d":
            ins = xs + [self.name(t) for t in (layer.scale, layer.bias, layer.running_mean,
                                               layer.running_var)]
            return g.node("BatchNormalization", ins, momentum=1.0 - layer.momentum,
                          epsilon=1e-5)
        simple = {"ReLU": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Add": "Add"}
        if kind in simple:
            return g.node(simple[kind], xs)
        if kind == "Flatten":
            return g.node("Flatten", xs, axis=layer.axis)
        raise NotImplementedError(f"sonnx.to_onnx: no ONNX translation for layer.{kind}")


def walk(outputs, inputs, builder):
    """Emit the computation from ``inputs`` to ``outputs`` (facade Tensors) into
    ``builder`` and declare the outputs."""
    w = _Walk(builder, inputs)
    for y in outputs:
        builder.output(w.name(y), y.shape, y.dtype)
