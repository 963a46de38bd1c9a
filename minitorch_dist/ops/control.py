"""Order and gradient flow: Depend (``depend``) and StopGradient (``stop_gradient``).

``Depend()(value, expr)`` returns ``value``: MindSpore's graph mode uses it to order a side
effect before a use; eager execution has already run ``expr``, so only the value matters.
``StopGradient`` passes its input on and blocks its gradient.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> x = ms.Tensor([2.0], requires_grad=True)
>>> y = x * ops.stop_gradient(x)
>>> y.backward(); x.grad.asnumpy().tolist()
[2.0]
"""
from ..tensor import Tensor
from .primitive import Primitive

__all__ = ["Depend", "StopGradient", "depend", "stop_gradient"]


class Depend:
    """``Depend()(value, expr)``: ``value`` (see the module docstring)."""

    def __call__(self, value, expr=None):
        return value


class StopGradient(Primitive):
    """The input, with no gradient flowing back."""

    differentiable = False

    def forward(self, ctx, x):
        return x.copy()


_stop = StopGradient()


def depend(value, expr=None):
    """``value``; ``expr`` has run already (eager execution)."""
    return value


def stop_gradient(x):
    """``x`` without a gradient path back to its inputs."""
    return _stop(x) if isinstance(x, Tensor) else x
