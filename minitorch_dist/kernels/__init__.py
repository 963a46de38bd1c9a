"""Host kernels: C++ (``minitorch_dist._C``) when built, else their NumPy twins.

Every function here has a twin of the same name in :mod:`minitorch_dist.kernels.reference`
with the same results and errors. The C++ versions are used when the extension imports and
the environment variable ``MINITORCH_DIST_NO_CPP`` is not ``1``; ``HAVE_CPP`` says which.
Arrays are float32 or float64 NumPy arrays (ids int32/int64); non-contiguous inputs are
copied, and in-place targets that are not contiguous are updated through a copy.

>>> import numpy as np
>>> from minitorch_dist import kernels
>>> table = np.arange(6.0).reshape(3, 2)
>>> kernels.embedding_gather(table, np.array([2, 0])).tolist()
[[4.0, 5.0], [0.0, 1.0]]
>>> kernels.topk_abs(np.array([0.5, -4.0, 1.0, 3.0]), 2).tolist()
[1, 3]
"""
import os

from . import reference

from . import native

_names = ["im2col", "col2im", "im2col_nhwc", "col2im_nhwc", "winograd_input", "winograd_output",
          "winograd_grad", "batch_norm_rows", "batch_norm_rows_backward", "embedding_gather", "scatter_add_rows", "unique_merge",
          "sparse_sgd", "lazy_adam", "ftrl", "proximal_adagrad", "topk_abs", "threshold_abs",
          "fp16_pack", "fp16_unpack", "relu", "relu_backward", "sum_rows"]

if os.environ.get("MINITORCH_DIST_NO_CPP") == "1":
    HAVE_CPP, CPP_IMPORT_ERROR = False, "disabled by MINITORCH_DIST_NO_CPP=1"
else:
    HAVE_CPP, CPP_IMPORT_ERROR = native._C is not None, native.IMPORT_ERROR
_impl = native if HAVE_CPP else reference  # without the extension the NumPy twins do the work
if HAVE_CPP:
    for _name in _names:  # the twins carry the documentation
        getattr(native, _name).__doc__ = getattr(reference, _name).__doc__

im2col = _impl.im2col
col2im = _impl.col2im
im2col_nhwc = _impl.im2col_nhwc
col2im_nhwc = _impl.col2im_nhwc
winograd_input = _impl.winograd_input
winograd_output = _impl.winograd_output
winograd_grad = _impl.winograd_grad
batch_norm_rows = _impl.batch_norm_rows
batch_norm_rows_backward = _impl.batch_norm_rows_backward
embedding_gather = _impl.embedding_gather
scatter_add_rows = _impl.scatter_add_rows
unique_merge = _impl.unique_merge
sparse_sgd = _impl.sparse_sgd
lazy_adam = _impl.lazy_adam
ftrl = _impl.ftrl
proximal_adagrad = _impl.proximal_adagrad
topk_abs = _impl.topk_abs
threshold_abs = _impl.threshold_abs
fp16_pack = _impl.fp16_pack
fp16_unpack = _impl.fp16_unpack
# an extension built before the element-wise kernels lacks them: their twins stand in
_elementwise = _impl if hasattr(native._C, "relu") else reference
relu = _elementwise.relu
relu_backward = _elementwise.relu_backward
sum_rows = _elementwise.sum_rows

__all__ = ["HAVE_CPP", "CPP_IMPORT_ERROR", "reference"] + _names
