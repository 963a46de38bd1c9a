"""SINGA's differentiable functions (``autograd.matmul``, ``autograd.relu``, ...) on the core.

Each function is one or a few core primitives (``minitorch_dist.ops``), so the core tape
records it and ``autograd.backward`` or an optimizer differentiates it; nothing here has its
own backward. Argument conventions are SINGA's: ``add_bias(x, b, axis=0)`` adds ``b`` to
every row (``axis=1``: to every column), ``softmax(x, axis=1)``, ``flatten(x, axis=1)``,
``transpose(x, perm)``, ``reduce_mean(x, axes=None, keepdims=1)``, ``gemm(A, B, C, alpha,
beta, transA, transB)``, ``cat(xs, axis=0)``, ``dropout(x, seed=0, ratio=0.5)`` (active
while ``autograd.training`` is true) and losses of shape ``(1,)``.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> x = tensor.from_numpy(np.array([[1.0, -2.0]], np.float32))
>>> autograd.relu(x).asnumpy().tolist(), autograd.leakyrelu(x, 0.5).asnumpy().tolist()
([[1.0, 0.0]], [[1.0, -1.0]])
"""
import numpy as np

from .. import ops
from ..tensor import Tensor as CoreTensor
from . import flags

__all__ = ["matmul", "add_bias", "add", "sub", "mul", "div", "relu", "sigmoid", "tanh",
           "softmax", "leakyrelu", "exp", "log", "sqrt", "abs", "pow", "identity", "negative",
           "reciprocal", "softmax_cross_entropy", "cross_entropy", "binary_cross_entropy",
           "mse_loss", "flatten", "reshape", "transpose", "squeeze", "unsqueeze", "cat",
           "dropout", "reduce_mean", "reduce_sum", "gemm", "mean", "sum", "add_all",
           "max_pool_2d", "avg_pool_2d", "conv2d", "batchnorm_2d", "globalaveragepool"]


def _tensor(x, call, name="x"):
    if not isinstance(x, CoreTensor):
        raise TypeError(f"autograd.{call}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _tensors(call, **named):
    for name, x in named.items():
        _tensor(x, call, name)


# ---- linear algebra and arithmetic ------------------------------------------------------
def matmul(x, w):
    """``x @ w`` for 2-D (or batched) tensors."""
    _tensors("matmul", x=x, w=w)
    if x.ndim < 2 or w.ndim < 2 or x.shape[-1] != w.shape[-2]:
        raise ValueError(f"autograd.matmul: shapes {x.shape} and {w.shape} do not multiply")
    return ops.matmul(x, w) if x.ndim == 2 and w.ndim == 2 else ops.batch_matmul(x, w)


def add_bias(x, b, axis=0):
    """``b`` added to every row of the 2-D ``x`` (``axis=0``) or to every column (1)."""
    _tensors("add_bias", x=x, b=b)
    if axis not in (0, 1) or x.ndim != 2 or b.ndim != 1:
        raise ValueError(f"autograd.add_bias: needs a 2-D x, a 1-D b and axis 0 or 1, got "
                         f"x {x.shape}, b {b.shape}, axis={axis!r}")
    if b.shape[0] != x.shape[1 - axis]:
        raise ValueError(f"autograd.add_bias(axis={axis}): b has {b.shape[0]} values, x has "
                         f"{x.shape[1 - axis]} {'columns' if axis == 0 else 'rows'}")
    return ops.add(x, b if axis == 0 else ops.reshape(b, (-1, 1)))


def add(a, b):
    """``a + b`` with broadcasting."""
    return ops.add(_tensor(a, "add", "a"), b)


def sub(a, b):
    """``a - b`` with broadcasting."""
    return ops.sub(_tensor(a, "sub", "a"), b)


def mul(x, y):
    """Elementwise ``x * y`` with broadcasting."""
    return ops.mul(_tensor(x, "mul"), y)


def div(a, b):
    """Elementwise ``a / b`` with broadcasting."""
    return ops.div(_tensor(a, "div", "a"), b)


def pow(a, b):  # noqa: A001 - SINGA's name
    """Elementwise ``a ** b``."""
    return ops.pow(_tensor(a, "pow", "a"), b)


def negative(x):
    """``-x``."""
    return ops.neg(_tensor(x, "negative"))


def reciprocal(x):
    """``1 / x``."""
    return ops.div(1.0, _tensor(x, "reciprocal"))


def identity(x):
    """``x`` itself, recorded as an operation (a copy)."""
    return ops.mul(_tensor(x, "identity"), 1.0)


# ---- activations ----------------------------------------------------------------------
def relu(x):
    """``max(x, 0)``."""
    return ops.relu(_tensor(x, "relu"))


def sigmoid(x):
    """``1 / (1 + exp(-x))``."""
    return ops.sigmoid(_tensor(x, "sigmoid"))


def tanh(x):
    """Hyperbolic tangent."""
    return ops.tanh(_tensor(x, "tanh"))


def softmax(x, axis=1):
    """Softmax along ``axis`` (SINGA's default: 1)."""
    return ops.softmax(_tensor(x, "softmax"), axis=axis)


def leakyrelu(x, a=0.01):
    """``x`` where positive, ``a * x`` elsewhere."""
    _tensor(x, "leakyrelu")
    return ops.sub(ops.relu(x), ops.mul(ops.relu(ops.neg(x)), float(a)))


def exp(x):
    """Elementwise ``e ** x``."""
    return ops.exp(_tensor(x, "exp"))


def log(x):
    """Elementwise natural logarithm."""
    return ops.log(_tensor(x, "log"))


def sqrt(x):
    """Elementwise square root."""
    return ops.sqrt(_tensor(x, "sqrt"))


def abs(x):  # noqa: A001 - SINGA's name
    """Elementwise ``|x|``."""
    return ops.abs(_tensor(x, "abs"))


# ---- losses (shape (1,), as SINGA returns them) -----------------------------------------
_sce_layers = {}


def softmax_cross_entropy(x, t):
    """Batch mean of ``-log softmax(x)[label]`` for ``(B, C)`` logits; ``t`` holds class
    indices or ``(B, C)`` (one-hot) rows. Shape ``(1,)``."""
    from .layer_basic import SoftMaxCrossEntropy
    _tensors("softmax_cross_entropy", x=x, t=t)
    layer = _sce_layers.get(x.device)
    if layer is None:
        layer = _sce_layers[x.device] = SoftMaxCrossEntropy()
    return layer.forward(x, t)


def _as_target(t, like, call):
    _tensor(t, call, "t")
    data = t.data if t.device is like.device else like.device.copy_from(t.data, t.device)
    return data.astype(like.dtype, copy=False)


def cross_entropy(x, t):
    """``-sum(t * log(x)) / B`` for probabilities ``x`` ``(B, C)``; shape ``(1,)``."""
    _tensor(x, "cross_entropy")
    if x.ndim != 2 or t.ndim > 2:
        raise ValueError(f"autograd.cross_entropy: x must be 2-D and t at most 2-D, got "
                         f"{x.shape} and {t.shape}")
    target = _as_target(t, x, "cross_entropy")
    total = ops.sum(ops.mul(ops.log(x), CoreTensor._make(target, x.device)))
    return ops.reshape(ops.mul(total, -1.0 / x.shape[0]), (1,))


def binary_cross_entropy(x, t):
    """``-sum(t log(x) + (1 - t) log(1 - x)) / B`` for probabilities ``x``; shape ``(1,)``
    (``x`` is kept off 0 and 1 by 1e-4, as in SINGA)."""
    _tensor(x, "binary_cross_entropy")
    target = CoreTensor._make(_as_target(t, x, "binary_cross_entropy"), x.device)
    pos = ops.mul(target, ops.log(ops.add(x, 1e-4)))
    neg = ops.mul(ops.sub(1.0, target), ops.log(ops.sub(1.0001, x)))
    total = ops.sum(ops.add(pos, neg))
    return ops.reshape(ops.mul(total, -1.0 / x.shape[0]), (1,))


def mse_loss(x, t):
    """``sum((x - t)²) / x.size``; shape ``(1,)``."""
    _tensor(x, "mse_loss")
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"autograd.mse_loss: input and target shapes differ: {x.shape}, "
                         f"{t.shape}")
    target = t if t.requires_grad else CoreTensor._make(_as_target(t, x, "mse_loss"), x.device)
    return ops.reshape(ops.mse_loss(x, target, "mean"), (1,))


# ---- shapes ---------------------------------------------------------------------------
def flatten(x, axis=1):
    """``(prod(shape[:axis]), prod(shape[axis:]))``."""
    _tensor(x, "flatten")
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"autograd.flatten: axis {axis} is out of range for shape {x.shape}")
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return ops.reshape(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))))


def reshape(x, shape):
    """``x`` with ``shape``; a 0 keeps that dimension (ONNX), one entry may be -1."""
    _tensor(x, "reshape")
    shape = [x.shape[i] if s == 0 else int(s) for i, s in enumerate(shape)]
    return ops.reshape(x, tuple(shape))


def transpose(x, shape):
    """``x`` with its axes permuted by ``shape`` (SINGA's name for the permutation)."""
    return ops.transpose(_tensor(x, "transpose"), tuple(shape))


def squeeze(x, axis=()):
    """``x`` without the size-1 axes in ``axis`` (all of them if empty)."""
    axis = [axis] if isinstance(axis, int) else list(axis)
    return ops.squeeze(_tensor(x, "squeeze"), tuple(axis) if axis else None)


def unsqueeze(x, axis=-1):
    """``x`` with new size-1 axes at the positions ``axis`` (an int or a list)."""
    _tensor(x, "unsqueeze")
    for a in sorted([axis] if isinstance(axis, int) else list(axis)):
        x = ops.expand_dims(x, a if a >= 0 else a + x.ndim + 1)
    return x


def cat(xs, axis=0):
    """The tensors of the list ``xs`` joined along ``axis``."""
    if not isinstance(xs, (list, tuple)) or not xs:
        raise TypeError(f"autograd.cat(xs, axis): xs must be a non-empty list of Tensors, got "
                        f"{type(xs).__name__}")
    for x in xs:
        _tensor(x, "cat", "xs[i]")
    return ops.concat(list(xs), axis)


# ---- reductions -----------------------------------------------------------------------
def _axes(axes, call):
    if axes is None:
        return None
    return tuple(int(a) for a in ([axes] if isinstance(axes, (int, np.integer)) else axes))


def reduce_mean(x, axes=None, keepdims=1):
    """Mean over ``axes`` (all when None), keeping them as size 1 if ``keepdims``."""
    return ops.mean(_tensor(x, "reduce_mean"), _axes(axes, "reduce_mean"), bool(keepdims))


def reduce_sum(x, axes=None, keepdims=1):
    """Sum over ``axes`` (all when None), keeping them as size 1 if ``keepdims``."""
    return ops.sum(_tensor(x, "reduce_sum"), _axes(axes, "reduce_sum"), bool(keepdims))


def add_all(*xs):
    """``xs[0] + xs[1] + ...``."""
    if not xs:
        raise TypeError("autograd.add_all: needs at least one Tensor")
    total = xs[0]
    for x in xs[1:]:
        total = ops.add(total, x)
    return total


def sum(*xs):  # noqa: A001 - SINGA's name
    """The elementwise sum of the tensors ``xs``."""
    return add_all(*xs)


def mean(*xs):
    """The elementwise mean of the tensors ``xs``."""
    return ops.mul(add_all(*xs), 1.0 / len(xs))


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    """``alpha * A' @ B' + beta * C`` (``'`` = transposed when ``transA``/``transB``)."""
    _tensors("gemm", A=A, B=B)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"autograd.gemm: A and B must be 2-D, got {A.shape} and {B.shape}")
    y = ops.matmul(A, B, transpose_a=bool(transA), transpose_b=bool(transB))
    if alpha != 1.0:
        y = ops.mul(y, float(alpha))
    if C is not None:
        y = ops.add(y, C if beta == 1.0 else ops.mul(C, float(beta)))
    return y


def dropout(x, seed=0, ratio=0.5):
    """While ``autograd.training``: zero each element with probability ``ratio`` and scale
    the rest by ``1 / (1 - ratio)``; otherwise ``x``. The framework's seeded stream draws
    the mask (``Device.SetRandSeed``); a per-call ``seed`` other than 0 is refused."""
    _tensor(x, "dropout")
    if seed != 0:
        raise NotImplementedError(f"autograd.dropout: seed={seed!r} is not supported; the mask "
                                  "comes from the device's seeded stream. Pass seed=0 and call "
                                  "dev.SetRandSeed(...) (or ms.set_seed) once instead")
    if not 0 <= ratio < 1:
        raise ValueError(f"autograd.dropout: ratio must be in [0, 1), got {ratio!r}")
    return ops.dropout(x, float(ratio), training=flags.training())


# ---- convolution, pooling, normalisation --------------------------------------------------
def _wide_pool(x, kernel_size, stride, padding, is_max):
    """Padding past half the kernel (SINGA accepts it): singa/pool_wide.py; else None."""
    from . import pool_wide

    def pair(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (int(v), int(v))
    kernel, pad = pair(kernel_size), pair(padding)
    if not pool_wide.needs_wide(kernel, pad):
        return None
    name = "max_pool_2d" if is_max else "avg_pool_2d"
    return pool_wide.pool(_tensor(x, name), kernel, pair(stride or kernel_size), pad, is_max,
                          f"autograd.{name}")


def max_pool_2d(x, kernel_size, stride=None, padding=0):
    """Max pooling over NCHW input (stride defaults to the kernel size)."""
    wide = _wide_pool(x, kernel_size, stride, padding, True)
    if wide is not None:
        return wide
    return ops.max_pool2d(_tensor(x, "max_pool_2d"), kernel_size, stride, padding)


def avg_pool_2d(x, kernel_size, stride=None, padding=0):
    """Average pooling over NCHW input; padding is left out of the count (SINGA's CPU and
    cuDNN kernels exclude it)."""
    wide = _wide_pool(x, kernel_size, stride, padding, False)
    if wide is not None:
        return wide
    return ops.avg_pool2d(_tensor(x, "avg_pool_2d"), kernel_size, stride, padding,
                          count_include_pad=False)


def globalaveragepool(x, data_format="channels_first"):
    """The mean over the spatial axes, kept as size 1 (ONNX ``GlobalAveragePool``)."""
    _tensor(x, "globalaveragepool")
    axes = tuple(range(2, x.ndim)) if data_format == "channels_first" else \
        tuple(range(1, x.ndim - 1))
    return ops.mean(x, axes, True)


def conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)):
    """SINGA's ``conv2d(handle, x, W, b)``: ``handle`` is a ``singa_wrap.ConvHandle`` that
    holds the stride, padding and group (layers make it; ``layer.Conv2d`` is the usual way)."""
    from .handles import ConvHandle
    if not isinstance(handle, ConvHandle):
        raise TypeError(f"autograd.conv2d(handle, x, W, b): handle must be a "
                        f"singa_wrap.ConvHandle, got {type(handle).__name__}")
    _tensors("conv2d", x=x, W=W)
    if any(odd_padding):
        raise ValueError("autograd.conv2d: odd_padding is not supported; pad symmetrically")
    return ops.conv2d(x, W, b, handle.stride, handle.padding, 1, handle.group)


def batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    """Batch normalisation over NCHW input with SINGA's rule: while ``autograd.training``
    the batch statistics normalise and ``running = (1 - m) * running + m * batch`` (unbiased
    variance, ``m`` the handle's momentum); otherwise the running statistics normalise."""
    from .handles import BatchNormHandle
    if not isinstance(handle, BatchNormHandle):
        raise TypeError(f"autograd.batchnorm_2d(handle, ...): handle must be a "
                        f"singa_wrap.BatchNormHandle, got {type(handle).__name__}")
    _tensors("batchnorm_2d", x=x, scale=scale, bias=bias, running_mean=running_mean,
             running_var=running_var)
    return ops.batch_norm(x, scale, bias, running_mean, running_var,
                          training=flags.training(), momentum=handle.factor, eps=1e-5)
