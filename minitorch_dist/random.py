"""The global random state used by initializers, dropout and dataset shuffling."""
import numpy as np

_state = {"seed": None, "rng": np.random.default_rng()}


def set_seed(seed):
    """Seed every random draw the framework makes (initializers, dropout, shuffles).

    >>> import minitorch_dist as ms
    >>> ms.set_seed(1)
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    _state["seed"] = int(seed)
    _state["rng"] = np.random.default_rng(int(seed))


def get_seed():
    return _state["seed"]


def rng():
    """The framework's NumPy ``Generator``."""
    return _state["rng"]
