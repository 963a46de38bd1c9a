"""Weight gradients of a sharded network: summed over the ranks that hold the same slice.

A parameter's layout splits it over some device-matrix axes and repeats it over the others;
the ranks along a repeated axis hold the same slice but saw different data (or different
parts of the computation), so each has only part of that slice's gradient. MindSpore's
"mirror" operator adds them up: an all-reduce (sum) over each parameter's repeated axes,
after which every copy of a slice takes the same optimizer step. A parameter split over
every axis needs nothing.
"""
from ...nn.cell import Cell
from ...row_tensor import RowTensor
from ..comm_ops import communicator_for
from .layout import group_ranks

__all__ = ["MirrorGradReducer"]


class MirrorGradReducer(Cell):
    """``grads`` (aligned with ``parameters``) summed over each parameter's copies."""

    def __init__(self, parameters, sharded_cell):
        super().__init__()
        object.__setattr__(self, "parameters", tuple(parameters))
        object.__setattr__(self, "sharded", sharded_cell)

    def construct(self, grads):
        program = self.sharded.program
        out = []
        for param, grad in zip(self.parameters, grads):
            layout = getattr(param, "sharding_layout", None)
            if grad is None or layout is None:
                out.append(grad)
                continue
            if isinstance(grad, RowTensor):
                raise NotImplementedError(f"{param.name}: sparse (RowTensor) gradients of a "
                                          "sharded parameter are not supported; use a dense lookup")
            axes = layout.replicated_axes()
            if axes:
                group = program.group(group_ranks(layout.device_matrix, axes, program.rank))
                communicator_for(group, grad.device).allreduce(grad.data, "sum", out=grad.data)
            out.append(grad)
        return tuple(out)
