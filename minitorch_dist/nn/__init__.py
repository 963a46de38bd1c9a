"""Networks: Cell, Parameter, layers, losses, wrappers and optimizers."""
from .parameter import Parameter, ParameterTuple
from .cell import Cell
from .layers import *     # noqa: F401,F403
from .loss import *       # noqa: F401,F403
from .wrappers import *   # noqa: F401,F403
from .optim import *      # noqa: F401,F403


def __getattr__(name):
    # nn.DistributedGradReducer, nn.PipelineCell and nn.PipelineGradReducer live in the
    # parallel layer, which is built on nn: import them on first use instead of making nn
    # depend on parallel at import time.
    if name == "DistributedGradReducer":
        from ..parallel.grad_reducer import DistributedGradReducer
        return DistributedGradReducer
    if name == "PipelineCell":
        from ..parallel.pipeline.pipeline_cell import PipelineCell
        return PipelineCell
    if name == "PipelineGradReducer":
        from ..parallel.pipeline.grad_reducer import PipelineGradReducer
        return PipelineGradReducer
    raise AttributeError(f"module 'minitorch_dist.nn' has no attribute {name!r}")
