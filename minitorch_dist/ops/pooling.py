"""2-D max and average pooling over NCHW input.

Both are written as a loop over the kernel's taps: tap (i, j) of every window is one strided
view of the (padded) input, so a 2x2 pooling is four elementwise NumPy/CuPy calls over
whole arrays, whatever the stride, padding or memory layout (outputs keep the input's layout,
e.g. the channels-last memory that Conv2D returns). The same loop serves the common case of
windows that tile the input exactly (kernel == stride, no padding, sizes divisible): a
reshape to (N, C, OH, k, OW, k) reduced over the small axes measured 10-30x slower in
NumPy. In that case backward writes each tap once into an uninitialised buffer instead of
accumulating into zeros.

Max pooling sends each window's gradient to the FIRST maximum in row-major window order, as
PyTorch does; ties (common after a ReLU) do not split the gradient. float16 max pooling on
the host runs these loops on a float32 copy (NumPy's float16 loops convert element by
element); a max and a routed gradient are exact, so the float16 results are the same.

Max pooling's backward routes the gradient tap by tap (``kernels.reference.
routed_max_gradient``: four NumPy or CuPy passes per tap). On the host, windows that tile the
input exactly (float32/float64) take one C++ pass instead (cpp/pooling.cpp), with the same
bits; its twin, ``kernels.reference.max_pool_backward``, is the tap loop for that case.
"""
import numpy as np

from .. import kernels
from ..backend import half
from ..kernels import native, reference
from .conv_geometry import pair as _pair, same_pads as _same_pads
from .primitive import Primitive

__all__ = ["MaxPool", "AvgPool", "max_pool2d", "avg_pool2d"]


class _PoolGeometry:
    """Kernel, stride, pads (top, bottom, left, right) and output size of one pooling."""

    __slots__ = ("kh", "kw", "sh", "sw", "pads", "oh", "ow", "height", "width")

    def __init__(self, height, width, kernel, stride, pad_mode, pads):
        self.kh, self.kw = kernel
        self.sh, self.sw = stride
        self.height, self.width = height, width
        if pad_mode == "same":
            self.pads = _same_pads(height, self.kh, self.sh, 1) + _same_pads(width, self.kw, self.sw, 1)
        else:
            self.pads = pads
        top, bottom, left, right = self.pads
        self.oh = (height + top + bottom - self.kh) // self.sh + 1
        self.ow = (width + left + right - self.kw) // self.sw + 1

    @property
    def padded(self):
        return any(self.pads)

    @property
    def tiles_exactly(self):
        """Every input element lies in exactly one window."""
        return (not self.padded and (self.kh, self.kw) == (self.sh, self.sw)
                and self.height == self.oh * self.kh and self.width == self.ow * self.kw)

    def taps(self):
        """(tap number, index) of each kernel tap: the tap's element of every window."""
        rows, cols = self.sh * (self.oh - 1) + 1, self.sw * (self.ow - 1) + 1
        for i in range(self.kh):
            for j in range(self.kw):
                yield i * self.kw + j, (Ellipsis, slice(i, i + rows, self.sh), slice(j, j + cols, self.sw))

    def unpad(self, array):
        top, _, left, _ = self.pads
        return array[..., top:top + self.height, left:left + self.width]

    def count(self, xp, dtype):
        """Number of real (not padding) elements in each window, shape (OH, OW)."""
        top, _, left, _ = self.pads
        rows = _inside(xp, self.oh, self.sh, self.kh, top, self.height)
        cols = _inside(xp, self.ow, self.sw, self.kw, left, self.width)
        return (rows[:, None] * cols[None, :]).astype(dtype)


def _inside(xp, out_size, stride, kernel, pad_before, size):
    start = xp.arange(out_size) * stride - pad_before
    return xp.minimum(start + kernel, size) - xp.maximum(start, 0)


# one C++ pass where built (an extension built before it lacks it: the twin stands in)
_tiled_max_backward = (native.max_pool_backward if kernels.HAVE_CPP and
                       hasattr(native._C, "max_pool_backward") else reference.max_pool_backward)


def _like(xp, grad, ref):
    """``grad`` in the memory layout of ``ref``: elementwise loops over mixed layouts are slow."""
    if grad.strides == ref.strides:
        return grad
    out = xp.empty_like(ref, dtype=grad.dtype)
    out[...] = grad
    return out


class _Pool2D(Primitive):
    """Shared settings and checks of MaxPool and AvgPool."""

    def __init__(self, kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"):
        owner = type(self).__name__
        if data_format != "NCHW":
            raise ValueError(f"{owner}: only data_format='NCHW' is supported, got {data_format!r}")
        mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
        if mode not in ("valid", "same"):
            raise ValueError(f"{owner}: pad_mode must be 'valid' or 'same', got {pad_mode!r}")
        self.kernel_size = _pair(kernel_size, "kernel_size", owner)
        self.strides = _pair(strides, "strides", owner)
        self.pad_mode = mode
        self.pads = (0, 0, 0, 0)
        self.count_include_pad = False   # "same" padding is left out of averages, as in MindSpore

    def _geometry(self, x):
        if x.ndim != 4:
            raise ValueError(f"{self.name}: expects a 4-D NCHW input, got shape {x.shape}")
        if x.dtype.kind != "f":
            raise TypeError(f"{self.name}: input must be floating point, got {x.dtype}")
        geo = _PoolGeometry(x.shape[2], x.shape[3], self.kernel_size, self.strides, self.pad_mode, self.pads)
        if geo.oh < 1 or geo.ow < 1:
            raise ValueError(f"{self.name}: kernel {self.kernel_size} is larger than the padded input "
                             f"of shape {x.shape}")
        return geo

    def _pad(self, xp, x, geo, value):
        top, bottom, left, right = geo.pads
        return xp.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


class MaxPool(_Pool2D):
    """Max pooling, MindSpore style: ``ops.MaxPool(kernel_size=2, strides=2)(x)``.

    ``pad_mode="same"`` pads so the output is ``ceil(H / stride)``; padding never wins a max.
    The gradient goes to the first maximum of each window.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor(np.arange(16.0, dtype=np.float32).reshape(1, 1, 4, 4))
    >>> ops.MaxPool(kernel_size=2, strides=2)(x).asnumpy()[0, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
    """

    def forward(self, ctx, x):
        geo = self._geometry(x)
        xp = ctx.xp
        ctx.half = half.is_host_half(xp, x)
        if ctx.half:    # float32 loops (a max is exact, so the result is the same)
            x = half.widen(x)
        if geo.padded:
            x = self._pad(xp, x, geo, -xp.inf)
        taps = [x[index] for _, index in geo.taps()]
        out = xp.maximum(taps[0], taps[1]) if len(taps) > 1 else taps[0].copy()
        for tap in taps[2:]:
            xp.maximum(out, tap, out=out)
        ctx.save_for_backward(x, out)
        ctx.geo = geo
        return half.narrow(out) if ctx.half else out

    def backward(self, ctx, grad):
        if ctx.half:
            dx = self._backward(ctx, half.widen(grad))
            return (half.narrow(dx),)     # exact: each value is one gradient or zero
        return (self._backward(ctx, grad),)

    def _backward(self, ctx, grad):
        """The input gradient: each window's gradient at its first maximum."""
        x, out = ctx.saved
        geo = ctx.geo
        xp = ctx.xp
        grad = _like(xp, grad, out)
        exact = geo.tiles_exactly
        if exact and xp is np and not ctx.half:
            return _tiled_max_backward(x, out, grad, geo.kh, geo.kw)
        dx = reference.routed_max_gradient(xp, x, out, grad, list(geo.taps()), exact)
        return geo.unpad(dx) if geo.padded else dx


class AvgPool(_Pool2D):
    """Average pooling, MindSpore style: ``ops.AvgPool(kernel_size=2, strides=2)(x)``.

    With ``pad_mode="same"`` the padding is not counted in the averages (TensorFlow/MindSpore).

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor(np.arange(16.0, dtype=np.float32).reshape(1, 1, 4, 4))
    >>> ops.AvgPool(kernel_size=2, strides=2)(x).asnumpy()[0, 0].tolist()
    [[2.5, 4.5], [10.5, 12.5]]
    """

    def _scale(self, xp, geo, dtype):
        """1 / window size: a number, or an (OH, OW) array when padding is left out."""
        if not geo.padded or self.count_include_pad:
            return 1.0 / (geo.kh * geo.kw)
        return 1.0 / geo.count(xp, dtype)

    def forward(self, ctx, x):
        geo = self._geometry(x)
        xp = ctx.xp
        if geo.padded:
            x = self._pad(xp, x, geo, 0)
        taps = [x[index] for _, index in geo.taps()]
        out = taps[0] + taps[1] if len(taps) > 1 else taps[0].copy()
        for tap in taps[2:]:
            out += tap
        out *= self._scale(xp, geo, x.dtype)
        ctx.geo, ctx.padded_shape = geo, x.shape
        return out

    def backward(self, ctx, grad):
        geo = ctx.geo
        xp = ctx.xp
        share = grad * self._scale(xp, geo, grad.dtype)
        if geo.tiles_exactly:
            dx = xp.empty(ctx.padded_shape, grad.dtype)
            for _, index in geo.taps():
                dx[index] = share
            return (dx,)
        dx = xp.zeros(ctx.padded_shape, grad.dtype)
        for _, index in geo.taps():
            dx[index] += share
        return (geo.unpad(dx) if geo.padded else dx,)


_shared = {}


def _functional(cls, kernel_size, stride, padding, count_include_pad=True):
    owner = cls.__name__
    kernel = _pair(kernel_size, "kernel_size", owner)
    stride = kernel if stride is None else _pair(stride, "stride", owner)
    ph, pw = (padding, padding) if isinstance(padding, int) else tuple(padding)
    if min(ph, pw) < 0 or ph > kernel[0] // 2 or pw > kernel[1] // 2:
        raise ValueError(f"{owner}: padding must be between 0 and half the kernel size "
                         f"{kernel}, got {padding!r}")
    key = (cls, kernel, stride, ph, pw, count_include_pad)
    op = _shared.get(key)
    if op is None:
        op = _shared[key] = cls(kernel, stride)
        op.pads = (ph, ph, pw, pw)
        op.count_include_pad = count_include_pad
    return op


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """PyTorch-style max pooling: ``stride`` defaults to ``kernel_size``; symmetric ``padding``.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.max_pool2d(ms.Tensor(np.ones((2, 3, 8, 8), np.float32)), 2).shape
    (2, 3, 4, 4)
    """
    return _functional(MaxPool, kernel_size, stride, padding)(x)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """PyTorch-style average pooling; padding counts in the averages unless told otherwise."""
    return _functional(AvgPool, kernel_size, stride, padding, count_include_pad)(x)
