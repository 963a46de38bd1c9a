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
from . import kept_gradients as _kept

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


def gradients(y, params, dy=None, call="autograd.backward(y)"):
    """Gradient arrays of the one-element ``y`` for ``params`` (None where ``y`` does not
    depend on one), from one run of the core engine. ``dy`` scales the seed (SINGA's
    ``backward(y, dy)``: a number or a Tensor).

    The run frees each node's saved tensors once its backward is done, so the peak of a
    step is not all activations plus all gradients; a second request on the same ``y``
    (SINGA's ``autograd.backward(loss)`` then ``opt(loss)``) is answered from the gradients
    the first one kept (:mod:`kept_gradients`), or refused when they cannot answer it."""
    seed = _seed(y, dy)
    if y.grad_fn is None:
        return [seed.copy() if p is y else None for p in params]
    kept = _kept.kept_for(y)
    if kept is not None:
        return _kept.answer(kept, seed, params, call)
    _check_graph_intact(y, call)
    leaves = parameters_in_order(y)
    seen = {id(t) for t in leaves}
    targets = leaves + [p for p in params if id(p) not in seen]
    grads = core_autograd.run_backward([y], [seed], targets=targets, retain_graph=False)
    _kept.keep(y, seed, leaves, grads[:len(leaves)])
    by_id = {id(t): g for t, g in zip(targets, grads)}
    return [by_id[id(p)] for p in params]


def _seed(y, dy):
    xp = y.device.xp
    if dy is None:
        return xp.ones(y.shape, y.dtype)
    if isinstance(dy, CoreTensor):
        return xp.asarray(dy.data, dtype=y.dtype).reshape(y.shape)
    return xp.full(y.shape, float(dy), y.dtype)


def _check_graph_intact(y, call):
    """Refuse, before anything runs, a graph part of which an earlier backward freed (a
    loss built on the same forward as one already back-propagated)."""
    stack, seen = [y.grad_fn], {y.grad_fn}
    while stack:
        node = stack.pop()
        if node.ctx is None:
            raise RuntimeError(f"{call}: part of this loss's graph was already freed by the "
                               "backward of another loss computed from the same forward "
                               "(saved activations are released during backward); "
                               "back-propagate the sum of the losses once, or run the "
                               "forward again for each loss")
        for x in node.inputs:
            src = None if x is None else x.grad_fn
            if src is not None and src not in seen:
                seen.add(src)
                stack.append(src)


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
