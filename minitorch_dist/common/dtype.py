"""``mindspore.common.dtype`` (scripts import it as ``mstype``): the dtypes.

>>> import minitorch_dist as ms
>>> import minitorch_dist.common.dtype as mstype
>>> mstype.float32 is ms.float32
True
"""
from ..backend.dtypes import (bool_, float16, float32, float64, int8, int32, int64, uint8,  # noqa: F401
                              uint32)

import numpy as _np

float_ = float32
int_ = int32
half = float16
single = float32
double = float64
uint = uint32
int_type = (int8, int32, int64)
uint_type = (uint8, uint32)
float_type = (float16, float32, float64)
number_type = int_type + uint_type + float_type
all_types = (bool_,) + number_type
_UNSUPPORTED = ("int16", "uint16", "uint64", "bfloat16", "complex64", "complex128", "string",
                "int4", "qint4x2")
__all__ = ["bool_", "float16", "float32", "float64", "int8", "int32", "int64", "uint8",
           "uint32", "float_", "int_", "half", "single", "double", "uint", "int_type",
           "uint_type", "float_type", "number_type", "all_types", "dtype_to_nptype",
           "dtype_to_pytype", "pytype_to_dtype"]


def dtype_to_nptype(type_):
    """The NumPy type of a dtype (``mstype.dtype_to_nptype(mstype.float32)`` is
    ``numpy.float32``); dtypes here are NumPy dtypes already."""
    return _np.dtype(type_).type


def dtype_to_pytype(type_):
    """The Python type of a dtype's values: ``bool``, ``int`` or ``float``."""
    kind = _np.dtype(type_).kind
    return bool if kind == "b" else float if kind == "f" else int


def pytype_to_dtype(obj):
    """The dtype of a Python type or NumPy type: ``bool`` -> bool_, ``int`` -> int64,
    ``float`` -> float64."""
    from ..backend.dtypes import to_dtype
    return to_dtype(_np.dtype(obj))


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise AttributeError(f"mstype.{name} is a MindSpore dtype this framework does not support; "
                             f"supported dtypes: {[str(d) for d in (bool_,) + number_type]}")
    raise AttributeError(f"module 'minitorch_dist.common.dtype' has no attribute {name!r}")
