"""Networks: Cell, Parameter, layers, losses, wrappers and optimizers."""
from .parameter import Parameter, ParameterTuple
from .cell import Cell
from .layers import *     # noqa: F401,F403
from .loss import *       # noqa: F401,F403
from .wrappers import *   # noqa: F401,F403
from .optim import *      # noqa: F401,F403

# nn.DistributedGradReducer, nn.PipelineCell and nn.PipelineGradReducer belong to the parallel
# layer, which is built on nn: it adds them here when it is imported (parallel/extension.py).
