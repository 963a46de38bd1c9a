"""Layers: Dense, Conv2d, pooling, activations, containers, embedding, batch norm."""
from .dense import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .activation import *  # noqa: F401,F403
from .basic import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .graph_cell import *  # noqa: F401,F403
from .activation_extra import *  # noqa: F401,F403
from .pooling_extra import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .norm_extra import *  # noqa: F401,F403
from .tools import *  # noqa: F401,F403
from .loss_extra import *  # noqa: F401,F403
from .loss_scale_cell import *  # noqa: F401,F403
from .wrappers_extra import *  # noqa: F401,F403
