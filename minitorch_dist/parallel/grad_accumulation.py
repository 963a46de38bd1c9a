"""Gradient accumulation: MindSpore's ``parallel.nn.GradAccumulation`` (formerly
``nn.wrap.cell_wrapper.GradAccumulationCell``) and ``grad_accumulation_step``.

``GradAccumulation(net_with_loss, micro_size)`` cuts every input into ``micro_size`` equal
slices on axis 0 and returns the **sum** of the micro-batch losses, as ``PipelineCell`` does.
Under a gradient computation (``TrainOneStepCell``, ``Model.train``, ``value_and_grad``) each
micro-batch runs its forward *and* its backward before the next one starts, and its graph is
freed: only one micro-batch's activations are alive at a time, which is the memory the
feature saves. The micro-batch gradients are summed into one buffer per parameter; the
returned loss carries them, so the ordinary gradient machinery hands them out, and the
data-parallel reduction and the optimizer run once per ``micro_size`` micro-batches
(one allreduce per bucket per step, not per micro-batch).

With optimizer parallel and ``parallel_optimizer_config={"gradient_accumulation_shard":
True}`` (data parallel), the sliced parameters' micro-batch gradients are reduce-scattered
at once and only this rank's slice is summed (``data_parallel/accumulation_shard.py``):
``accumulated_bytes`` counts what the sums hold.

``set_auto_parallel_context(grad_accumulation_step=k)`` makes ``Model`` accumulate the same
way: it wraps the loss network in ``GradAccumulation(net_with_loss, k)``
(``parallel/extension.py``, ``_ModelWiring.accumulated``).

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> net = nn.WithLossCell(nn.Dense(3, 1, weight_init="ones", bias_init="zeros"), nn.MSELoss())
>>> x, y = ms.Tensor(np.ones((4, 3), np.float32)), ms.Tensor(np.zeros((4, 1), np.float32))
>>> float(GradAccumulation(net, 2)(x, y).asnumpy())      # two micro-batch losses of 9.0
18.0
"""
from ..autograd import Node, enable_grad, is_grad_enabled, no_grad, run_backward
from ..nn.cell import Cell
from ..ops.primitive import Context
from ..tensor import Tensor
from .comm.collectives import MirrorDeferral
from .comm_fusion import reduce_deferred
from .data_parallel.accumulation_shard import ShardedAccumulation
from .pipeline.pipeline_cell import split_microbatches
from .preset_gradients import PresetGradients

__all__ = ["GradAccumulation"]


_GRADIENTS = PresetGradients("grad_accumulation.gradients", "GradAccumulation: the accumulated loss")


def _check_micro_size(owner, micro_size):
    if isinstance(micro_size, bool) or not isinstance(micro_size, int) or micro_size < 1:
        raise ValueError(f"{owner}: micro_size must be a positive int, got {micro_size!r}")


class GradAccumulation(Cell):
    """Accumulate the gradients of ``micro_size`` micro-batches per step; see the module
    docstring. ``network`` returns the loss (a ``WithLossCell``)."""

    _name_scope = False
    # under semi/auto parallel each micro-batch's network call is the sharded one: the
    # accumulation loop itself is no network to trace
    _runs_training_step = True

    def __init__(self, network, micro_size):
        super().__init__()
        if not isinstance(network, Cell):
            raise TypeError(f"GradAccumulation: network must be a Cell returning the loss, got "
                            f"{type(network).__name__}")
        _check_micro_size("GradAccumulation", micro_size)
        self.network = network
        self.micro_size = micro_size
        self.steps = 0       # micro-batches run under gradients (a test and benchmark counter)
        self.accumulated_bytes = 0   # bytes of the sums held across the last step's micro-batches

    def construct(self, *inputs):
        micro = split_microbatches(inputs, self.micro_size)
        if not is_grad_enabled():
            total = None
            for row in micro:
                loss = self.network(*row)
                total = loss if total is None else total + loss
            return total
        params = [p for p in self.network.trainable_params()]
        sums, total = [None] * len(params), None
        sharded = ShardedAccumulation.for_step(params)
        with MirrorDeferral() as deferral:
            for row in micro:
                with enable_grad():
                    loss = self.network(*row)
                grads = run_backward([loss], [loss.device.xp.ones(loss.shape, loss.dtype)],
                                     targets=params)
                grads = [None if g is None else g.to_dense().data if hasattr(g, "to_dense")
                         else g for g in grads]
                if sharded is not None:     # sliced parameters: reduce-scattered at once
                    grads = sharded.add(grads)
                for k, dense in enumerate(grads):
                    if dense is not None:
                        sums[k] = dense if sums[k] is None else sums[k] + dense
                with no_grad():
                    total = loss.data.copy() if total is None else total + loss.data
                self.steps += 1
        reduce_deferred(params, sums, deferral)
        self.accumulated_bytes = sum(g.nbytes for g in sums if g is not None) + \
            (0 if sharded is None else sharded.held_bytes())
        if sharded is not None:
            sharded.hand_over(sums)
        kept = [(p, g) for p, g in zip(params, sums) if g is not None]
        device = loss.device
        if not kept:
            return Tensor._make(total, device)
        ctx = Context(device)
        ctx.grads = tuple(g for _, g in kept)
        node = Node(_GRADIENTS, ctx, tuple(p for p, _ in kept))
        return Tensor._make(total, device, True, node)

    def extra_repr(self):
        return f"micro_size={self.micro_size}"
