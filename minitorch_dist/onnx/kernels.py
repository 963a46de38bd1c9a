"""The core's ONNX kernels: ONNX operators as compositions of ``minitorch_dist.ops``.

Each kernel is ``kernel(inputs, attrs)`` over Tensors (``None`` for an omitted optional
input) and returns a Tensor or a tuple of them. These cover the common arithmetic,
activation and shape operators; front ends add their own (``register`` or the ``kernels``
argument of :func:`minitorch_dist.onnx.load`).

>>> import numpy as np
>>> import minitorch_dist as ms
>>> CORE_KERNELS["Gemm"]([ms.Tensor(np.eye(2, dtype=np.float32)),
...                       ms.Tensor(np.ones((2, 2), np.float32)), None], {}).asnumpy().tolist()
[[1.0, 1.0], [1.0, 1.0]]
"""
import numpy as np

from .. import ops

__all__ = ["CORE_KERNELS", "register"]


def _values(t):
    """The values of a settings input (shape, axes) as a list of ints."""
    return [int(v) for v in np.asarray(t.asnumpy()).reshape(-1)]


def _unary(fn):
    return lambda xs, attrs: fn(xs[0])


def _binary(fn):
    return lambda xs, attrs: fn(xs[0], xs[1])


def _gemm(xs, attrs):
    a, b = xs[0], xs[1]
    if attrs.get("transA", 0):
        a = ops.transpose(a, (1, 0))
    if attrs.get("transB", 0):
        b = ops.transpose(b, (1, 0))
    y = ops.mul(ops.matmul(a, b), float(attrs.get("alpha", 1.0)))
    if len(xs) > 2 and xs[2] is not None:
        y = ops.add(y, ops.mul(xs[2], float(attrs.get("beta", 1.0))))
    return y


def _reshape(xs, attrs):
    shape = _values(xs[1])
    shape = [xs[0].shape[i] if n == 0 else n for i, n in enumerate(shape)]
    return ops.reshape(xs[0], tuple(shape))


def _flatten(xs, attrs):
    axis = attrs.get("axis", 1) % max(xs[0].ndim, 1)
    lead = int(np.prod(xs[0].shape[:axis])) if axis else 1
    return ops.reshape(xs[0], (lead, -1))


def _reduce(fn):
    def kernel(xs, attrs):
        axes = attrs.get("axes")
        if axes is None and len(xs) > 1 and xs[1] is not None:
            axes = _values(xs[1])
        axis = tuple(axes) if axes else None
        return fn(xs[0], axis, bool(attrs.get("keepdims", 1)))
    return kernel


def _sum_all(xs, attrs):
    total = xs[0]
    for x in xs[1:]:
        total = ops.add(total, x)
    return total


CORE_KERNELS = {
    "Add": _binary(ops.add), "Sub": _binary(ops.sub), "Mul": _binary(ops.mul),
    "Div": _binary(ops.div), "Pow": _binary(ops.pow), "MatMul": _binary(ops.matmul),
    "Relu": _unary(ops.relu), "Sigmoid": _unary(ops.sigmoid), "Tanh": _unary(ops.tanh),
    "Exp": _unary(ops.exp), "Log": _unary(ops.log), "Sqrt": _unary(ops.sqrt),
    "Abs": _unary(ops.abs), "Neg": _unary(ops.neg), "Identity": lambda xs, attrs: xs[0],
    "Softmax": lambda xs, attrs: ops.softmax(xs[0], attrs.get("axis", -1)),
    "Transpose": lambda xs, attrs: ops.transpose(xs[0], tuple(attrs["perm"]) if "perm" in attrs
                                                 else None),
    "Concat": lambda xs, attrs: ops.concat(list(xs), attrs.get("axis", 0)),
    "Gemm": _gemm, "Reshape": _reshape, "Flatten": _flatten, "Sum": _sum_all,
    "ReduceSum": _reduce(ops.sum), "ReduceMean": _reduce(ops.mean),
}


def register(op_type, kernel):
    """Add (or replace) the core kernel for ``op_type``."""
    if not callable(kernel):
        raise TypeError(f"minitorch_dist.onnx.register: kernel for {op_type!r} must be "
                        f"callable, got {type(kernel).__name__}")
    CORE_KERNELS[op_type] = kernel
