"""Optimizers (each a Cell whose state is Parameters, so checkpoints include it)."""
from .optimizer import *  # noqa: F401,F403
from .sgd import *  # noqa: F401,F403
from .momentum import *  # noqa: F401,F403
from .adam import *  # noqa: F401,F403
from .lazy_adam import *  # noqa: F401,F403
from .ftrl import *  # noqa: F401,F403
from .proximal_adagrad import *  # noqa: F401,F403
from .schedules import *  # noqa: F401,F403
