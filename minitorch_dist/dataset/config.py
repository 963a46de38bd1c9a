"""Dataset-wide settings: the shuffle seed (``ds.config.set_seed``, as in MindSpore).

Every shuffle in a pipeline draws from a generator seeded by ``(seed, salt, epoch key)``,
so all ranks of a data-parallel job shuffle identically without talking to each other.
The seed is the one given to :func:`set_seed` here, else the framework seed
(``minitorch_dist.set_seed``), else :data:`DEFAULT_SEED`.
"""
import numpy as np

from .. import random as _framework_random

DEFAULT_SEED = 0
_state = {"seed": None, "num_parallel_workers": 1}


def set_seed(seed):
    """Seed the dataset shuffles only (``minitorch_dist.set_seed`` seeds them too).

    >>> import minitorch_dist.dataset as ds
    >>> ds.config.set_seed(5); ds.config.get_seed()
    5
    >>> ds.config.set_seed(None)   # back to the framework seed
    """
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)
                             or seed < 0):
        raise ValueError(f"dataset seed must be a non-negative integer or None, got {seed!r}")
    _state["seed"] = None if seed is None else int(seed)


def get_seed():
    """The seed shuffles use now: dataset seed, else framework seed, else ``DEFAULT_SEED``."""
    if _state["seed"] is not None:
        return _state["seed"]
    framework_seed = _framework_random.get_seed()
    return DEFAULT_SEED if framework_seed is None else framework_seed


def rng_for(salt, key):
    """A NumPy generator determined by the seed, a per-operation ``salt`` and an epoch ``key``.

    ``key`` is a tuple of non-negative ints (the epoch, extended by ``repeat`` with the pass
    number), so each epoch reshuffles and every rank draws the same numbers.
    """
    return np.random.default_rng([get_seed(), int(salt), *(int(k) for k in key)])


def set_num_parallel_workers(num):
    """Accepted for MindSpore compatibility: the pipeline runs in the calling thread, and
    vectorised transforms make worker processes unnecessary for array datasets."""
    if not isinstance(num, (int, np.integer)) or isinstance(num, bool) or num < 1:
        raise ValueError(f"num_parallel_workers must be a positive integer, got {num!r}")
    _state["num_parallel_workers"] = int(num)


def get_num_parallel_workers():
    return _state["num_parallel_workers"]
