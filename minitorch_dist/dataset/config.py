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


# ---- MindSpore's other pipeline settings ----------------------------------------------------
# name -> (default, type check, what it means here). The pipeline runs in the calling thread
# with vectorised transforms, so none of these changes how data is produced: each is type
# checked, stored (its getter returns it) and noted once, as MindSpore's own CPU-only runs
# ignore the device- and worker-related ones.
_SETTINGS = {
    "prefetch_size": (16, "positive int", "there is no prefetch queue: batches are made on demand"),
    "numa_enable": (False, "bool", "there are no worker processes to bind to NUMA nodes"),
    "monitor_sampling_interval": (1000, "non-negative int", "there is no pipeline monitor"),
    "callback_timeout": (60, "positive int", "callbacks run in the calling thread"),
    "auto_num_workers": (False, "bool", "there are no workers to size"),
    "enable_shared_mem": (True, "bool", "there are no worker processes to share memory with"),
    "enable_autotune": (False, "bool", "there are no worker or queue sizes to tune"),
    "autotune_interval": (0, "non-negative int", "there is no autotuner"),
    "auto_offload": (False, "bool", "there is no device-side data pipeline to offload to"),
    "enable_watchdog": (True, "bool", "there are no worker processes to watch"),
    "multiprocessing_timeout_interval": (300, "positive int", "there are no worker processes"),
    "sending_batches": (0, "non-negative int", "there is no device data queue"),
    "debug_mode": (False, "bool", "the pipeline is always eager and debuggable"),
    "fast_recovery": (True, "bool", "a restarted pipeline replays from the start"),
    "error_samples_mode": ("RETURN_ERROR", "ErrorSamplesMode", "errors are always raised"),
}
_values = {name: default for name, (default, _, _) in _SETTINGS.items()}
_noted = set()


class ErrorSamplesMode:
    """MindSpore's ``ds.config.ErrorSamplesMode`` values."""
    RETURN_ERROR = "RETURN_ERROR"
    REPLACE = "REPLACE"
    SKIP = "SKIP"


def _valid(kind, value):
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "ErrorSamplesMode":
        return value in ("RETURN_ERROR", "REPLACE", "SKIP")
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        return False
    return value > 0 if kind == "positive int" else value >= 0


def _set(name, value):
    default, kind, why = _SETTINGS[name]
    if not _valid(kind, value):
        raise ValueError(f"ds.config.set_{name}: expected a {kind}, got {value!r}")
    if value != default and name not in _noted:
        _noted.add(name)
        from ..log import logger
        logger.warning("ds.config.set_%s(%r) is stored and changes nothing here: %s", name, value, why)
    _values[name] = value


def _make(name):
    def setter(value):
        _set(name, value)

    def getter():
        return _values[name]
    setter.__name__, getter.__name__ = "set_" + name, "get_" + name
    setter.__doc__ = f"MindSpore's ``set_{name}``: checked and stored; {_SETTINGS[name][2]}."
    getter.__doc__ = f"The value given to ``set_{name}`` (MindSpore's default until then)."
    return setter, getter


for _name in _SETTINGS:
    globals()["set_" + _name], globals()["get_" + _name] = _make(_name)


def load(file):
    """Apply the settings of a MindSpore dataset config JSON file (keys such as
    ``"prefetchSize"``, ``"numParallelWorkers"``, ``"seed"``)."""
    import json
    import os
    import re
    if not os.path.isfile(file):
        raise OSError(f"ds.config.load: no such file {file!r}")
    with open(file) as handle:
        try:
            settings = json.load(handle)
        except ValueError as err:
            raise ValueError(f"ds.config.load: {file!r} is not JSON: {err}") from None
    for key, value in settings.items():
        name = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        if name == "seed":
            set_seed(value)
        elif name == "num_parallel_workers":
            set_num_parallel_workers(value)
        elif name in _SETTINGS:
            _set(name, value)
        else:
            from ..log import logger
            logger.warning("ds.config.load: setting %r of %s does not exist here and is skipped",
                           key, file)
