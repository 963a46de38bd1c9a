"""The global random state used by initializers, dropout and dataset shuffling.

``get_rng_state``/``set_rng_state`` save and restore it (checkpoints carry it, so that a
resumed run draws the same dropout masks as an uninterrupted one).
"""
import numpy as np

_state = {"seed": None, "rng": np.random.default_rng()}


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
    _state["seed"] = int(seed)
    _state["rng"] = np.random.default_rng(int(seed))
    np.random.seed(int(seed) % 2**32)


def get_seed():
    return _state["seed"]


def rng():
    """The framework's NumPy ``Generator``."""
    return _state["rng"]


def get_rng_state():
    """The framework's random state as a JSON-compatible dict (the seed and the host
    generator's bit-generator state), for checkpoints that must resume exactly.

    >>> set_seed(3); state = get_rng_state(); a = rng().random()
    >>> set_rng_state(state); rng().random() == a
    True
    """
    return {"seed": _state["seed"], "bit_generator": _state["rng"].bit_generator.state}


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
    _state["rng"] = generator
    seed = state.get("seed")
    _state["seed"] = None if seed is None else int(seed)
