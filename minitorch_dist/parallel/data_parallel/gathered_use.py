"""Level 3: a sliced weight is whole only around each use (ZeRO-3's per-layer gather).

Between steps, a weight sliced by optimizer parallel at ``optimizer_level="level3"`` holds
this rank's slice only (``weight_slicing.py``). Each primitive that reads it then runs as one
tape node of its own (``_GatheredUse``):

* forward: the weight is all-gathered, the primitive runs unrecorded on the whole value, and
  the whole value is dropped again: only the output leaves the call;
* backward: the weight is gathered again, the primitive runs once more, recorded, and its
  own backward gives the gradients of the weight (whole-shaped: the reducer reduce-scatters
  it onto the slice) and of the other inputs; then the whole value is dropped.

Same operation on the same values twice: the gradients are bit-identical to a run with
whole weights, and a rank holds one primitive's weight whole at a time besides the slices.
The calls reach here through a primitive hook that ``install_on_this_thread`` sets once a
step has left weights sliced (every rank runs the same primitives in the same order, so the
gathers match). A primitive whose output is a view of the weight (a reshape of it) keeps
that whole value alive as long as the view lives.
"""
from ...autograd import Node, enable_grad, is_grad_enabled, no_grad, run_backward
from ...ops.primitive import Context, Primitive, set_primitive_hook
from ...recompute import recomputed_call
from ...tensor import Tensor
from ...thread_state import ThreadState
from .weight_slicing import SlicedWeight

__all__ = ["install_on_this_thread", "gathered_bytes", "reset_gathered_peak"]

_counter = ThreadState(live=0, peak=0, installed=False)     # per rank thread


def gathered_bytes():
    """``(live, peak)`` bytes of whole weights gathered on this thread (the peak since the
    last ``reset_gathered_peak``)."""
    return _counter.live, _counter.peak


def reset_gathered_peak():
    _counter.peak = _counter.live


def _gather(sliced):
    """Whole values of ``sliced`` (``{position: SlicedWeight}``), counted while alive."""
    wholes = {pos: weight.draw() for pos, weight in sliced.items()}
    _counter.live += sum(w.nbytes for w in wholes.values())
    _counter.peak = max(_counter.peak, _counter.live)
    return wholes


def _drop(wholes):
    _counter.live -= sum(w.nbytes for w in wholes.values())
    wholes.clear()


class _GatheredUse(Primitive):
    """The tape node of one primitive call on sliced weights: regather, rerun, backward."""

    differentiable = True
    instance_name = "gathered_use"

    def backward(self, ctx, *out_grads):
        prim, attrs, inputs, sliced = ctx.replay
        wholes = _gather(sliced)
        try:
            leaves = [_leaf(x, wholes.get(pos)) for pos, x in enumerate(inputs)]
            with enable_grad():
                out = prim.run(*leaves, **attrs)
            outs = out if isinstance(out, tuple) else (out,)
            roots = [(o, g) for o, g in zip(outs, out_grads) if o.requires_grad]
            targets = [x for x in leaves if isinstance(x, Tensor)]
            found = run_backward([o for o, _ in roots], [g for _, g in roots],
                                 targets=targets) if roots else [None] * len(targets)
        finally:
            _drop(wholes)
        found = iter(found)
        return tuple(next(found) if isinstance(x, Tensor) else None for x in inputs)


def _leaf(x, whole):
    """The second run's input: a fresh leaf (the whole weight for a sliced one) whose
    gradient the backward returns; constants stay as they are."""
    if whole is not None:
        return Tensor._make(whole, x.device, x.requires_grad)
    if isinstance(x, Tensor):
        return Tensor._make(x.data, x.device, x.requires_grad)
    return x


_NODE_PRIM = _GatheredUse()


def _sliced_inputs(inputs):
    return {pos: x.deferred_init for pos, x in enumerate(inputs)
            if isinstance(x, Tensor) and isinstance(getattr(x, "deferred_init", None),
                                                     SlicedWeight)}


def gathered_call(prim, inputs, attrs, sliced):
    """``prim(*inputs)`` with the sliced weights of ``sliced`` whole only during the call."""
    wholes = _gather(sliced)
    try:
        run_inputs = [Tensor._make(wholes[pos], x.device) if pos in wholes else x
                      for pos, x in enumerate(inputs)]
        with no_grad():
            out = prim.run(*run_inputs, **attrs)
    finally:
        _drop(wholes)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    if not is_grad_enabled() or not getattr(prim, "differentiable", True) \
            or not any(t.requires_grad for t in tensors):
        return out
    outs = out if isinstance(out, tuple) else (out,)
    ctx = Context(outs[0].device)
    ctx.replay = (prim, attrs, tuple(inputs), sliced)
    ctx.needs_input_grad = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    meta = tuple((o.shape, o.dtype) for o in outs) if isinstance(out, tuple) else None
    node = Node(_NODE_PRIM, ctx, tuple(x if isinstance(x, Tensor) else None for x in inputs),
                meta)
    made = tuple(Tensor._make(o.data, o.device, o.dtype.kind == "f",
                              node if o.dtype.kind == "f" else None, i)
                 for i, o in enumerate(outs))
    return made if isinstance(out, tuple) else made[0]


def _hook(prim, inputs, attrs):
    sliced = _sliced_inputs(inputs)
    if sliced:
        return gathered_call(prim, inputs, attrs, sliced)
    if prim._recompute:          # what Primitive.apply does without a hook
        return recomputed_call(lambda *xs: prim.run(*xs, **attrs), inputs)
    return prim.run(*inputs, **attrs)


def install_on_this_thread():
    """Route this thread's primitive calls through ``_hook`` (once; where another executor's
    hook is installed, it stays, and the weights are gathered at first use instead)."""
    if _counter.installed:
        return
    previous = set_primitive_hook(_hook)
    if previous is not None:
        set_primitive_hook(previous)
        return
    _counter.installed = True
