"""Elementwise reductions over a list of equally shaped arrays, shared by the host backends.

The local (threads) and TCP communicators gather every rank's contribution and reduce
them here. The ranks are always combined in rank order, so every rank computes a bitwise
identical result (floating-point addition is not associative).
"""
import numpy as np

_UFUNCS = {"sum": "add", "mean": "add", "max": "maximum", "min": "minimum", "prod": "multiply"}


def array_module(array):
    """``numpy`` for host arrays, ``cupy`` for CuPy arrays (without importing CuPy otherwise)."""
    if type(array).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


def reduce_arrays(arrays, op, out=None):
    """Reduce ``arrays`` (rank order) with ``op``; the result goes to ``out`` or a new array.

    ``mean`` is the sum divided by the number of arrays, in place (integers use floor division).

    >>> import numpy as np
    >>> reduce_arrays([np.array([1.0, 4.0]), np.array([3.0, 2.0])], "mean").tolist()
    [2.0, 3.0]
    >>> reduce_arrays([np.array([1, 4]), np.array([3, 2])], "max").tolist()
    [3, 4]
    """
    xp = array_module(arrays[0])
    ufunc = getattr(xp, _UFUNCS[op])
    result = out if out is not None else xp.empty_like(arrays[0])
    if len(arrays) == 1:
        result[...] = arrays[0]
    else:
        ufunc(arrays[0], arrays[1], out=result)
        for other in arrays[2:]:
            ufunc(result, other, out=result)
    if op == "mean":
        divide_in_place(result, len(arrays))
    return result


def divide_in_place(array, count):
    """``array /= count`` that also works for integer arrays (floor division)."""
    if array.dtype.kind in "fc":
        array /= count
    else:
        array //= count
    return array


def check_out(what, array, out):
    """``out`` (when given) must match ``array`` in shape and dtype."""
    if out is not None and (out.shape != array.shape or out.dtype != array.dtype):
        raise ValueError(f"{what}: out must have the input's shape and dtype {array.shape} "
                         f"{array.dtype}, got {out.shape} {out.dtype}")
