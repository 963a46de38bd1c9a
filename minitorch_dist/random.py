"""The global random state used by initializers, dropout and dataset shuffling.

``get_rng_state``/``set_rng_state`` save and restore it (checkpoints carry it, so that a
resumed run draws the same dropout masks as an uninterrupted one).

Thread ranks (``communication.run_ranks``) each draw from a stream of their own, as the
processes of a launched job do (``rank_stream``): a copy of the parent's seeded state, or
fresh entropy where it was never seeded. Drawing from one shared stream made what a rank
got depend on how the threads interleaved. NumPy's own global generator (``np.random``,
which ``set_seed`` also seeds) stays shared.
"""
import threading
from contextlib import contextmanager

import numpy as np

_process = {"seed": None, "rng": np.random.default_rng()}
_thread = threading.local()       # .state: a thread rank's own {"seed", "rng"}


def _current():
    """The calling thread's state: its rank's stream inside ``rank_stream``, else the
    process's."""
    return getattr(_thread, "state", None) or _process


def _copy(state):
    generator = np.random.Generator(type(state["rng"].bit_generator)())
    generator.bit_generator.state = state["rng"].bit_generator.state
    return {"seed": state["seed"], "rng": generator}


def fork_state():
    """What a thread rank's stream starts from: a copy of the calling thread's state, or
    None when it was never seeded (each rank then draws fresh entropy)."""
    current = _current()
    return None if current["seed"] is None else _copy(current)


@contextmanager
def rank_stream(forked):
    """Inside, the calling thread draws from its own stream, started from ``forked`` (from
    ``fork_state``; copied again, so that the ranks do not share it).

    >>> set_seed(5); forked = fork_state()
    >>> draws = []
    >>> for _ in range(2):
    ...     with rank_stream(forked):
    ...         draws.append(rng().random())
    >>> draws[0] == draws[1] and get_seed() == 5
    True
    """
    own = {"seed": None, "rng": np.random.default_rng()} if forked is None else _copy(forked)
    previous = getattr(_thread, "state", None)
    _thread.state = own
    try:
        yield
    finally:
        _thread.state = previous


def set_seed(seed):
    """Seed every random draw the framework makes (initializers, dropout, shuffles), and
    NumPy's global generator, as MindSpore's ``set_seed`` does (its programs build their
    inputs with ``np.random`` after it; NumPy takes 32 bits, so larger seeds wrap there).

    >>> import minitorch_dist as ms
    >>> ms.set_seed(1); a = np.random.rand(); ms.set_seed(1); a == np.random.rand()
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    _current()["seed"] = int(seed)
    _current()["rng"] = np.random.default_rng(int(seed))
    np.random.seed(int(seed) % 2**32)


def get_seed():
    return _current()["seed"]


def rng():
    """The framework's NumPy ``Generator``."""
    return _current()["rng"]


def get_rng_state():
    """The framework's random state as a JSON-compatible dict (the seed and the host
    generator's bit-generator state), for checkpoints that must resume exactly.

    >>> set_seed(3); state = get_rng_state(); a = rng().random()
    >>> set_rng_state(state); rng().random() == a
    True
    """
    return {"seed": _current()["seed"], "bit_generator": _current()["rng"].bit_generator.state}


def set_rng_state(state):
    """Restore a state from :func:`get_rng_state`: the next draws (initializers, dropout,
    shuffles) are those that followed the moment it was taken. ``rng()`` returns a new
    generator object afterwards, so a device generator seeded from the host one (dropout on
    CuPy) is re-seeded from the restored state."""
    if not isinstance(state, dict) or not isinstance(state.get("bit_generator"), dict):
        raise ValueError(f"set_rng_state expects a dict from get_rng_state(), got {state!r:.80}")
    wanted = str(state["bit_generator"].get("bit_generator"))
    if wanted not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
        raise ValueError(f"set_rng_state: unknown bit generator {wanted!r}")
    generator = np.random.Generator(getattr(np.random, wanted)())
    try:
        generator.bit_generator.state = state["bit_generator"]
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"set_rng_state: not a valid generator state: {err}") from None
    _current()["rng"] = generator
    seed = state.get("seed")
    _current()["seed"] = None if seed is None else int(seed)
