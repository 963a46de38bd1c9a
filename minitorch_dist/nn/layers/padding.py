"""Padding layers: MindSpore's ``nn.Pad(paddings, mode)`` (pairs per axis, first axis first)
and the PyTorch-style ``ConstantPad1d/2d/3d``, ``ReflectionPad1d/2d``, ``ZeroPad2d`` (last
axis first). Constant padding is a concatenation, so the gradient is the slice back.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> nn.Pad(((0, 0), (1, 1)))(ms.Tensor(np.ones((1, 2), np.float32))).asnumpy().tolist()
[[0.0, 1.0, 1.0, 0.0]]
"""
from ... import ops
from ..cell import Cell

__all__ = ["Pad", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ZeroPad2d"]

_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": None}


class Pad(Cell):
    """``Pad(paddings=((before, after), ...), mode="CONSTANT"|"REFLECT")``: one pair per axis."""

    def __init__(self, paddings, mode="CONSTANT"):
        super().__init__()
        if not isinstance(paddings, (tuple, list)) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 for p in paddings):
            raise ValueError(f"nn.Pad: paddings must be a tuple of (before, after) pairs, got {paddings!r}")
        if str(mode).upper() not in _MODES or _MODES[str(mode).upper()] is None:
            raise ValueError(f"nn.Pad: mode must be 'CONSTANT' or 'REFLECT', got {mode!r}")
        self.paddings = tuple(tuple(int(v) for v in p) for p in paddings)
        self.mode = _MODES[str(mode).upper()]
        flat = []
        for before, after in reversed(self.paddings):
            flat += [before, after]
        self._flat = tuple(flat)

    def construct(self, x):
        if x.ndim != len(self.paddings):
            raise ValueError(f"nn.Pad: paddings has {len(self.paddings)} pairs for a {x.ndim}-D input")
        return ops.pad(x, self._flat, self.mode)


class _TorchPad(Cell):
    pairs = 1
    mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self.pairs)
        padding = tuple(int(p) for p in padding)
        if len(padding) != 2 * self.pairs:
            raise ValueError(f"nn.{type(self).__name__}: padding must be an int or {2 * self.pairs} ints, "
                             f"got {padding!r}")
        self.padding, self.value = padding, value

    def construct(self, x):
        if self.mode == "constant":
            return ops.pad(x, self.padding, "constant", self.value)
        return ops.pad(x, self.padding, self.mode)


class ConstantPad1d(_TorchPad):
    pairs = 1


class ConstantPad2d(_TorchPad):
    pairs = 2


class ConstantPad3d(_TorchPad):
    pairs = 3


class ZeroPad2d(_TorchPad):
    pairs = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_TorchPad):
    pairs, mode = 1, "reflect"

    def __init__(self, padding):
        super().__init__(padding)


class ReflectionPad2d(_TorchPad):
    pairs, mode = 2, "reflect"

    def __init__(self, padding):
        super().__init__(padding)
