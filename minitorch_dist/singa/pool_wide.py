"""Pooling whose padding exceeds half the kernel, which SINGA accepts and the core's
pooling primitives refuse (``layer.AvgPool2d(3, 1, 2)`` in SINGA's ONNX tests).

The input is padded explicitly (``-inf`` for a max, so padding never wins; zeros for an
average) and pooled without padding; an average is then divided by the share of real
pixels in each window, so padding stays out of the count as in SINGA. Padding of a whole
kernel or more would make windows of padding only, and is refused.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> x = ms.Tensor(np.ones((1, 1, 3, 3), np.float32))
>>> pool(x, (3, 3), (1, 1), (2, 2), is_max=False).asnumpy()[0, 0, 0].tolist()
[1.0, 1.0, 1.0, 1.0, 1.0]
"""
import numpy as np

from .. import ops
from ..tensor import Tensor as CoreTensor

__all__ = ["needs_wide", "pool"]


def needs_wide(kernel, padding):
    """True when some padding exceeds half its kernel (the core refuses that)."""
    return any(p > k // 2 for p, k in zip(padding, kernel))


def pool(x, kernel, stride, padding, is_max, call="layer.Pooling2d"):
    """Max or average pooling of NCHW ``x`` with padding below the kernel size."""
    if any(p >= k for p, k in zip(padding, kernel)):
        raise ValueError(f"{call}: padding {tuple(padding)} must be smaller than the kernel "
                         f"{tuple(kernel)} (a window of padding only has no value)")
    ph, pw = padding
    widths = (pw, pw, ph, ph)
    if is_max:
        return ops.max_pool2d(ops.pad(x, widths, value=-np.inf), tuple(kernel), tuple(stride), 0)
    summed = ops.avg_pool2d(ops.pad(x, widths, value=0.0), tuple(kernel), tuple(stride), 0,
                            count_include_pad=True)
    ones = np.pad(np.ones(x.shape[2:], np.float32), ((ph, ph), (pw, pw)))
    share = CoreTensor(ones[None, None], device=x.device)
    share = ops.avg_pool2d(share, tuple(kernel), tuple(stride), 0, count_include_pad=True)
    return ops.div(summed, CoreTensor._make(share.data.astype(x.dtype), x.device))
