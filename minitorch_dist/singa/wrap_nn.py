"""SINGA's CPU kernels from ``singa_wrap``: convolution, pooling and batch normalisation.

``CpuConvForward(x, W, b, handle)``, ``CpuConvBackwardx/W/b``, ``CpuPoolingForward(handle,
x)``, ``CpuPoolingBackward(handle, dy, x, y)`` and ``CpuBatchNormForwardTraining/Inference``
/ ``CpuBatchNormBackwardx`` take and return ``CTensor``\\s, with SINGA's argument order and
handles (``ConvHandle``, ``PoolingHandle``, ``BatchNormHandle``). Convolution and pooling
run the core's primitives (the backward ones through the core engine); batch normalisation
is NumPy with SINGA's epsilon (1e-5) and momentum rule (the handle's factor weighs the
batch; the running variance is unbiased).

>>> from minitorch_dist.singa import singa_wrap as singa
>>> x = singa.Tensor([1, 1, 2, 2]); x.CopyFloatDataFromHostPtr([1.0, 2.0, 3.0, 4.0])
>>> h = singa.PoolingHandle(x, (2, 2), (1, 1), (0, 0), True)
>>> singa.CpuPoolingForward(h, x).GetFloatValue(1).tolist()
[4.0]
"""
import numpy as np

from .. import ops
from ..tensor import Tensor as CoreTensor
from .ctensor import CTensor, raw
from .handles import BatchNormHandle, ConvHandle, PoolingHandle
from .wrap_math import host

__all__ = ["CpuConvForward", "CpuConvBackwardx", "CpuConvBackwardW", "CpuConvBackwardb",
           "CpuPoolingForward", "CpuPoolingBackward", "CpuBatchNormForwardTraining",
           "CpuBatchNormForwardInference", "CpuBatchNormBackwardx"]

_EPS = 1e-5


def _handle(handle, kind, call):
    if not isinstance(handle, kind):
        raise TypeError(f"singa_wrap.{call}: expected a singa_wrap.{kind.__name__}, got "
                        f"{type(handle).__name__}")
    return handle


def _run(fn, arrays, dy=None):
    """``fn`` on core leaves made of ``arrays``; with ``dy``, the leaves' gradients too."""
    leaves = [CoreTensor(np.array(a, np.float32), requires_grad=dy is not None)
              for a in arrays]
    y = fn(*leaves)
    if dy is None:
        return CTensor(array=y.asnumpy())
    y.backward(CoreTensor(np.asarray(dy, np.float32)))
    return [CTensor(array=np.asarray(leaf.grad.asnumpy())) for leaf in leaves]


def _conv(handle):
    def forward(x, W, b=None):
        return ops.conv2d(x, W, b, handle.stride, handle.padding, 1, handle.group)
    return forward


def CpuConvForward(x, W, b, handle):
    """The convolution of ``x`` with ``W`` (plus ``b`` when the handle has a bias)."""
    handle = _handle(handle, ConvHandle, "CpuConvForward")
    arrays = [host(x, "CpuConvForward"), host(W, "CpuConvForward")]
    if handle.bias:
        arrays.append(host(b, "CpuConvForward").reshape(-1))
    return _run(_conv(handle), arrays)


def CpuConvBackwardx(dy, W, x, handle):
    """d(loss)/dx for the output gradient ``dy``."""
    handle = _handle(handle, ConvHandle, "CpuConvBackwardx")
    return _run(_conv(handle), [host(x, "CpuConvBackwardx"), host(W, "CpuConvBackwardx")],
                host(dy, "CpuConvBackwardx"))[0]


def CpuConvBackwardW(dy, x, W, handle):
    """d(loss)/dW for the output gradient ``dy``."""
    handle = _handle(handle, ConvHandle, "CpuConvBackwardW")
    return _run(_conv(handle), [host(x, "CpuConvBackwardW"), host(W, "CpuConvBackwardW")],
                host(dy, "CpuConvBackwardW"))[1]


def CpuConvBackwardb(dy, b, handle):
    """d(loss)/db: ``dy`` summed over the batch and the spatial axes, in ``b``'s shape."""
    _handle(handle, ConvHandle, "CpuConvBackwardb")
    grad = host(dy, "CpuConvBackwardb").sum(axis=(0, 2, 3))
    return CTensor(array=grad.reshape(host(b, "CpuConvBackwardb").shape).astype(np.float32))


def _pool(handle):
    def forward(x):
        if handle.is_max:
            return ops.max_pool2d(x, handle.kernel_size, handle.stride, handle.padding)
        return ops.avg_pool2d(x, handle.kernel_size, handle.stride, handle.padding,
                              count_include_pad=False)
    return forward


def CpuPoolingForward(handle, x):
    """Max or average pooling of ``x`` (the handle's ``is_max``)."""
    handle = _handle(handle, PoolingHandle, "CpuPoolingForward")
    return _run(_pool(handle), [host(x, "CpuPoolingForward")])


def CpuPoolingBackward(handle, dy, x, y):
    """d(loss)/dx for the output gradient ``dy`` (``y``, the forward output, is unused)."""
    handle = _handle(handle, PoolingHandle, "CpuPoolingBackward")
    return _run(_pool(handle), [host(x, "CpuPoolingBackward")],
                host(dy, "CpuPoolingBackward"))[0]


def _channel_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    return axes, x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)


def _as_param(a, like):
    return np.asarray(a, np.float32).reshape([1, -1] + [1] * (like.ndim - 2))


def CpuBatchNormForwardTraining(handle, x, scale, bias, running_mean, running_var):
    """``[y, batch_mean, batch_var]``; ``running_mean``/``running_var`` move in place."""
    handle = _handle(handle, BatchNormHandle, "CpuBatchNormForwardTraining")
    a = host(x, "CpuBatchNormForwardTraining")
    axes, mean, var = _channel_stats(a)
    y = (a - mean) / np.sqrt(var + _EPS) * _as_param(host(scale, "scale"), a) + \
        _as_param(host(bias, "bias"), a)
    count = a.size // a.shape[1]
    unbiased = var * count / max(count - 1, 1)
    m = handle.factor
    for target, batch in ((raw(running_mean), mean), (raw(running_var), unbiased)):
        target[...] = ((1 - m) * target + m * batch.reshape(target.shape)).astype(target.dtype)
    shape = raw(running_mean).shape
    return [CTensor(array=y.astype(a.dtype)), CTensor(array=mean.reshape(shape).astype(a.dtype)),
            CTensor(array=var.reshape(shape).astype(a.dtype))]


def CpuBatchNormForwardInference(handle, x, scale, bias, running_mean, running_var):
    """``x`` normalised with the running statistics."""
    _handle(handle, BatchNormHandle, "CpuBatchNormForwardInference")
    a = host(x, "CpuBatchNormForwardInference")
    mean = _as_param(host(running_mean, "running_mean"), a)
    var = _as_param(host(running_var, "running_var"), a)
    y = _as_param(host(scale, "scale"), a) * (a - mean) / np.sqrt(var + _EPS) + \
        _as_param(host(bias, "bias"), a)
    return CTensor(array=y.astype(a.dtype))


def CpuBatchNormBackwardx(handle, y, dy, x, scale, bias, mean, var):
    """``[dx, dscale, dbias]`` for the output gradient ``dy`` (batch statistics ``mean``
    and ``var``, as the training forward returned them)."""
    _handle(handle, BatchNormHandle, "CpuBatchNormBackwardx")
    a, g = host(x, "CpuBatchNormBackwardx"), host(dy, "CpuBatchNormBackwardx")
    axes = (0,) + tuple(range(2, a.ndim))
    inv_std = 1.0 / np.sqrt(_as_param(host(var, "var"), a) + _EPS)
    x_hat = (a - _as_param(host(mean, "mean"), a)) * inv_std
    dscale = (g * x_hat).sum(axis=axes, keepdims=True)
    dbias = g.sum(axis=axes, keepdims=True)
    count = a.size // a.shape[1]
    dx = _as_param(host(scale, "scale"), a) * inv_std * (g - dbias / count -
                                                         x_hat * dscale / count)
    shape = host(scale, "scale").shape
    return [CTensor(array=dx.astype(a.dtype)), CTensor(array=dscale.reshape(shape)),
            CTensor(array=dbias.reshape(shape))]
