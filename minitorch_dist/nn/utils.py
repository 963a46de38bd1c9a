"""``nn.utils``: ``no_init_parameters``, MindSpore's deferred parameter initialization.

>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> from minitorch_dist.nn.utils import no_init_parameters
>>> with no_init_parameters():
...     dense = nn.Dense(1024, 1024)
>>> dense.weight.deferred_init is not None, dense.weight.data.strides
(True, (0, 0))
>>> out = dense(ms.Tensor([[0.0] * 1024]))     # first use draws the values
>>> dense.weight.deferred_init is None
True
"""
from ..common.deferred_init import defer_scope

__all__ = ["no_init_parameters"]


def no_init_parameters():
    """``with no_init_parameters():`` parameters made inside hold no values until their
    layout is known: a sharded rank then draws only its slice (exactly the block of the
    full tensor one process draws), so it never holds a full-size copy; used whole, a
    parameter draws its values at its first use or at ``param.init_data()``. Parameters
    with constant initializers (zeros, ones) are made at once, as they cost no draws."""
    return defer_scope()
