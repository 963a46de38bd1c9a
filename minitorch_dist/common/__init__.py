"""MindSpore-compatible ``common`` namespace: initializers, dtypes, ``set_seed``.

Model-zoo scripts write ``from mindspore.common import set_seed`` and
``import mindspore.common.dtype as mstype``; both name the same objects as the top level.
``Tensor``, ``Parameter`` and ``ParameterTuple`` are reached lazily, because ``nn`` (where
``Parameter`` lives) imports this package.
"""
from . import dtype, initializer
from ..random import get_seed, set_seed

__all__ = ["dtype", "initializer", "set_seed", "get_seed", "Tensor", "Parameter",
           "ParameterTuple"]


def __getattr__(name):
    if name == "Tensor":
        from ..tensor import Tensor
        return Tensor
    if name in ("Parameter", "ParameterTuple"):
        from ..nn import parameter
        return getattr(parameter, name)
    raise AttributeError(f"module 'minitorch_dist.common' has no attribute {name!r}")
