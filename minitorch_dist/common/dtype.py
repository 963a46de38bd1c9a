"""``mindspore.common.dtype`` (scripts import it as ``mstype``): the dtypes.

>>> import minitorch_dist as ms
>>> import minitorch_dist.common.dtype as mstype
>>> mstype.float32 is ms.float32
True
"""
from ..backend.dtypes import (bool_, float16, float32, float64, int8, int32, int64, uint8,  # noqa: F401
                              uint32)

float_ = float32
int_ = int32
__all__ = ["bool_", "float16", "float32", "float64", "int8", "int32", "int64", "uint8",
           "uint32", "float_", "int_"]
