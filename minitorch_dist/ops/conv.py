"""2-D convolution as im2col + GEMM.

The input patches are unfolded into a matrix ``cols`` of shape (N*OH*OW, C*kh*kw), one row
per output pixel, so the whole batch is one matrix product with the weight seen as
(OC, C*kh*kw). That product comes out as (N*OH*OW, OC), which is channels-last memory: the
output is returned as an NCHW *view* of it rather than copied (elementwise ops and the
pooling primitives keep that layout, and a gradient that comes back in it turns into a
matrix again for free). Inputs with few channels (a network's first layer) are unfolded
tap-major instead, (C*kh*kw, N*OH*OW), and multiplied image by image straight into NCHW:
BLAS threads the skinny whole-batch product of such a layer badly.

The unfolding is a strided-view copy written against ``xp`` (so it runs on CuPy as well),
or the C++ kernel of ``minitorch_dist.kernels`` where that is faster; the folding back
(col2im, for the input gradient) is the C++ kernel on the host and an ``xp`` loop elsewhere.
Patch matrices come from the device's buffer pool and go back to it with the context.

float16 on the host computes in float32 (patches, products and col2im's sums) and rounds
the output and each gradient once to float16 (``backend/half.py``).
"""
import os

from ..backend import half, threads
from . import depthwise
from .conv_geometry import Geometry as _Geometry, explicit_pads as _explicit_pads, pair as _pair
from .primitive import Primitive

__all__ = ["Conv2D", "conv2d"]


def _host_kernels():
    """The host kernels module, or None when it cannot be imported (the xp path is used then)."""
    global _KERNELS
    if _KERNELS is False:
        try:
            from .. import kernels
            _KERNELS = kernels if hasattr(kernels, "col2im") else None
        except ImportError:
            _KERNELS = None
    return _KERNELS


_KERNELS = False   # not looked up yet


def _pad_input(xp, x, geo):
    return xp.pad(x, ((0, 0), (0, 0), (geo.top, geo.bottom), (geo.left, geo.right)))


class _PooledBuffer:
    """Gives a pooled scratch array back to its pool once the context holding it is freed.

    The patch matrix lives exactly as long as the primitive's context (until backward has
    run, or at once under no_grad); recycling it avoids page-faulting megabytes every step.
    """

    __slots__ = ("pool", "array")

    def __init__(self, pool, array):
        self.pool, self.array = pool, array

    def __del__(self):
        self.pool.release(self.array)


def _im2col(xp, x, geo, group, pool):
    """The patches of x (N, C, H, W) as a matrix, its layout, and the pooled buffer holding it.

    The unfolding is the one full pass over the patch data, and the fastest way to make it
    depends on the input's memory layout (measured on the MNIST CNN shapes):

    * channels-last memory (a Conv2D output after BatchNorm/ReLU/pooling): (N*OH*OW, K)
      with columns ordered (i, j, c), layout ``"ijc"``: every tap is a run of C channels.
      On the host the C++ kernel ``im2col_nhwc`` copies those runs (padding inside the loop,
      no padded copy of the input); elsewhere a strided view is copied;
    * NCHW with at least as many channels as output columns: the C++ kernel, (N*OH*OW, K)
      with columns ordered (c, i, j), layout ``"cij"``;
    * otherwise (few channels, e.g. an image): a tap-major copy in which every copied run is
      a row of the image: (K, N*OH*OW) with K ordered (c, i, j), layout ``"taps"``.
    """
    n, c = x.shape[:2]
    rows, row_len = n * geo.oh * geo.ow, c * geo.kh * geo.kw
    channels_last = c > 1 and abs(x.strides[1]) < abs(x.strides[3])
    many_channels = c >= geo.ow
    kernels = _host_kernels() if xp.__name__ == "numpy" else None
    if _pointwise_view(x, geo, group):     # a 1x1 stride-1 conv's patches are its input
        view = x.transpose(0, 2, 3, 1).reshape(rows, row_len)
        return view, "ijc", view
    if _nhwc_kernels(kernels, x, geo, group):
        buf = pool.empty((rows, row_len), x.dtype)
        return kernels.im2col_nhwc(x.transpose(0, 2, 3, 1), *geo.kernel_args(), out=buf), "ijc", buf
    if many_channels and not channels_last and kernels is not None and x.dtype.char in "fd":
        if not geo.symmetric:
            x = _pad_input(xp, x, geo)
        buf = pool.empty((rows, row_len), x.dtype)
        return kernels.im2col(x, *geo.kernel_args(), out=buf), "cij", buf
    if geo.top or geo.bottom or geo.left or geo.right:
        x = _pad_input(xp, x, geo)
    s_n, s_c, s_h, s_w = x.strides
    as_strided = xp.lib.stride_tricks.as_strided
    if group == 1 and (channels_last or many_channels):
        shape = (n, geo.oh, geo.ow, geo.kh, geo.kw, c)
        patches = as_strided(x, shape, (s_n, s_h * geo.sh, s_w * geo.sw, s_h * geo.dh, s_w * geo.dw, s_c))
        buf = pool.empty((rows, row_len), x.dtype)
        xp.copyto(buf.reshape(shape), patches)
        return buf, "ijc", buf
    shape = (c, geo.kh, geo.kw, n, geo.oh, geo.ow)
    taps = as_strided(x, shape, (s_c, s_h * geo.dh, s_w * geo.dw, s_n, s_h * geo.sh, s_w * geo.sw))
    buf = pool.empty((row_len, rows), x.dtype)
    xp.copyto(buf.reshape(shape), taps)
    return buf, "taps", buf


def _pointwise_view(x, geo, group):
    """True for a 1x1, stride-1, unpadded, one-group convolution of channels-last memory:
    the patch matrix is then a free view of the input (no copy to keep for backward)."""
    return ((geo.kh, geo.kw, geo.sh, geo.sw) == (1, 1, 1, 1) and group == 1
            and not (geo.top or geo.bottom or geo.left or geo.right)
            and x.shape[1] > 1 and x.transpose(0, 2, 3, 1).flags.c_contiguous)


def _nhwc_kernels(kernels, x, geo, group):
    """True when the channels-last C++ kernels apply: host, float32/64, x (N, C, H, W) a view
    of (N, H, W, C) memory, one group, symmetric padding."""
    return (kernels is not None and group == 1 and geo.symmetric and x.dtype.char in "fd"
            and x.shape[1] > 1 and x.transpose(0, 2, 3, 1).flags.c_contiguous)


# "auto": Winograd F(2x2, 3x3) where it applies (see _winograd_applies); "im2col": never.
ALGORITHM = os.environ.get("MINITORCH_DIST_CONV_ALGO", "auto")
_WINOGRAD_MIN_CHANNELS = 16     # below this the transforms cost more than the products save
_WINOGRAD_MIN_PIXELS = 1024     # N*OH*OW: below it the weight transforms (per call, ~C*OC*40
                                # values) cost more than the 2.25x fewer multiply-adds save


def _winograd_applies(xp, x, weight, geo, prim):
    """Winograd on the host for 3x3, stride 1, no dilation, one group, the same padding
    (at most 2) on every side, float32/64, at least 16 input and output channels and 1024
    output pixels (N*OH*OW)."""
    return (ALGORITHM == "auto" and xp.__name__ == "numpy" and prim.group == 1
            and weight.shape[2:] == (3, 3) and (geo.sh, geo.sw, geo.dh, geo.dw) == (1, 1, 1, 1)
            and geo.top == geo.bottom == geo.left == geo.right <= 2
            and x.dtype.char in "fd" and x.shape[1] >= _WINOGRAD_MIN_CHANNELS
            and weight.shape[0] >= _WINOGRAD_MIN_CHANNELS
            and x.shape[0] * geo.oh * geo.ow >= _WINOGRAD_MIN_PIXELS
            and _host_kernels() is not None)


_SPLIT_PRODUCT_FLOPS = 1 << 24    # ~0.5 ms of one core
_MIN_SPLIT_SIDE = 128             # the side that is cut: at least 64 rows or columns a piece
_MAX_PIECES = 4                   # pieces of one product (fixed by its shapes, see _matmul)
_SMALL_OUTPUT = 1 << 16           # outputs below this many values, summed over 8x as many: one thread


def _matmul(xp, a, b, out, split=0):
    """``out[...] = a @ b`` on the threads that pay, chosen by the shapes alone.

    On the host:

    * a small output summed over a much longer side (under 2^16 values, at most 1/8 of the
      summed length: a first layer's weight gradient, e.g. 25x20 summed over 36,864 pixels)
      runs on one thread: OpenBLAS's threads, and thin pieces, both ran slower than one;
    * a 2-D product of at least 2^24 multiply-adds whose cut side (rows of ``a`` for
      ``split=0``, columns of ``b`` for ``split=1``) has at least 128, whose output is at
      least 64 on both sides and whose summed side is at least 64 is cut into pieces, each
      a one-thread BLAS call, spread over the threads (``threads.parallel_items``): one fork
      and join per product. With two threads on a busy machine, OpenBLAS's own threaded
      GEMMs took 1-3x the one-thread time here (a ResNet-18 step at 2 threads took 1.2 s
      against 0.39 s with the pieces). The cut depends on the shapes alone, and one thread
      runs the same pieces in turn, so the bits are the same at any thread count;
    * the rest (and a batch of per-image products, sized per product) goes to
      ``threads.product_threads``: one thread when small, else the BLAS's threads. Thin
      outputs stay there: cutting the MNIST CNN's (4096 x 500) @ (500 x 50) in two made its
      step at 2 threads 1.3x slower than with OpenBLAS's threads on a quiet machine.
    """
    flops = a.size * b.shape[-1]
    if xp.__name__ == "numpy" and a.ndim == 2 and out.size < _SMALL_OUTPUT and \
            8 * out.size <= a.shape[1]:
        with threads.product_threads(0):
            xp.matmul(a, b, out=out)
        return out
    side = a.shape[0] if split == 0 else b.shape[-1]
    if xp.__name__ != "numpy" or a.ndim != 2 or flops < _SPLIT_PRODUCT_FLOPS or \
            side < _MIN_SPLIT_SIDE or min(out.shape) < 64 or a.shape[1] < 64:
        with threads.product_threads(flops // a.shape[0] if a.ndim == 3 else flops):
            xp.matmul(a, b, out=out)
        return out
    # The pieces are a function of the shapes, never of the thread count, and one thread
    # runs them in turn rather than the whole product: OpenBLAS's one-thread sgemm (0.3.31
    # on this AMD EPYC) rounds an element according to where it sits in the piece (its last
    # rows, the piece's offset), so one piece per thread gave other bits at 1, 2 and 3
    # threads. 2 or 4 pieces (4 once each keeps 1024 rows or columns): the one-thread cost of
    # cutting grows with the count (every piece repacks the other operand whole); measured at
    # one thread against the uncut product: 2 pieces, or 4 of 1024+, 0-4% (this machine's
    # noise), 8 or 16 pieces 7-30% (8 of 98 rows of (784 x 2304) @ (2304 x 512): +10%).
    pieces = 2
    while pieces < _MAX_PIECES and side // (2 * pieces) >= 1024:
        pieces *= 2

    def piece(i, worker):
        part = slice(side * i // pieces, side * (i + 1) // pieces)
        if split == 1:
            xp.matmul(a, b[:, part], out=out[:, part])
        else:
            xp.matmul(a[part], b, out=out[part])

    threads.parallel_items(pieces, piece)
    return out


class _THREADED:
    """Winograd's ``run``: its blocks spread over the threads in force (backend/threads.py)."""
    workers = staticmethod(threads.parallel_workers)
    items = staticmethod(threads.parallel_items)


def _col2im(xp, cols, x_shape, geo):
    """Adjoint of im2col for "cij" columns: patch gradients summed into an (N, C, H, W) array."""
    n, c, h, w = x_shape
    padded = (n, c, h + geo.top + geo.bottom, w + geo.left + geo.right)
    kernels = _host_kernels() if xp.__name__ == "numpy" else None
    if kernels is not None and cols.dtype.char in "fd":
        if geo.symmetric:
            return kernels.col2im(cols, x_shape, *geo.kernel_args())
        dx = kernels.col2im(cols, padded, *geo.kernel_args())
    else:
        dx = xp.zeros(padded, cols.dtype)
        taps = cols.reshape(n, geo.oh, geo.ow, c, geo.kh, geo.kw)
        rows_end, cols_end = geo.sh * (geo.oh - 1) + 1, geo.sw * (geo.ow - 1) + 1
        for i in range(geo.kh):
            for j in range(geo.kw):
                r0, c0 = i * geo.dh, j * geo.dw
                dx[:, :, r0:r0 + rows_end:geo.sh, c0:c0 + cols_end:geo.sw] += \
                    taps[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dx[:, :, geo.top:geo.top + h, geo.left:geo.left + w]


def _weight_matrix(weight, order):
    """The weight as (OC, K), its columns in the patch order: "ijc", or "cij" (also "taps")."""
    if order == "ijc":
        weight = weight.transpose(0, 2, 3, 1)
    return weight.reshape(weight.shape[0], -1)


class Conv2D(Primitive):
    """2-D convolution (cross-correlation) of NCHW input with an (OC, C/group, kh, kw) weight.

    MindSpore's primitive: ``Conv2D(out_channel, kernel_size, pad_mode="valid", pad=0,
    stride=1, dilation=1, group=1)(x, weight)``. ``pad_mode`` is ``"valid"`` (no padding),
    ``"same"`` (output size ``ceil(H / stride)``, odd padding on the bottom/right as in
    TensorFlow) or ``"pad"`` (``pad`` is an int, ``(h, w)`` or ``(top, bottom, left, right)``).
    An optional third input ``bias`` of shape (OC,) is added to the output. The result is
    NCHW, possibly a view of channels-last memory (see the module docstring).

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor(np.arange(9.0, dtype=np.float32).reshape(1, 1, 3, 3))
    >>> w = ms.Tensor(np.ones((1, 1, 2, 2), np.float32))
    >>> ops.Conv2D(out_channel=1, kernel_size=2)(x, w).asnumpy()[0, 0].tolist()
    [[8.0, 12.0], [20.0, 24.0]]
    """

    split_backward = True     # weight/bias and input gradients share no work
    writes_gradient_slots = True    # channels-last and tap-major dW copied into bucket slots


    def __init__(self, out_channel=None, kernel_size=None, mode=1, pad_mode="valid", pad=0,
                 stride=1, dilation=1, group=1, data_format="NCHW"):
        if mode != 1:
            raise ValueError(f"Conv2D: only mode=1 (convolution) is supported, got {mode!r}")
        if data_format != "NCHW":
            raise ValueError(f"Conv2D: only data_format='NCHW' is supported, got {data_format!r}")
        mode_name = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
        if mode_name not in ("valid", "same", "pad"):
            raise ValueError(f"Conv2D: pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")
        self.pads = _explicit_pads(pad)
        if mode_name != "pad" and any(self.pads):
            raise ValueError(f"Conv2D: pad={pad!r} needs pad_mode='pad', got pad_mode={pad_mode!r}")
        if not isinstance(group, int) or isinstance(group, bool) or group < 1:
            raise ValueError(f"Conv2D: group must be a positive int, got {group!r}")
        self.out_channel = out_channel
        self.kernel_size = None if kernel_size is None else _pair(kernel_size, "kernel_size")
        self.pad_mode = mode_name
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        self.group = group

    def __call__(self, x, weight, bias=None):
        return self.apply(x, weight) if bias is None else self.apply(x, weight, bias)

    def _check(self, x, weight, bias):
        if x.ndim != 4 or weight.ndim != 4:
            raise ValueError(f"{self.name}: expects a 4-D NCHW input and a 4-D (OC, C/group, kh, kw) "
                             f"weight, got input shape {x.shape} and weight shape {weight.shape}")
        for a, what in ((x, "input"), (weight, "weight")):
            if a.dtype.kind != "f":
                raise TypeError(f"{self.name}: {what} must be floating point, got {a.dtype}")
        out_ch, per_group = weight.shape[:2]
        if x.shape[1] != per_group * self.group:
            raise ValueError(f"{self.name}: input of shape {x.shape} has {x.shape[1]} channels but "
                             f"weight of shape {weight.shape} expects {per_group * self.group} "
                             f"({per_group} per group x {self.group} groups)")
        if out_ch % self.group:
            raise ValueError(f"{self.name}: {out_ch} output channels (weight shape {weight.shape}) "
                             f"do not split into {self.group} groups")
        if self.out_channel is not None and out_ch != self.out_channel:
            raise ValueError(f"{self.name}: out_channel={self.out_channel} but weight of shape "
                             f"{weight.shape} has {out_ch} output channels")
        if self.kernel_size is not None and tuple(weight.shape[2:]) != self.kernel_size:
            raise ValueError(f"{self.name}: kernel_size={self.kernel_size} but weight has shape "
                             f"{weight.shape}")
        if bias is not None and bias.shape != (out_ch,):
            raise ValueError(f"{self.name}: bias must have shape ({out_ch},), got {bias.shape}")

    def forward(self, ctx, x, weight, bias=None):
        self._check(x, weight, bias)
        xp = ctx.xp
        dtype = xp.result_type(x, weight)
        x, weight = x.astype(dtype, copy=False), weight.astype(dtype, copy=False)
        ctx.half = half.is_host_half(xp, x, weight)
        if ctx.half:    # float32 compute and accumulation, one rounding of the output
            x, weight = half.widen(x), half.widen(weight)
            dtype = weight.dtype
        geo = _Geometry(x.shape[2], x.shape[3], weight.shape[2:], self.stride, self.dilation,
                        self.pad_mode, self.pads)
        if geo.oh < 1 or geo.ow < 1:
            raise ValueError(f"{self.name}: the (dilated) kernel {tuple(weight.shape[2:])} does not fit "
                             f"in the padded input of shape {x.shape}: output would be "
                             f"{geo.oh}x{geo.ow}")
        pool = ctx.device.pool
        ctx.algorithm = "im2col"
        if ALGORITHM == "auto" and depthwise.applies(x, weight, self.group):
            return self._depthwise_forward(ctx, x, weight, bias, geo)
        if _winograd_applies(xp, x, weight, geo, self):
            return self._winograd_forward(ctx, x, weight, bias, geo)
        ctx.nhwc = _nhwc_kernels(_host_kernels() if xp.__name__ == "numpy" else None, x, geo,
                                 self.group)
        cols, order, buf = _im2col(xp, x, geo, self.group, pool)
        ctx.scratch = _PooledBuffer(pool, buf)
        w2d = _weight_matrix(weight, order)
        n, out_ch, plane = x.shape[0], weight.shape[0], geo.oh * geo.ow
        out = self._forward_products(xp, ctx, cols, order, w2d, bias, n, out_ch, plane, geo)
        ctx.save_for_backward(cols, weight)
        ctx.order, ctx.geo, ctx.x_shape = order, geo, x.shape
        ctx.has_bias = bias is not None
        return out

    def _depthwise_forward(self, ctx, x, weight, bias, geo):
        """One filter per channel: shifted multiply-adds, no patch matrix (``depthwise.py``)."""
        bias = None if bias is None else bias.astype(x.dtype, copy=False)
        out = depthwise.forward(ctx.xp, x, weight, bias, geo)
        ctx.save_for_backward(x, weight)
        ctx.algorithm, ctx.geo, ctx.x_shape, ctx.has_bias = "depthwise", geo, x.shape, bias is not None
        return half.narrow(out) if ctx.half else out

    def _winograd_forward(self, ctx, x, weight, bias, geo):
        """3x3 stride-1 forward by Winograd F(2x2, 3x3) (``kernels/winograd.py``)."""
        from ..kernels import winograd
        pool = ctx.device.pool
        x_nhwc = x.transpose(0, 2, 3, 1)
        if not x_nhwc.flags.c_contiguous:
            x_nhwc = x_nhwc.copy()
        # blocks of tiles spread over the threads, each block on one BLAS thread: one fork
        # and join per call (see threads.parallel_items), and the same bits at any count
        out = winograd.forward(x_nhwc, weight, geo.top, (geo.oh, geo.ow), pool,
                               _THREADED)
        if bias is not None:
            out += bias.astype(out.dtype, copy=False)
        if ctx.half:
            out = half.narrow(out)
        ctx.save_for_backward(x_nhwc, weight)
        ctx.algorithm, ctx.geo, ctx.x_shape = "winograd", geo, x.shape
        ctx.has_bias = bias is not None
        return out.transpose(0, 3, 1, 2)

    def _winograd_backward(self, ctx, grad):
        """Input, weight and bias gradients of the Winograd forward."""
        from ..kernels import winograd
        x_nhwc, weight = ctx.saved
        pool = ctx.device.pool
        g_nhwc = grad.transpose(0, 2, 3, 1)
        if not g_nhwc.flags.c_contiguous:
            g_nhwc = g_nhwc.copy()
        gx = gw = gb = None
        if ctx.needs_input_grad[1]:     # its last, transposing copy into the bucket slot
            slot = None if ctx.grad_slots is None else ctx.grad_slots.get(1)
            strided = winograd.weight_grad(g_nhwc, x_nhwc, ctx.geo.top, pool, _THREADED)
            gw = _copy_into(ctx.xp, strided, slot, weight.shape)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g_nhwc.reshape(-1, weight.shape[0]).sum(axis=0)
        if ctx.needs_input_grad[0]:
            n, c, h, w = ctx.x_shape
            gx = winograd.input_grad(g_nhwc, weight, ctx.geo.top, (h, w), pool,
                                     _THREADED).transpose(0, 3, 1, 2)
        return gx, gw, gb

    def _forward_products(self, xp, ctx, cols, order, w2d, bias, n, out_ch, plane, geo):
        """The output from the patches: per image for "taps", one product otherwise."""
        dtype = w2d.dtype
        if order == "taps":
            # one (OH*OW, K) @ (K, OC) product per image, into channels-last rows like the
            # other layouts (so BatchNorm, ReLU and the next convolution see one layout); a
            # single whole-batch product this skinny is what BLAS threads worst
            patches = cols.reshape(-1, n, plane).transpose(1, 2, 0)      # (N, OH*OW, K)
            out = xp.empty((n, plane, out_ch), dtype)
            for k_rows, o_rows in self._blocks(w2d):
                _matmul(xp, patches[:, :, k_rows], w2d[o_rows].T, out[:, :, o_rows])
            if bias is not None:
                out += bias.astype(dtype, copy=False)
            if ctx.half:
                out = half.narrow(out)
            out = out.reshape(n, geo.oh, geo.ow, out_ch).transpose(0, 3, 1, 2)
        else:
            out = xp.empty((cols.shape[0], out_ch), dtype)
            for k_cols, o_rows in self._blocks(w2d):
                _matmul(xp, cols[:, k_cols], w2d[o_rows].T, out[:, o_rows])
            if bias is not None:
                out += bias.astype(dtype, copy=False)
            if ctx.half:
                out = half.narrow(out)
            out = out.reshape(n, geo.oh, geo.ow, out_ch).transpose(0, 3, 1, 2)
        return out

    def _blocks(self, w2d):
        """Per group: its slice of the patch columns and its rows of the (OC, K/group) weight."""
        out_per_group, k_per_group = w2d.shape[0] // self.group, w2d.shape[1]
        for g in range(self.group):
            yield (slice(g * k_per_group, (g + 1) * k_per_group),
                   slice(g * out_per_group, (g + 1) * out_per_group))

    def backward(self, ctx, grad):
        # threads are spread inside: over Winograd's blocks, or each product cut in pieces
        return self._backward(ctx, grad)

    def _backward(self, ctx, grad):
        """Input, weight and bias gradients (see ``backward``)."""
        if ctx.half:
            grad = half.widen(grad)     # astype keeps a channels-last gradient channels-last
        if ctx.algorithm == "winograd":
            gx, gw, gb = self._winograd_backward(ctx, grad)
        elif ctx.algorithm == "depthwise":
            gx, gw, gb = self._depthwise_backward(ctx, grad)
        else:
            gx, gw, gb = self._im2col_backward(ctx, grad)
        if ctx.half:    # each gradient rounded once to float16
            gx, gw, gb = (None if a is None else half.narrow(a) for a in (gx, gw, gb))
        return (gx, gw, gb) if ctx.has_bias else (gx, gw)

    def _depthwise_backward(self, ctx, grad):
        """Gradients of the depthwise forward (``depthwise.py``); the weight's written into
        its bucket slot where it has one that fits, then scaled there."""
        x, weight = ctx.saved
        slot = None if ctx.grad_slots is None or not ctx.needs_input_grad[1] else \
            _fitting_slot(ctx.grad_slots.get(1), weight.shape, grad)
        gx, gw, gb = depthwise.backward(ctx.xp, x, weight, grad, ctx.geo, *ctx.needs_input_grad[:2],
                                        ctx.has_bias and ctx.needs_input_grad[2],
                                        w_into=None if slot is None else slot[0])
        if slot is not None:
            gw = _scaled_in_place(ctx.xp, *slot)
        return gx, gw, gb

    def _im2col_backward(self, ctx, grad):
        """Gradients of the im2col forward: products with the saved patches, col2im."""
        cols, weight = ctx.saved
        xp = ctx.xp
        out_ch = weight.shape[0]
        want_w = ctx.needs_input_grad[1]
        want_b = ctx.has_bias and ctx.needs_input_grad[2]
        # a free reshape when grad is channels-last, like the output forward returned
        g2d = grad.transpose(0, 2, 3, 1).reshape(-1, out_ch)
        # a bucket slot for the weight gradient (data parallel): the layouts that must copy
        # their product into (OC, C, kh, kw) memory anyway copy it there, scaled
        slot = None if ctx.grad_slots is None else ctx.grad_slots.get(1)
        if ctx.order == "taps":
            gw, gb = self._param_grads_taps(xp, cols, g2d, weight, want_w, want_b, slot)
        else:
            gw, gb = self._param_grads_batched(xp, cols, g2d, weight, ctx.order, want_w, want_b,
                                               slot)
        gx = None
        if ctx.needs_input_grad[0]:   # a network's first layer needs no input gradient
            gx = self._input_grad(xp, ctx, g2d, weight)
        return gx, gw, gb

    def _input_grad(self, xp, ctx, g2d, weight):
        """dX: the patch gradients G @ W folded back (col2im) into the input's layout."""
        pool = ctx.device.pool
        nhwc = ctx.order == "ijc" and ctx.nhwc
        w2d = _weight_matrix(weight, "ijc" if nhwc else "cij")
        dcols = pool.empty((g2d.shape[0], w2d.shape[1] * self.group), g2d.dtype)
        for k_cols, o_rows in self._blocks(w2d):
            _matmul(xp, g2d[:, o_rows], w2d[o_rows], dcols[:, k_cols])
        if nhwc:    # channels-last in, channels-last gradient out (C++ col2im_nhwc)
            n, c, h, w = ctx.x_shape
            gx = _host_kernels().col2im_nhwc(dcols, (n, h, w, c), *ctx.geo.kernel_args())
            gx = gx.transpose(0, 3, 1, 2)
        else:
            gx = _col2im(xp, dcols, ctx.x_shape, ctx.geo)
        pool.release(dcols)   # scratch: col2im has summed it into gx
        return gx

    def _param_grads_batched(self, xp, cols, g2d, weight, order, want_w, want_b, slot=None):
        """dW = G^T @ cols and db = column sums of G, for (N*OH*OW, K) patches; channels-last
        ("ijc") patches give dW in (OC, kh, kw, C) order, copied into ``slot`` where it fits
        (``_copy_into``), else into a new array. NCHW ("cij") patches give it in (OC, C, kh,
        kw) order: the products are made in the slot itself where it fits."""
        gw = gb = None
        if want_w:
            out_ch = weight.shape[0]
            into = _fitting_slot(slot, weight.shape, cols) if order != "ijc" else None
            gw = xp.empty((out_ch, cols.shape[1] // self.group), cols.dtype) if into is None \
                else into[0].reshape(out_ch, -1)    # a view: the slot is contiguous
            for k_cols, o_rows in self._blocks(gw):
                _matmul(xp, g2d[:, o_rows].T, cols[:, k_cols], gw[o_rows], split=1)
            if order == "ijc":   # back to (OC, C, kh, kw) memory: optimizers get a plain array
                gw = _copy_into(xp, gw.reshape(out_ch, weight.shape[2], weight.shape[3], -1)
                                .transpose(0, 3, 1, 2), slot, weight.shape)
            elif into is not None:
                gw = _scaled_in_place(xp, *into)
            else:
                gw = gw.reshape(weight.shape)
        if want_b:
            gb = xp.ones(g2d.shape[0], g2d.dtype) @ g2d   # BLAS, faster than sum(axis=0)
        return gw, gb

    def _param_grads_taps(self, xp, cols, g2d, weight, want_w, want_b, slot=None):
        """The same for tap-major (K, N*OH*OW) patches: dW = G^T @ cols^T, one product,
        computed transposed and copied into ``slot`` where it fits, else a new array."""
        gw = gb = None
        if want_w:
            # computed transposed, (K, OC) = cols @ G: with two BLAS threads OpenBLAS took
            # 30x longer for G^T @ cols^T (both operands transposed, K = N*OH*OW large)
            gw_t = xp.empty((cols.shape[0] // self.group, weight.shape[0]), cols.dtype)
            for k_rows, o_rows in self._blocks(gw_t.T):
                _matmul(xp, cols[k_rows], g2d[:, o_rows], gw_t[:, o_rows])
            gw = _copy_into(xp, gw_t.T, slot, weight.shape)
        if want_b:
            gb = xp.ones(g2d.shape[0], g2d.dtype) @ g2d   # BLAS, as in the batched layout
        return gw, gb


def _fitting_slot(slot, shape, like):
    """``slot`` (array, scale) when its array can hold a gradient of ``shape`` with the dtype
    and array type of ``like``, else None. The array must be contiguous: the callers write
    through reshaped views of it, which would otherwise be copies."""
    if slot is not None:
        array = slot[0]
        if array.shape == shape and array.dtype == like.dtype and type(array) is type(like) \
                and array.flags.c_contiguous:
            return slot
    return None


def _scaled_in_place(xp, array, scale):
    """A slot's array, computed in place, times the slot's scale: a power of two, so the
    bits are those of the bucket's scaled copy."""
    if scale != 1:
        xp.multiply(array, scale, out=array)
    return array


def _copy_into(xp, view, slot, shape):
    """The weight gradient ``view`` (strided) as contiguous memory of ``shape``: the slot's
    array times its scale where the slot fits (the copy a bucket would make, made by the copy
    this layout needs anyway: the same bits), else a new array."""
    if _fitting_slot(slot, shape, view) is None:
        return xp.ascontiguousarray(view).reshape(shape)
    array, scale = slot
    target = array.reshape(view.shape)      # a view: the slot is contiguous
    if scale != 1:
        xp.multiply(view, scale, out=target)
    else:
        xp.copyto(target, view)
    return array


_shared = {}


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch-style convolution: ``padding`` is an int, ``(h, w)``, ``"valid"`` or ``"same"``.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> x = ms.Tensor(np.ones((2, 3, 5, 5), np.float32)); w = ms.Tensor(np.ones((4, 3, 3, 3), np.float32))
    >>> ops.conv2d(x, w, padding=1).shape
    (2, 4, 5, 5)
    """
    if isinstance(padding, str):
        pad_mode, pad = padding.lower(), 0
    else:
        pad_mode, pad = "pad", padding
    key = (_pair(stride, "stride"), pad_mode, pad if isinstance(pad, int) else tuple(pad),
           _pair(dilation, "dilation"), groups)
    op = _shared.get(key)
    if op is None:
        op = _shared[key] = Conv2D(pad_mode=pad_mode, pad=pad, stride=stride, dilation=dilation,
                                   group=groups)
    return op(x, weight, bias)
