"""MindSpore's ``Tensor`` methods that are functional ops with ``self`` first.

``install(Tensor)`` adds each one that ``tensor.py`` does not define itself: most call the
functional op of the same name (``x.acos()`` is ``ops.acos(x)``); a few reorder arguments
(``x.where(cond, y)`` is ``ops.where(cond, x, y)``). Methods that have no meaning here
(sparse conversions, ``as_strided``, ...) raise an error that names them.

>>> import minitorch_dist as ms
>>> x = ms.Tensor([[1.0, -2.0], [3.0, 4.0]])
>>> x.abs().amax().item(), x.flip(0)[0].tolist(), x.T.shape
(4.0, [3.0, 4.0], (2, 2))
"""
import numpy as np

from ..backend import dtypes
from . import functional as F

# method name -> functional name, for methods that are ``F.<name>(self, *args, **kwargs)``
_SAME = """abs acos acosh addbmm addcdiv addcmul addmm addmv amax amin approximate_equal arccos
arccosh arcsin arcsinh arctan arctan2 arctanh argmin argsort asin asinh atan atan2 atanh baddbmm
bincount bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor bmm
broadcast_to ceil cholesky cholesky_inverse chunk clamp clip cos cosh cross cummax cummin cumprod
cumsum deg2rad diag diagonal div equal erf erfc exp expand expm1 fills flip floor fmod gather
gather_elements gather_nd ge ger greater greater_equal gt hardshrink heaviside hypot index_add
index_fill inner inplace_update inv inverse invert isclose isfinite isinf isnan isneginf
isposinf is_floating_point is_complex lcm le lerp less less_equal log log10 log1p log2
log_matrix_determinant logaddexp logaddexp2 logical_and logical_not logical_or logical_xor
logit logsumexp masked_fill masked_select matrix_determinant median minimum maximum narrow
nonzero norm not_equal permute pow prod rad2deg random_categorical ravel reciprocal remainder
renorm repeat_interleave reverse reverse_sequence round roll rot90 rsqrt searchsorted sign
sin sinc slogdet soft_shrink split sqrt square std sub svd swapaxes tan tanh tensor_split tile
top_k trace tril triu unbind unique_consecutive unsorted_segment_max unsorted_segment_min
unsorted_segment_prod unsqueeze var xdivy xlogy scatter_add scatter_div scatter_max scatter_min
scatter_mul scatter_sub lgamma digamma erfinv igamma igammac i0 nan_to_num float_power ldexp
signbit sgn hardsigmoid sigmoid silu fix trunc frac exp2 sinh tanhshrink logsigmoid
softplus softsign mish nansum nanmean count_nonzero topk diff kron outer det any all
amin amax aminmax mv unique gcd copysign bernoulli""".split()
_ALIASES = {"absolute": "abs", "multiply": "mul", "subtract": "sub", "divide": "div",
            "true_divide": "div", "negative": "neg", "add": "add", "mm": "matmul",
            "logdet": "_logdet", "ptp": "_ptp", "msort": "_msort", "argmax_with_value": "_argmax_wv",
            "argmin_with_value": "_argmin_wv"}
_CASTS = {"bool": dtypes.bool_, "float": dtypes.float32, "half": dtypes.float16,
          "int": dtypes.int32, "long": dtypes.int64, "double": dtypes.float64}
_REFUSED = {"to_coo": "there are no COO sparse tensors here", "to_csr": "there are no CSR sparse "
            "tensors here", "as_strided": "tensors here are not raw strided views",
            "col2im": "use ops.conv2d", "fold": "use ops.conv2d", "unfold": "use ops.conv2d",
            "flush_from_cache": "there is no device cache here (an Ascend feature)",
            "unique_with_pad": "use Tensor.unique", "short": "int16 is not a supported dtype",
            "choose": "NumPy's choose is not provided; use ops.select or ops.gather_elements"}


def _method(fname):
    def method(self, *args, **kwargs):
        return getattr(F, fname)(self, *args, **kwargs)
    method.__name__ = fname
    method.__doc__ = f"``ops.{fname}(self, ...)``."
    return method


def _cast(dtype):
    def method(self):
        return F.cast(self, dtype)
    method.__doc__ = f"This tensor as {dtype}."
    return method


def _refused(name, why):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"Tensor.{name} is not implemented in minitorch_dist: {why}")
    method.__name__ = name
    return method


def _copy(self):
    """A new tensor with the same values (differentiable)."""
    return F.identity(self)


def _fill(self, value):
    return F.full_like(self, value)


def _where(self, condition, y):
    return F.select(condition, self, y)


def _select(self, condition, y):
    return F.select(condition, self, y)


def _take(self, indices, axis=None):
    source = self.reshape(-1) if axis is None else self
    return F.gather(source, indices, 0 if axis is None else axis)


def _repeat(self, repeats, axis=None):
    return F.repeat_interleave(self, repeats, axis)


def _view_as(self, other):
    return self.reshape(other.shape)


def _expand_as(self, other):
    return F.broadcast_to(self, other.shape)


def _new_ones(self, size, dtype=None):
    return F.ones(size, dtype or self.dtype)


def _new_zeros(self, size, dtype=None):
    return F.zeros(size, dtype or self.dtype)


def _resize(self, *new_shape):
    shape = new_shape[0] if len(new_shape) == 1 and isinstance(new_shape[0], (tuple, list)) else new_shape
    from ..tensor import Tensor
    return Tensor(np.resize(self.asnumpy(), shape))


def _sum_to_size(self, *size):
    size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    lead = self.ndim - len(size)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1
                                      and self.shape[lead + i] != 1)
    return F.sum(self, axes, True).reshape(size) if axes else self


def _assign_value(self, value):
    return self.set_data(value)


def _itemset(self, *args):
    *index, value = args
    self.data[tuple(index) if index else ()] = value
    return self


def _set_const_arg(self, const_arg=True):
    self.const_arg = bool(const_arg)
    return self


def _logdet(self):
    return F.log(F.det(self))


def _ptp(self, axis=None, keepdims=False):
    return F.max(self, axis, keepdims) - F.min(self, axis, keepdims)


def _msort(self):
    return F.sort(self, 0)[0]


def _argmax_wv(self, axis=0, keep_dims=False):
    return F.argmax(self, axis, keep_dims), F.max(self, axis, keep_dims)


def _argmin_wv(self, axis=0, keep_dims=False):
    return F.argmin(self, axis, keep_dims), F.min(self, axis, keep_dims)


def _is_signed(self):
    return self.dtype.kind in "if"


def _ndimension(self):
    return self.ndim


def _numel(self):
    return self.size


def _mT(self):
    return F.swapaxes(self, -1, -2)


def _t(self):
    if self.ndim > 2:
        raise ValueError(f"Tensor.t expects at most 2 dimensions, got {self.ndim}")
    return self.T


def _real(self):
    return self


def _isreal(self):
    return F.ones_like(self, dtypes.bool_)


def _angle(self):
    return F.select(F.less(self, 0), F.full_like(self, np.pi, dtypes.float32),
                    F.zeros_like(self, dtypes.float32))


_EXTRA = {"copy": _copy, "fill": _fill, "where": _where, "select": _select, "take": _take,
          "repeat": _repeat, "view_as": _view_as, "reshape_as": _view_as, "expand_as": _expand_as,
          "new_ones": _new_ones, "new_zeros": _new_zeros, "resize": _resize,
          "sum_to_size": _sum_to_size, "assign_value": _assign_value, "itemset": _itemset,
          "set_const_arg": _set_const_arg, "adjoint": _mT, "_logdet": _logdet, "_ptp": _ptp, "_msort": _msort,
          "_argmax_wv": _argmax_wv, "_argmin_wv": _argmin_wv, "is_signed": _is_signed,
          "ndimension": _ndimension, "numel": _numel, "nelement": _numel, "t": _t,
          "real": _real, "conj": _real, "isreal": _isreal, "angle": _angle,
          "positive": lambda self: self, "to_tensor": lambda self, *a, **k: self.init_data(),
          "fliplr": lambda self: F.flip(self, 1), "flipud": lambda self: F.flip(self, 0),
          "hsplit": lambda self, s: F.tensor_split(self, s, 1 if self.ndim > 1 else 0),
          "vsplit": lambda self, s: F.tensor_split(self, s, 0),
          "dsplit": lambda self, s: F.tensor_split(self, s, 2),
          "diagflat": lambda self, offset=0: F.diag(self.reshape(-1)),
          "addr": lambda self, vec1, vec2, beta=1, alpha=1: beta * self + alpha * F.outer(vec1, vec2)}
_PROPERTIES = {"mT": _mT, "mH": _mT, "H": lambda self: self.T}


def install(tensor_cls):
    """Add every method above that ``tensor_cls`` does not define itself."""
    def add(name, value):
        if name not in tensor_cls.__dict__:
            setattr(tensor_cls, name, value)
    for name in _SAME:
        add(name, _method(name))
    for name, fn in _EXTRA.items():
        add(name, fn)
    for name, target in _ALIASES.items():
        add(name, getattr(tensor_cls, target) if target.startswith("_") else _method(target))
    for name, dtype in _CASTS.items():
        add(name, _cast(dtype))
    for name, why in _REFUSED.items():
        add(name, _refused(name, why))
    for name, fn in _PROPERTIES.items():
        add(name, property(fn))
