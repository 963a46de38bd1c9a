"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3), on channels-last host arrays.

A 3x3 convolution computes each 2x2 output tile from a 4x4 input tile. Winograd's minimal
filtering (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015) writes a
tile as ``Y = A^T [(G w G^T) * (B^T d B)] A``; summed over channels, the ``*`` becomes 16
matrix products, one per point of the 4x4 transformed tile, of (tiles x C) by (C x OC). That
is 16 multiply-adds per tile and channel pair where im2col + GEMM does 36 (2.25x fewer), and
the products are plain BLAS calls. The transforms around them are the C++ kernels
``winograd_input`` / ``winograd_output`` / ``winograd_grad`` (NumPy twins in ``reference``).

The three products of a training step:

* forward: ``V = input tiles of x``, ``M[k] = V[k] @ U[k]`` with ``U = G w G^T``, ``y = A^T M A``;
* input gradient: for stride 1 it is the same convolution of the output gradient with the
  kernel flipped and its channel axes swapped, padded by ``2 - pad``;
* weight gradient: ``dW = G^T [sum over tiles (A g A^T) * V] G``, 16 products
  ``S[k]^T @ V[k]`` per block of tiles, summed.

Rounding differs from im2col's (the transforms add and subtract before the products), by a
few float32 ulps of the largest terms: ``python_tests/test_conv_winograd.py`` bounds it
against float64 references and PyTorch.
"""
import numpy as np

from . import winograd_grad, winograd_input, winograd_output

__all__ = ["tile_counts", "weight_tiles", "forward", "weight_grad", "input_grad"]


def tile_counts(height, width):
    """2x2 output tiles per column and per row covering an ``height x width`` output.

    >>> tile_counts(32, 31)
    (16, 16)
    """
    return -(-height // 2), -(-width // 2)


def _at(a, i, axis):
    """``a``'s slice ``i`` along ``axis`` as a view (``np.take`` copies)."""
    return a[(slice(None),) * axis + (i,)]


def _g_rows(w, axis):
    """``G @ w`` along ``axis`` (of length 3): the 4 rows w0, (w0+w1+w2)/2, (w0-w1+w2)/2, w2,
    stacked on that axis (G's entries are 0, 1/2 and 1: adds and halvings, exact scaling)."""
    w0, w1, w2 = (_at(w, i, axis) for i in range(3))
    s = w0 + w2
    return np.stack([w0, (s + w1) * 0.5, (s - w1) * 0.5, w2], axis=axis)


def _gt_rows(z, axis):
    """``G^T @ z`` along ``axis`` (of length 4): z0 + (z1+z2)/2, (z1-z2)/2, (z1+z2)/2 + z3."""
    z0, z1, z2, z3 = (_at(z, i, axis) for i in range(4))
    h = (z1 + z2) * 0.5
    return np.stack([z0 + h, (z1 - z2) * 0.5, h + z3], axis=axis)


def weight_tiles(weight):
    """``U[k] = (G w G^T)[k]`` for a weight (OC, C, 3, 3): an array (16, C, OC).

    >>> u = weight_tiles(np.ones((2, 5, 3, 3), np.float32))
    >>> u.shape, float(u[5, 0, 0])          # point (1, 1): (3/2) * (3/2)
    ((16, 5, 2), 2.25)
    """
    oc, c = weight.shape[:2]
    taps = np.ascontiguousarray(weight.transpose(2, 3, 1, 0))   # (3, 3, C, OC), one copy
    rows = _g_rows(taps, 0)                                # (4, 3, C, OC): G along i
    u = _g_rows(rows, 1)                                   # (4, 4, C, OC): G along j
    return u.reshape(16, c, oc)


def _weight_from_tiles(z, oc, c):
    """``dW[o, c] = G^T Z[:, :, o, c] G`` for Z (4, 4, OC, C): the weight gradient (OC, C, 3, 3),
    a strided view (its memory is (3, 3, OC, C))."""
    rows = _gt_rows(z, 0)                                  # (3, 4, OC, C)
    dw = _gt_rows(rows, 1)                                 # (3, 3, OC, C)
    return dw.transpose(2, 3, 0, 1)


TILES_PER_BLOCK = 512    # tiles transformed and multiplied at a time (a few MB: stays in cache)


MIN_BLOCKS = 4    # blocks to share between threads; fixed, so the sums do not depend on them


def _image_blocks(n, tiles_per_image):
    """Slices of whole images of at most about TILES_PER_BLOCK tiles each, and at least
    MIN_BLOCKS of them when there are that many images. The cut depends on the sizes alone,
    never on the thread count: the weight gradient sums the blocks' products in block order."""
    step = max(1, min(TILES_PER_BLOCK // max(tiles_per_image, 1), -(-n // MIN_BLOCKS)))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


class _Sequential:
    """The default ``run``: every block on the calling thread."""

    @staticmethod
    def workers(count):
        return 1

    @staticmethod
    def items(count, fn):
        for i in range(count):
            fn(i, 0)


_sequential = _Sequential()


def _buffers(pool, count, *shapes_dtype):
    """``count`` sets of scratch arrays, taken on the calling thread (the pool is not
    thread-safe)."""
    take = (lambda s, d: pool.empty(s, d)) if pool is not None else np.empty
    return [[take(s, d) for s, d in shapes_dtype] for _ in range(count)]


def _release(pool, sets):
    if pool is not None:
        for arrays in sets:
            for a in arrays:
                pool.release(a)


def forward(x_nhwc, weight, pad, out_hw, pool=None, run=_sequential):
    """The convolution of channels-last ``x_nhwc`` (N, H, W, C) with ``weight`` (OC, C, 3, 3),
    zero-padded by ``pad``: returns the channels-last output (N, OH, OW, OC).

    The images go through in blocks of about :data:`TILES_PER_BLOCK` tiles: transform,
    16 products, inverse transform, so that the transformed tiles (16 values per tile and
    channel, 4x the input) stay in cache instead of making a round trip through memory.
    ``run`` has ``items(count, fn)``, which calls ``fn(block, worker)`` for every block, and
    ``workers(count)`` (``backend.threads`` spreads the blocks over threads; the default runs
    them here); blocks are independent, so the result is the same.
    """
    n, c = x_nhwc.shape[0], x_nhwc.shape[3]
    oh, ow = out_hw
    oc = weight.shape[0]
    th, tw = tile_counts(oh, ow)
    u = weight_tiles(weight)
    out = np.empty((n, oh, ow, oc), x_nhwc.dtype)
    blocks = _image_blocks(n, th * tw)
    dtype = x_nhwc.dtype
    rows = (blocks[0].stop - blocks[0].start) * th * tw
    scratch = _buffers(pool, run.workers(len(blocks)), ((16, rows, c), dtype),
                       ((16, rows, oc), dtype))

    def block(i, worker):
        images = blocks[i]
        t = (images.stop - images.start) * th * tw
        v, m = scratch[worker]
        if v.shape[1] != t:    # the last, smaller block
            v, m = np.empty((16, t, c), dtype), np.empty((16, t, oc), dtype)
        winograd_input(x_nhwc[images], th, tw, pad, out=v)
        np.matmul(v, u, out=m)
        winograd_output(m, (t // (th * tw), oh, ow, oc), th, tw, out=out[images])

    run.items(len(blocks), block)
    _release(pool, scratch)
    return out


def weight_grad(gy_nhwc, x_nhwc, pad, pool=None, run=_sequential):
    """dW (OC, C, 3, 3) from the channels-last output gradient and input, as a strided view
    (its memory is (3, 3, OC, C)): the caller makes the one copy into contiguous memory where
    it wants it (a bucket slot or a new array: ``ops/conv.py``'s ``_copy_into``).

    The input tiles are transformed again, block by block, rather than kept from the
    forward (4x the input's memory). Each block's 16 products are kept and the blocks are
    summed in block order afterwards: the same bits however ``run`` spreads the blocks.
    """
    n, oh, ow, oc = gy_nhwc.shape
    c = x_nhwc.shape[3]
    th, tw = tile_counts(oh, ow)
    blocks = _image_blocks(n, th * tw)
    dtype = x_nhwc.dtype
    rows = (blocks[0].stop - blocks[0].start) * th * tw
    scratch = _buffers(pool, run.workers(len(blocks)), ((16, rows, c), dtype),
                       ((16, rows, oc), dtype))
    parts = _buffers(pool, len(blocks), ((16, oc, c), dtype))

    def block(i, worker):
        images = blocks[i]
        t = (images.stop - images.start) * th * tw
        v, s = scratch[worker]
        if t != rows:
            v, s = np.empty((16, t, c), dtype), np.empty((16, t, oc), dtype)
        winograd_input(x_nhwc[images], th, tw, pad, out=v)
        winograd_grad(gy_nhwc[images], th, tw, out=s)
        np.matmul(s.transpose(0, 2, 1), v, out=parts[i][0])

    run.items(len(blocks), block)
    z = parts[0][0].copy()
    for (part,) in parts[1:]:
        z += part
    _release(pool, scratch)
    _release(pool, parts)
    return _weight_from_tiles(z.reshape(4, 4, oc, c), oc, c)


def input_grad(gy_nhwc, weight, pad, x_hw, pool=None, run=_sequential):
    """dX (N, H, W, C), channels-last: the output gradient convolved with the flipped kernel."""
    flipped = weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)   # (C, OC, 3, 3)
    return forward(gy_nhwc, flipped, 2 - pad, x_hw, pool, run)
