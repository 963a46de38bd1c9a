"""``ds.Shuffle``: how much a file-backed source shuffles each epoch, as in MindSpore.

* ``GLOBAL`` (what ``True`` means): the file order and all rows of the shard;
* ``FILES``: the file order only, rows keep their order within each file;
* ``INFILE`` (``MindDataset`` only): rows within each file, the file order kept.
"""
from enum import Enum

import numpy as np


class Shuffle(str, Enum):
    """The shuffle levels (``ds.Shuffle.GLOBAL``, ``FILES``, ``INFILE``)."""
    GLOBAL = "global"
    FILES = "files"
    INFILE = "infile"


def shuffle_level(shuffle, default, allowed, what):
    """``None`` (no shuffle) or a :class:`Shuffle` from a bool, ``None`` or a level.

    >>> shuffle_level(True, Shuffle.GLOBAL, tuple(Shuffle), "x") is Shuffle.GLOBAL
    True
    >>> shuffle_level(False, Shuffle.GLOBAL, tuple(Shuffle), "x") is None
    True
    """
    if shuffle is None:
        return default
    if isinstance(shuffle, (bool, np.bool_)):
        return Shuffle.GLOBAL if shuffle else None
    if isinstance(shuffle, Shuffle):
        if shuffle not in allowed:
            raise ValueError(f"{what}: shuffle={shuffle} is not supported here; expected a bool or "
                             f"one of {[str(s) for s in allowed]}")
        return shuffle
    raise TypeError(f"{what}: shuffle must be a bool or a ds.Shuffle level "
                    f"({', '.join('Shuffle.' + s.name for s in allowed)}), got {shuffle!r}")
