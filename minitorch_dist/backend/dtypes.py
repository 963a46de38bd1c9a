"""The dtype table: which element types minitorch_dist supports and how they promote.

Dtypes are plain ``numpy.dtype`` objects, so they work unchanged with NumPy and CuPy and
promotion follows NumPy's rules (``float32 + float64 -> float64``).
"""
import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
uint32 = np.dtype("uint32")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

SUPPORTED = (float16, float32, float64, int8, uint8, int32, uint32, int64, bool_)
FLOATS = (float16, float32, float64)
DEFAULT_FLOAT = float32

_NAMES = {str(d): d for d in SUPPORTED}
_NAMES.update({"bool_": bool_, "half": float16, "float": float32, "double": float64,
               "int": int64, "long": int64})


def to_dtype(spec):
    """Normalise a dtype given as a numpy dtype, a numpy type or a name ("float32").

    >>> to_dtype("float32") is float32
    True
    """
    if isinstance(spec, str):
        if spec not in _NAMES:
            raise TypeError(f"unknown dtype {spec!r}; expected one of {sorted(_NAMES)}")
        return _NAMES[spec]
    try:
        dt = np.dtype(spec)
    except TypeError:
        raise TypeError(f"cannot interpret {spec!r} as a dtype; expected one of "
                        f"{[str(d) for d in SUPPORTED]}") from None
    if dt not in SUPPORTED:
        raise TypeError(f"dtype {dt} is not supported; expected one of {[str(d) for d in SUPPORTED]}")
    return dt


def is_floating(dtype):
    return dtype.kind == "f"


def promote(*dtypes):
    """NumPy-style promotion of several dtypes."""
    return np.result_type(*dtypes)
