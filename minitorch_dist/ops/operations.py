"""``mindspore.ops.operations`` (scripts import it as ``P``): the primitive classes.

``P.MatMul`` is ``ops.MatMul``, the same class: this module looks every name up in ``ops``.

>>> from minitorch_dist import ops
>>> from minitorch_dist.ops import operations as P
>>> P.MatMul is ops.MatMul
True
"""
import sys


def __getattr__(name):
    ops = sys.modules["minitorch_dist.ops"]
    try:
        return getattr(ops, name)
    except AttributeError:
        raise AttributeError(f"module 'minitorch_dist.ops.operations' has no attribute {name!r}; "
                             "the primitives are listed in docs/porting_mindspore.md") from None


def __dir__():
    return dir(sys.modules["minitorch_dist.ops"])
