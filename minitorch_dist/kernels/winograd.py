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
  ``S[k]^T @ V[k]`` that reuse the forward's input tiles ``V``.

Rounding differs from im2col's (the transforms add and subtract before the products), by a
few float32 ulps of the largest terms: ``python_tests/test_conv_winograd.py`` bounds it
against float64 references and PyTorch.
"""
import numpy as np

from . import winograd_grad, winograd_input, winograd_output
from .reference import WINOGRAD_G

__all__ = ["tile_counts", "weight_tiles", "forward", "weight_grad", "input_grad"]


def tile_counts(height, width):
    """2x2 output tiles per column and per row covering an ``height x width`` output.

    >>> tile_counts(32, 31)
    (16, 16)
    """
    return -(-height // 2), -(-width // 2)


def weight_tiles(weight):
    """``U[k] = (G w G^T)[k]`` for a weight (OC, C, 3, 3): an array (16, C, OC).

    >>> weight_tiles(np.ones((2, 5, 3, 3), np.float32)).shape
    (16, 5, 2)
    """
    g = WINOGRAD_G.astype(weight.dtype)
    u = np.einsum("xi,ocij,yj->xyco", g, weight, g, optimize=True)
    return np.ascontiguousarray(u.reshape(16, weight.shape[1], weight.shape[0]))


def _products(v, u, pool):
    """``M[k] = V[k] @ U[k]`` for the 16 tile points, into a pooled buffer."""
    m = pool.empty((16, v.shape[1], u.shape[2]), v.dtype) if pool is not None else None
    return np.matmul(v, u, out=m)


def forward(x_nhwc, weight, pad, out_hw, pool=None):
    """The convolution of channels-last ``x_nhwc`` (N, H, W, C) with ``weight`` (OC, C, 3, 3),
    zero-padded by ``pad``: returns the channels-last output (N, OH, OW, OC) and the input
    tiles ``V`` (16, tiles, C) that :func:`weight_grad` needs (from ``pool`` when given).
    """
    n, c = x_nhwc.shape[0], x_nhwc.shape[3]
    oh, ow = out_hw
    th, tw = tile_counts(oh, ow)
    v = pool.empty((16, n * th * tw, c), x_nhwc.dtype) if pool is not None else None
    v = winograd_input(x_nhwc, th, tw, pad, out=v)
    m = _products(v, weight_tiles(weight), pool)
    out = winograd_output(m, (n, oh, ow, weight.shape[0]), th, tw)
    if pool is not None:
        pool.release(m)
    return out, v


def weight_grad(gy_nhwc, v, weight_shape, pool=None):
    """dW (OC, C, 3, 3) from the channels-last output gradient and the forward's tiles ``v``."""
    n, oh, ow, oc = gy_nhwc.shape
    th, tw = tile_counts(oh, ow)
    s = pool.empty((16, n * th * tw, oc), gy_nhwc.dtype) if pool is not None else None
    s = winograd_grad(gy_nhwc, th, tw, out=s)
    z = np.matmul(s.transpose(0, 2, 1), v)                     # (16, OC, C)
    if pool is not None:
        pool.release(s)
    g = WINOGRAD_G.astype(z.dtype)
    dw = np.einsum("xi,xyoc,yj->ocij", g, z.reshape(4, 4, oc, -1), g, optimize=True)
    return np.ascontiguousarray(dw).reshape(weight_shape)


def input_grad(gy_nhwc, weight, pad, x_hw, pool=None):
    """dX (N, H, W, C), channels-last: the output gradient convolved with the flipped kernel."""
    flipped = weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)   # (C, OC, 3, 3)
    dx, v = forward(gy_nhwc, flipped, 2 - pad, x_hw, pool)
    if pool is not None:
        pool.release(v)
    return dx
