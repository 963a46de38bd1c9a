"""Networks: Cell, Parameter, layers, losses, wrappers and optimizers."""
from .parameter import Parameter, ParameterTuple
from .cell import Cell
from .layers import *     # noqa: F401,F403
from .loss import *       # noqa: F401,F403
from .wrappers import *   # noqa: F401,F403
from .optim import *      # noqa: F401,F403
