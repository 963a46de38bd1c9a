"""``auto_mixed_precision(network, amp_level)`` and ``custom_mixed_precision``: which parts of
a network compute in float16.

* ``"O0"``: nothing changes.
* ``"O1"``: the white-listed cells (``Dense``, ``Conv2d``, ...) and primitives (``MatMul``,
  ``Conv2D``, ``ReLU``, ...) compute in float16; their outputs are cast back to float32.
* ``"O2"``: the whole network computes in float16 except the black-listed cells (batch and
  layer norms), which stay in float32; the network's outputs are cast to float32.
* ``"O3"``: the whole network computes in float16; outputs are cast to float32.

Parameters stay float32 (the master copy the optimizer updates); each cell casts them as
it runs (``nn/layers/mixed_precision.py``). The network is changed in place and returned.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> from minitorch_dist.amp import auto_mixed_precision
>>> net = auto_mixed_precision(nn.SequentialCell(nn.Dense(4, 3), nn.ReLU()), "O2")
>>> net(ms.Tensor(np.ones((2, 4), np.float32))).dtype
dtype('float32')
"""
from ..backend import dtypes
from ..nn.cell import Cell
from ..nn.layers.mixed_precision import cast_primitive, output_to, to_float
from .lists import black_cells, white_cells, white_primitives

__all__ = ["auto_mixed_precision", "custom_mixed_precision", "AMP_LEVELS"]

AMP_LEVELS = ("O0", "O1", "O2", "O3")


def _check(network, dtype, owner):
    if not isinstance(network, Cell):
        raise TypeError(f"{owner}: network must be a Cell, got {type(network).__name__}")
    try:
        dtype = dtypes.to_dtype(dtype)
    except TypeError:
        raise TypeError(f"{owner}: dtype must be ms.float16, got {dtype!r} (bfloat16 is not "
                        "supported here)") from None
    if dtype != dtypes.float16:
        raise TypeError(f"{owner}: dtype must be ms.float16, got {dtype}")
    return dtype


def _cast_white(network, cells, primitives, dtype):
    """White cells compute in float16 (outputs back to float32); white primitives held by
    other cells likewise. A white cell's own primitives are already inside its float16."""
    for name, cell in network.name_cells().items():
        if isinstance(cell, cells):
            output_to(to_float(cell, dtype), dtypes.float32)
        else:
            _cast_white(cell, cells, primitives, dtype)
    for prim in network._primitives.values():
        if isinstance(prim, primitives):
            cast_primitive(prim, dtype)


def _cast_all_but(network, black, dtype):
    to_float(network, dtype)
    for _, cell in network.cells_and_names():
        if isinstance(cell, black):
            to_float(cell, dtypes.float32)
    output_to(network, dtypes.float32)


def auto_mixed_precision(network, amp_level="O0", dtype=dtypes.float16):
    """Mixed precision by level (see the module docstring); returns ``network``."""
    if amp_level not in AMP_LEVELS:
        raise ValueError(f"auto_mixed_precision: amp_level must be one of {list(AMP_LEVELS)}, "
                         f"got {amp_level!r}")
    dtype = _check(network, dtype, "auto_mixed_precision")
    if amp_level == "O1":
        _cast_white(network, tuple(white_cells()), tuple(white_primitives()), dtype)
    elif amp_level == "O2":
        _cast_all_but(network, tuple(black_cells()), dtype)
    elif amp_level == "O3":
        to_float(network, dtype)
        output_to(network, dtypes.float32)
    return network


def custom_mixed_precision(network, *, white_list=None, black_list=None, dtype=dtypes.float16):
    """Mixed precision with your own lists: ``white_list`` (cells and primitive classes run in
    float16, as O1) or ``black_list`` (cells kept in float32, the rest float16, as O2)."""
    dtype = _check(network, dtype, "custom_mixed_precision")
    if (white_list is None) == (black_list is None):
        raise ValueError("custom_mixed_precision: give exactly one of white_list and black_list")
    if white_list is not None:
        classes = tuple(white_list)
        cells = tuple(c for c in classes if isinstance(c, type) and issubclass(c, Cell))
        prims = tuple(c for c in classes if c not in cells)
        _cast_white(network, cells, prims, dtype)
    else:
        _cast_all_but(network, tuple(black_list), dtype)
    return network
