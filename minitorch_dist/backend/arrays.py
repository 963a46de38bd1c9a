"""Array helpers shared by every array module (NumPy, CuPy, the virtual GPU's NumPy)."""

__all__ = ["contiguous"]


def contiguous(array):
    """``array`` as a C-contiguous buffer: itself when it already is one, else a copy.

    Communicators take contiguous buffers only and refuse strided views rather than copy
    them behind the caller's back, so callers pass what this returns. Unlike
    ``ascontiguousarray`` it needs no array module (``.copy()`` is C order in NumPy and
    CuPy alike) and never copies what is already contiguous.

    >>> import numpy as np
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> contiguous(a) is a, contiguous(a.T).flags.c_contiguous, contiguous(a.T).tolist()
    (True, True, [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    """
    return array if array.flags.c_contiguous else array.copy()
