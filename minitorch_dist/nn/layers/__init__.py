"""Layers: Dense, Conv2d, pooling, activations, containers, embedding, batch norm."""
from .dense import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .activation import *  # noqa: F401,F403
from .basic import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
