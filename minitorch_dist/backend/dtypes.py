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


# ---- wire codes -----------------------------------------------------------------------
# How a dtype travels as one integer: in collective signatures (``communication.desync``),
# parameter-list checks (``DistOpt``) and the pipeline's Send/Recv headers. Every rank runs
# the same code, so the order only has to agree with itself; append new dtypes at the end.
WIRE_DTYPES = tuple(np.dtype(name) for name in (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"))
UNKNOWN_CODE = 99        # a sentinel callers may send for a dtype outside the table
_CODES = {dtype: code for code, dtype in enumerate(WIRE_DTYPES)}
_RAISE = object()


def dtype_code(dtype, default=_RAISE):
    """The wire code of ``dtype`` (anything ``numpy.dtype`` accepts, CuPy's dtypes too).

    A dtype outside ``WIRE_DTYPES`` raises ``TypeError``, or returns ``default`` when one
    is given (``UNKNOWN_CODE``, say).

    >>> dtype_code("float32"), dtype_code(np.complex64), dtype_code("V8", default=UNKNOWN_CODE)
    (10, 12, 99)
    """
    # numpy reads None as float64; here it is no dtype at all
    code = None if dtype is None else _CODES.get(np.dtype(dtype))
    if code is not None:
        return code
    if default is _RAISE:
        raise TypeError(f"dtype {dtype} has no wire code; expected one of "
                        f"{[str(d) for d in WIRE_DTYPES]}")
    return default


def dtype_from_code(code, default=_RAISE):
    """The dtype whose wire code is ``code``: ``ValueError`` for an unknown code, or
    ``default`` when one is given.

    >>> dtype_from_code(dtype_code(int64)), dtype_from_code(UNKNOWN_CODE, default="other")
    (dtype('int64'), 'other')
    """
    code = int(code)
    if 0 <= code < len(WIRE_DTYPES):
        return WIRE_DTYPES[code]
    if default is _RAISE:
        raise ValueError(f"unknown dtype wire code {code}; expected 0 <= code < "
                         f"{len(WIRE_DTYPES)}")
    return default
