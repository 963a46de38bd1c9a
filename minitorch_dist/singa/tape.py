"""Reading the core tape the way SINGA reads its own: parameters, their order, gradients.

SINGA finds what to train by walking the graph from the loss: every tensor with
``stores_grad`` that the loss depends on gets a gradient, whether the layer that made it is
an attribute of a model, sits in a list or is held by a closure. ``autograd.backward(loss)``
yields ``(param, grad)`` pairs in a fixed order: an operator is back-propagated once every
operator that consumed its outputs has been, the ready ones taken last-in first-out, and a
parameter is yielded as soon as its last consumer has been back-propagated.

This module does that on minitorch_dist's tape (``Tensor.grad_fn`` -> ``Node`` -> inputs):
:func:`parameters_in_order` replays SINGA's traversal without computing anything, and
:func:`gradients` runs the core engine once for exactly those leaves. There is no second
autograd: the numbers come from the core's backward.

>>> import numpy as np
>>> from minitorch_dist.singa import tensor, autograd
>>> w = tensor.Tensor(data=np.ones((2, 1), np.float32), stores_grad=True, name="w")
>>> b = tensor.Tensor(data=np.zeros((1,), np.float32), stores_grad=True, name="b")
>>> x = tensor.Tensor(data=np.ones((3, 2), np.float32))
>>> loss = autograd.reduce_mean(autograd.add_bias(autograd.matmul(x, w), b), None, 0)
>>> [p.name for p in parameters_in_order(loss)]
['b', 'w']
"""
import weakref
from collections import Counter

from .. import autograd as core_autograd
from ..nn.parameter import Parameter as CoreParameter
from ..tensor import Tensor as CoreTensor

__all__ = ["parameters_in_order", "gradients", "as_parameter", "check_loss"]


def check_loss(loss, call):
    """``loss`` must be a one-element Tensor that depends on something trainable."""
    if not isinstance(loss, CoreTensor):
        raise TypeError(f"{call}: expected the loss Tensor, got {type(loss).__name__}")
    if loss.size != 1:
        raise ValueError(f"{call}: the loss must have one element, got shape {loss.shape}")
    if not loss.requires_grad:
        raise ValueError(f"{call}: the loss does not depend on any trainable tensor (no "
                         "parameter, or it was computed with autograd.training = False / "
                         "model.eval())")


def _is_param(t):
    return t.grad_fn is None and t.requires_grad


def parameters_in_order(y):
    """The trainable leaves ``y`` depends on, in the order SINGA's ``backward`` yields them."""
    if y.grad_fn is None:
        return [y] if y.requires_grad else []
    op_dep, tensor_dep = Counter(), Counter()
    queue, seen = [y.grad_fn], {y.grad_fn}
    while queue:                       # infer_dependency: count every consumer edge
        node = queue.pop()
        for x in node.inputs:
            if x is None:
                continue
            tensor_dep[id(x)] += 1
            src = x.grad_fn
            if src is not None:
                op_dep[src] += 1
                if src not in seen:
                    seen.add(src)
                    queue.append(src)
    order, ready = [], [y.grad_fn]
    while ready:                       # the backward loop, without the arithmetic
        node = ready.pop()
        for x in node.inputs:
            if x is None or (x.grad_fn is None and not x.requires_grad):
                continue               # constants and inputs: SINGA's Dummy without grad
            tensor_dep[id(x)] -= 1
            if x.grad_fn is None:
                if tensor_dep[id(x)] == 0:
                    order.append(x)
                continue
            op_dep[x.grad_fn] -= 1
            if op_dep[x.grad_fn] == 0:
                ready.append(x.grad_fn)
    return order


def gradients(y, params, dy=None):
    """Gradient arrays of the one-element ``y`` for ``params`` (None where ``y`` does not
    depend on one), from one run of the core engine. ``dy`` scales the seed (SINGA's
    ``backward(y, dy)``: a number or a Tensor)."""
    xp = y.device.xp
    if dy is None:
        seed = xp.ones(y.shape, y.dtype)
    elif isinstance(dy, CoreTensor):
        seed = xp.asarray(dy.data, dtype=y.dtype).reshape(y.shape)
    else:
        seed = xp.full(y.shape, float(dy), y.dtype)
    if y.grad_fn is None:
        return [seed.copy() if p is y else None for p in params]
    # SINGA keeps the graph: autograd.backward(loss) and then opt(loss) on the same loss
    # both work, so the tape stays until the loss itself is dropped
    return core_autograd.run_backward([y], [seed], targets=list(params), retain_graph=True)


_wrapped = {}       # id(user tensor) -> (weakref to it, the Parameter sharing its data)


def as_parameter(t):
    """A Parameter for the trainable leaf ``t`` that optimizers can update in place.

    Layer parameters already are. A bare ``tensor.Tensor(..., stores_grad=True)`` (SINGA's
    ``examples/mlp/native.py`` trains those) gets one Parameter that shares its array, made
    once and remembered while ``t`` lives, so updates land in the user's tensor.
    """
    if isinstance(t, CoreParameter):
        return t
    entry = _wrapped.get(id(t))
    if entry is not None and entry[0]() is t:
        return entry[1]
    from .tensor import Parameter
    param = Parameter.from_tensor(t)
    param.name = getattr(t, "name", None)
    param._unplaced = False
    _wrapped[id(t)] = (weakref.ref(t, lambda _, key=id(t): _wrapped.pop(key, None)), param)
    return param
