"""Running a cell in another precision: MindSpore's ``Cell.to_float(dtype)``.

``to_float(cell, float16)`` makes ``cell`` and every cell inside it compute in float16: each
call casts the cell's floating inputs and its own parameters to float16 (differentiable
casts, so gradients reach the float32 parameters, which stay the master copy), then runs
the cell's ``construct``. Outputs stay in float16, as in MindSpore; ``output_to(cell,
float32)`` casts a cell's outputs back. The cell tree, the parameters and their names are
unchanged, so checkpoints are the same with and without mixed precision.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> dense = nn.Dense(3, 2).to_float(ms.float16)
>>> y = dense(ms.Tensor(np.ones((1, 3), np.float32)))
>>> y.dtype, dense.weight.dtype
(dtype('float16'), dtype('float32'))
"""
from ...backend import dtypes
from ...ops.cast import cast
from ...tensor import Tensor

__all__ = ["to_float", "output_to", "cast_primitive", "compute_dtype"]

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)


def _check(dtype, owner):
    dtype = dtypes.to_dtype(dtype)
    if dtype not in _FLOATS:
        raise TypeError(f"{owner}: dst_type must be ms.float16, ms.float32 or ms.float64, got {dtype}")
    return dtype


def _cast_value(value, dtype):
    if isinstance(value, Tensor) and value.dtype.kind == "f" and value.dtype != dtype:
        return cast(value, dtype)
    if type(value) in (tuple, list):
        return type(value)(_cast_value(v, dtype) for v in value)
    return value


def compute_dtype(cell):
    """The dtype ``to_float`` set on ``cell`` (None: its own precision)."""
    return cell.__dict__.get("_amp_dtype")


def _cast_construct(cell, construct):
    def run(*inputs, **kwargs):
        dtype = cell.__dict__["_amp_dtype"]
        inputs = _cast_value(inputs, dtype)
        # the cell reads its parameters as attributes: point them at float16 casts meanwhile.
        # State it updates in place (batch norm's moving statistics: requires_grad=False)
        # stays the float32 parameter, or the updates would land in a temporary copy.
        own = [(name, p) for name, p in cell._params.items()
               if p.dtype.kind == "f" and p.dtype != dtype and p.requires_grad]
        for name, p in own:
            object.__setattr__(cell, name, cast(p, dtype))
        try:
            return construct(*inputs, **kwargs)
        finally:
            for name, p in own:
                object.__setattr__(cell, name, p)
    return run


def to_float(cell, dst_type):
    """``cell`` and its sub-cells compute in ``dst_type``; returns ``cell`` (see above)."""
    dtype = _check(dst_type, f"{type(cell).__name__}.to_float")
    for _, sub in cell.cells_and_names():
        if "_amp_dtype" not in sub.__dict__:
            object.__setattr__(sub, "construct", _cast_construct(sub, sub.construct))
        object.__setattr__(sub, "_amp_dtype", dtype)
    return cell


def output_to(cell, dtype):
    """Cast ``cell``'s floating outputs to ``dtype`` (MindSpore's ``_OutputTo32``)."""
    dtype = _check(dtype, "output_to")
    inner = cell.construct

    def run(*inputs, **kwargs):
        return _cast_value(inner(*inputs, **kwargs), dtype)
    object.__setattr__(cell, "construct", run)
    return cell


def cast_primitive(prim, dtype, out_dtype=dtypes.float32):
    """Run primitive ``prim`` in ``dtype``: its floating inputs are cast, its outputs cast
    back to ``out_dtype`` (amp level O1's treatment of white-listed primitives)."""
    dtype = _check(dtype, "cast_primitive")
    if "apply" in prim.__dict__:
        return prim
    apply = prim.apply

    def run(*inputs, **attrs):
        return _cast_value(apply(*_cast_value(inputs, dtype), **attrs), out_dtype)
    prim.apply = run
    return prim
