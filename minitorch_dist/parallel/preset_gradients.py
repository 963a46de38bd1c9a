"""The tape node behind a loss whose parameter gradients were computed already.

A pipeline's schedule and gradient accumulation run their own backward passes (per
micro-batch) and hand back one loss. To let the ordinary machinery (``value_and_grad``,
``TrainOneStepCell``, reducers, optimizers) take the gradients from that loss, the loss is
recorded with one node whose inputs are the parameters and whose backward returns the
gradients held in its context, scaled by the loss's incoming gradient (normally 1).
"""
from ..ops.primitive import Primitive

__all__ = ["PresetGradients"]


class PresetGradients(Primitive):
    """``PresetGradients(instance_name, what)``: ``ctx.grads`` holds one gradient per input
    parameter; ``what`` names the loss in the error for a non-uniform sensitivity."""

    differentiable = True

    def __init__(self, instance_name, what):
        self.instance_name = instance_name
        self.what = what

    def backward(self, ctx, grad):
        xp = ctx.xp
        scale = grad.reshape(-1)[:1] if grad.size else grad
        if grad.size and not bool(xp.all(grad == scale)):
            raise ValueError(f"{self.what} can only be differentiated with a uniform "
                             "sensitivity (the same gradient for every element)")
        factor = float(scale[0]) if grad.size else 1.0
        return tuple(g if factor == 1.0 else g * factor for g in ctx.grads)
