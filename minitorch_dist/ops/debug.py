"""Debug operators: ``ops.Print`` and ``ops.TensorDump``.

They act on the rank that runs them: in a pipelined network only the stage holding the
cell runs its ``construct``, so it alone prints or writes (another stage skips the cell).

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> _ = ops.Print()("out is:", ms.Tensor([[1.0, 2.0]]))
out is:
Tensor(shape=[1, 2], dtype=Float32, value=
[[1. 2.]])
"""
import os

import numpy as np

from ..tensor import Tensor

__all__ = ["Print", "TensorDump"]


def _describe(value):
    if isinstance(value, Tensor):
        name = str(value.dtype).capitalize().replace("Bool", "Bool")
        shape = list(value.shape)
        return f"Tensor(shape={shape}, dtype={name}, value=\n{value.asnumpy()})"
    return str(value)


class Print:
    """``Print()(*values)``: strings and tensors to standard output, one per line (as
    MindSpore prints them); returns a scalar int32 tensor."""

    def __call__(self, *values):
        print("\n".join(_describe(v) for v in values), flush=True)
        return Tensor(np.zeros((), np.int32))


class TensorDump:
    """``TensorDump()(file, tensor)``: writes ``tensor`` to ``file`` (``.npy`` appended),
    numbered per call (``file_0.npy``, ``file_1.npy``, ...) so that steps do not overwrite
    one another."""

    def __init__(self, input_output="out"):
        self.input_output = input_output
        self.count = 0

    def __call__(self, file, tensor):
        if not isinstance(file, str) or not file:
            raise ValueError(f"TensorDump: file must be a non-empty str, got {file!r}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"TensorDump: expected a Tensor, got {type(tensor).__name__}")
        base = file[:-4] if file.endswith(".npy") else file
        directory = os.path.dirname(base)
        if directory:
            os.makedirs(directory, exist_ok=True)
        np.save(f"{base}_{self.count}.npy", tensor.asnumpy())
        self.count += 1
        return Tensor(np.zeros((), np.int32))
