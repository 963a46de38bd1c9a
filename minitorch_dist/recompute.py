"""Recompute (activation checkpointing): MindSpore's ``Cell.recompute()``, ``ops.recompute``
and ``Primitive.recompute()``.

A recomputed block runs its forward without recording the tape, so none of its intermediate
activations stay alive; the tape gets one node whose inputs are the block's tensor inputs
and the parameters it reads. When backward reaches that node, the block's forward runs again
from the kept inputs, this time recorded, and its own backward gives the gradients of the
inputs and parameters. Same operations on the same values: the gradients are bit-identical
to the plain run's, and peak memory holds one block's activations at a time instead of all.

Random draws are replayed: the framework's random stream (``random.get_rng_state``) is saved
before the forward and restored around the second run, so a dropout in the block draws the
same mask twice, then the stream goes on from where it was. What cannot be replayed is
refused with a ``ValueError`` naming the block: random draws on a device (CuPy's generators
keep their own state). A training-mode batch norm inside a recomputed Cell updates its moving
statistics in both runs: they are saved before the second run and put back after it, so
they move once per step, as without recompute (ResNet stages can be recomputed).

>>> import numpy as np
>>> import minitorch_dist as ms
>>> w = ms.Tensor(np.array([2.0], np.float32), requires_grad=True)
>>> y = recompute(lambda x: (x * w).tanh() * 3.0, ms.Tensor(np.array([0.5], np.float32)))
>>> grads = ms.grad(lambda t: recompute(lambda x: (x * t).tanh(), ms.Tensor([0.5])))(w)
>>> round(float(grads.asnumpy()[0]), 6)     # d/dw tanh(0.5 w) = 0.5 (1 - tanh(1)^2)
0.209987
"""
import sys

from .autograd import Node, enable_grad, is_grad_enabled, no_grad, run_backward
from .ops.primitive import Context, Primitive
from .random import get_rng_state, set_rng_state
from .tensor import Tensor

__all__ = ["recompute", "recomputed_call", "RecomputeError"]


class RecomputeError(ValueError):
    """A block that cannot be run twice with the same result."""


class _Recomputed(Primitive):
    """The tape node of a recomputed block: its backward re-runs the block, recorded."""

    differentiable = True
    instance_name = "recompute"

    def backward(self, ctx, *out_grads):
        block, args, kwargs, stream, inputs = ctx.replay
        # the arguments become fresh leaves (one per distinct tensor): the second run's graph
        # stops there instead of reaching into the graph that produced them
        leaf_of = {id(t): Tensor._make(t.data, t.device, t.requires_grad)
                   for t in inputs if not _is_read(t, ctx)}
        leaves = [leaf_of.get(id(a), a) if isinstance(a, Tensor) else a for a in args]
        out = _replayed(block, leaves, kwargs, stream, ctx.statistics)
        outs = out if isinstance(out, tuple) else (out,)
        roots = [(o, g) for o, g in zip(outs, out_grads) if o.requires_grad]
        targets = [leaf_of.get(id(t), t) for t in inputs]
        found = run_backward([o for o, _ in roots], [g for _, g in roots], targets=targets) \
            if roots else [None] * len(targets)
        return tuple(found)


def _is_read(tensor, ctx):
    """True for a tensor the block reads directly (a parameter, a captured tensor), which
    must stay itself in the second run; arguments are replaced by fresh leaves."""
    return id(tensor) in ctx.read_ids


_NODE_PRIM = _Recomputed()


def _moving_statistics(owner):
    """The moving statistics (``moving_mean``, ``moving_variance``) of the training-mode
    batch norms in ``owner`` (a Cell): their forward updates them, so the second run must
    leave them as the first run left them."""
    cells = getattr(owner, "cells_and_names", None)
    if cells is None:
        return ()
    found = []
    for _, cell in cells():
        if getattr(cell, "training", False) and hasattr(cell, "moving_mean") \
                and getattr(cell, "use_batch_statistics", True) is not False:
            found += [getattr(cell, name) for name in ("moving_mean", "moving_variance")
                      if isinstance(getattr(cell, name, None), Tensor)]
    return tuple(found)


def _replayed(block, leaves, kwargs, stream, statistics):
    """The second run of ``block``, recorded, with the random stream of the first run; the
    moving ``statistics`` are restored afterwards (the update is the first run's only)."""
    kept = [t.data.copy() for t in statistics]
    now = get_rng_state()
    set_rng_state(stream)
    try:
        with enable_grad():
            return block(*leaves, **kwargs)
    finally:
        set_rng_state(now)
        for tensor, value in zip(statistics, kept):
            tensor.data[...] = value


def recomputed_call(block, args, kwargs=None, owner=None):
    """``block(*args, **kwargs)`` with recompute (see the module docstring). ``owner``: the
    Cell the block belongs to, whose parameters get gradients and whose state is checked."""
    kwargs = kwargs or {}
    params = _read_tensors(block, owner)
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not is_grad_enabled() or not any(t.requires_grad for t in tensors + params):
        return block(*args, **kwargs)
    statistics = _moving_statistics(owner) if owner is not None else ()
    stream = get_rng_state()
    with no_grad():
        out = block(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    if not outs or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"recompute: {_name(block, owner)} must return a Tensor or a tuple of "
                        f"Tensors, got {type(out).__name__}")
    device = outs[0].device
    if not device.is_host and get_rng_state() != stream:
        raise RecomputeError(
            f"recompute: {_name(block, owner)} draws random numbers on {device} (a dropout?); "
            "the device's generator cannot be replayed, so the recomputed forward would differ; "
            "keep dropout outside the recomputed block, or run it on the host")
    for t in params:
        if t.grad_fn is not None:
            raise TypeError(f"recompute: {_name(block, owner)} reads a tensor computed outside "
                            "it (captured, not passed); pass it as an argument")
    distinct = {id(t): t for t in tensors}
    read = [t for t in params if id(t) not in distinct]
    inputs = tuple(distinct.values()) + tuple(read)
    ctx = Context(device)
    ctx.read_ids = {id(t) for t in params}     # stay themselves in the second run
    ctx.replay = (block, tuple(args), kwargs, stream, inputs)
    ctx.statistics = statistics
    ctx.needs_input_grad = tuple(t.requires_grad for t in inputs)
    meta = tuple((o.shape, o.dtype) for o in outs) if isinstance(out, tuple) else None
    node = Node(_NODE_PRIM, ctx, inputs, meta)
    made = tuple(Tensor._make(o.data, o.device, o.dtype.kind == "f", node if
                              o.dtype.kind == "f" else None, i) for i, o in enumerate(outs))
    return made if isinstance(out, tuple) else made[0]


def recompute(block, *args, **kwargs):
    """MindSpore's ``ops.recompute(block, *args, **kwargs)``: ``block(*args, **kwargs)``,
    whose activations are not kept but computed again during backward. ``block`` is a Cell
    (its parameters get gradients) or a function of tensors."""
    if not callable(block):
        raise TypeError(f"recompute: block must be a Cell or a function, got "
                        f"{type(block).__name__}")
    owner = block if hasattr(block, "trainable_params") else None
    return recomputed_call(block, args, kwargs, owner)


def _read_tensors(block, owner):
    """The tensors a block reads besides its arguments and that want gradients: a Cell's
    trainable parameters, or the tensors a function captured (closure variables, and the
    parameters of the Cell a bound method belongs to)."""
    if owner is not None and hasattr(owner, "trainable_params"):
        return list(owner.trainable_params())
    found = []
    bound = getattr(block, "__self__", None)
    if bound is not None and hasattr(bound, "trainable_params"):
        found.extend(bound.trainable_params())
    for cell in getattr(block, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:      # an empty cell
            continue
        if isinstance(value, Tensor) and value.requires_grad:
            found.append(value)
        elif hasattr(value, "trainable_params"):
            found.extend(value.trainable_params())
    unique = {id(t): t for t in found}
    return list(unique.values())


def _name(block, owner):
    if owner is not None:
        return type(owner).__name__
    return getattr(block, "__name__", type(block).__name__)


# ``Primitive.recompute()``: ops/primitive.py cannot import this module (it is imported by
# it), so it offers a runner slot that this module fills when it exists
_runner_slot = getattr(sys.modules[Primitive.__module__], "_recompute_runner", None)
if isinstance(_runner_slot, list) and not _runner_slot:
    _runner_slot.append(recomputed_call)
