"""``mindspore.nn.wrap.grad_reducer``: ``DistributedGradReducer``.

The reducer belongs to the parallel layer, which adds it to ``nn`` when it is imported
(``parallel/extension.py``); this module hands out that same class.

>>> from minitorch_dist import nn
>>> from minitorch_dist.nn.wrap.grad_reducer import DistributedGradReducer
>>> DistributedGradReducer is nn.DistributedGradReducer
True
"""
import sys

__all__ = ["DistributedGradReducer"]


def __getattr__(name):
    if name == "DistributedGradReducer":
        return sys.modules["minitorch_dist.nn"].DistributedGradReducer
    raise AttributeError(f"module 'minitorch_dist.nn.wrap.grad_reducer' has no attribute {name!r}")
