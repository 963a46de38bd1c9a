"""SINGA's checks and argument forms around a few core-built functions.

SINGA asserts its operators' preconditions, so bad shapes raise ``AssertionError``
there; these wrappers assert the same before calling the core-built function. They also
take SINGA's argument forms: ``add_bias`` accepts any bias with as many elements as the
axis has (the autograd page builds a ``(1, N)`` one), ``dropout`` takes SINGA's ``seed``
(truncated to an int, as SINGA's ``Dropout`` does). Loss creators give the gradient of
the input only, as SINGA's loss operators hold the target as a setting.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> x = tensor.from_numpy(np.zeros((2, 3), np.float32))
>>> b = tensor.from_numpy(np.ones((1, 3), np.float32))
>>> tensor.to_numpy(autograd.add_bias(x, b)).tolist()
[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
"""
from . import functional as _f
from .results import facade_call
from .unsupported import SingaAssertionError


def _require(ok, message):
    if not ok:
        raise SingaAssertionError(message)

__all__ = ["FUNCTIONS"]


def add_bias(x, b, axis=0):
    """``x + b`` on each row (axis 0) or column (axis 1); ``b`` needs only the right number
    of elements."""
    _require(axis in (0, 1) and x.ndim == 2,
             f"autograd.add_bias: needs a 2-D x, a b and axis 0 or 1, got x {x.shape}, "
             f"b {b.shape}, axis={axis!r}")
    _require(b.size == x.shape[1 - axis],
             f"autograd.add_bias(axis={axis}): b has {b.size} values, x has "
             f"{x.shape[1 - axis]} {'columns' if axis == 0 else 'rows'}")
    if b.ndim != 1:
        b = facade_call(_f.reshape, b, (-1,))
    return facade_call(_f.add_bias, x, b, axis)


def _loss(fn, check):
    def call(x, t):
        check(x, t)
        return facade_call(fn, x, t, n_grads=1)
    call.__name__, call.__doc__ = fn.__name__, fn.__doc__
    return call


def _same_shape(name):
    def check(x, t):
        _require(tuple(x.shape) == tuple(t.shape),
                 f"autograd.{name}: input and target shapes differ: {x.shape}, {t.shape}")
    return check


def _sce_check(x, t):
    _require(t.ndim <= x.ndim, f"autograd.softmax_cross_entropy: target {t.shape} has more "
                               f"axes than x {x.shape}")


def dropout(x, seed=0, ratio=0.5):
    """SINGA's ``dropout(x, seed=0, ratio=0.5)``; ``seed`` is truncated to an int as in
    SINGA's ``Dropout``."""
    return facade_call(_f.dropout, x, int(seed), ratio)


def ranking_loss(pos, neg, M=0.2):
    """SINGA's ``ranking_loss``: the two inputs must have one shape."""
    from .np_functions import ranking_loss as _ranking
    _require(tuple(pos.shape) == tuple(neg.shape),
             f"autograd.ranking_loss: shapes differ: {pos.shape}, {neg.shape}")
    return _ranking(pos, neg, M)


def unsqueeze(x, axis=-1):
    """SINGA's ``unsqueeze``: each axis in turn is inserted into the shape list (an axis past
    the end appends), then one reshape."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    shape = list(x.shape)
    if shape == [1] and axes == [0]:
        return facade_call(_f.reshape, x, (1,))
    for a in axes:
        shape.insert(a, 1)
    return facade_call(_f.reshape, x, tuple(shape))


FUNCTIONS = {
    "unsqueeze": unsqueeze,
    "add_bias": add_bias, "dropout": dropout, "ranking_loss": ranking_loss,
    "mse_loss": _loss(_f.mse_loss, _same_shape("mse_loss")),
    "softmax_cross_entropy": _loss(_f.softmax_cross_entropy, _sce_check),
    "cross_entropy": _loss(_f.cross_entropy, lambda x, t: None),
    "binary_cross_entropy": _loss(_f.binary_cross_entropy, lambda x, t: None),
}
