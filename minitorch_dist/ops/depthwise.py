"""Depthwise 2-D convolution (one filter per channel) as shifted multiply-adds.

A depthwise convolution (``group`` equal to the input channels, one output channel each: what
separable convolutions start with) has no sum over channels, so im2col's patch matrix buys
no matrix product: it is a (N*OH*OW, kh*kw) copy per channel, kh*kw times the input, kept
for backward. Here each tap is instead one broadcast multiply-add of a strided view of the
padded input, and backward keeps only the input:

* ``y[n, c] = sum over taps (ky, kx) of w[c, ky, kx] * xpad[n, c, ky*dh + sh*i, kx*dw + sw*j]``
* ``dw[c, ky, kx] = sum over n, i, j of g[n, c, i, j] * xpad[n, c, ...]`` (the same views)
* ``dxpad[n, c, view] += w[c, ky, kx] * g[n, c]``, cropped back to the input.

Written against ``xp``, so it runs on CuPy as well. Conv2D sends a depthwise call here
(``applies``); ``python_tests/test_conv_depthwise.py`` checks it against the im2col path.
"""

__all__ = ["applies", "forward", "backward"]


def applies(x, weight, group):
    """Depthwise with multiplier 1: one filter of one channel per input channel."""
    channels = x.shape[1]
    return group > 1 and group == channels and weight.shape[0] == channels and weight.shape[1] == 1


def _padded(xp, x, geo):
    if not (geo.top or geo.bottom or geo.left or geo.right):
        return x
    return xp.pad(x, ((0, 0), (0, 0), (geo.top, geo.bottom), (geo.left, geo.right)))


def _taps(geo):
    """(ky, kx, the strided window of the padded input that tap reads)."""
    rows, cols = geo.sh * (geo.oh - 1) + 1, geo.sw * (geo.ow - 1) + 1
    for ky in range(geo.kh):
        for kx in range(geo.kw):
            top, left = ky * geo.dh, kx * geo.dw
            yield ky, kx, (slice(None), slice(None), slice(top, top + rows, geo.sh),
                           slice(left, left + cols, geo.sw))


def _channel(w, ky, kx):
    """One tap's per-channel weights, shaped to broadcast over (N, C, OH, OW)."""
    return w[:, 0, ky, kx].reshape(1, -1, 1, 1)


def _empty_like_layout(xp, x, shape):
    """An (N, C, H, W) array in x's memory layout: channels-last when x is (as Conv2D and
    BatchNorm hand it on), NCHW otherwise."""
    n, c, h, w = shape
    if x.ndim == 4 and x.strides[1] < x.strides[3]:
        return xp.empty((n, h, w, c), x.dtype).transpose(0, 3, 1, 2)
    return xp.empty(shape, x.dtype)


def forward(xp, x, weight, bias, geo):
    """The output (N, C, OH, OW), computed in x's dtype."""
    xpad = _padded(xp, x, geo)
    out = _empty_like_layout(xp, x, (x.shape[0], x.shape[1], geo.oh, geo.ow))
    term = None
    for ky, kx, window in _taps(geo):
        view = xpad[window]
        if term is None:
            xp.multiply(view, _channel(weight, ky, kx), out=out)
            term = _empty_like_layout(xp, x, out.shape)
        else:
            xp.multiply(view, _channel(weight, ky, kx), out=term)
            out += term
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def backward(xp, x, weight, grad, geo, want_x, want_w, want_b, w_into=None):
    """(dx, dw, db), each None where not wanted; dw written into ``w_into`` where given (an
    array of the weight's shape and the gradient's dtype: every element is written)."""
    xpad = _padded(xp, x, geo) if want_w else None
    gx_pad = xp.zeros((x.shape[0], x.shape[1], x.shape[2] + geo.top + geo.bottom,
                       x.shape[3] + geo.left + geo.right), grad.dtype) if want_x else None
    gw = None
    if want_w:
        gw = xp.zeros(weight.shape, grad.dtype) if w_into is None else w_into
    for ky, kx, window in _taps(geo):
        if want_w:
            gw[:, 0, ky, kx] = xp.einsum("nchw,nchw->c", grad, xpad[window])
        if want_x:
            gx_pad[window] += grad * _channel(weight, ky, kx)
    gx = None
    if want_x:
        gx = gx_pad[:, :, geo.top:gx_pad.shape[2] - geo.bottom,
                    geo.left:gx_pad.shape[3] - geo.right]
    gb = grad.sum(axis=(0, 2, 3)) if want_b else None
    return gx, gw, gb
