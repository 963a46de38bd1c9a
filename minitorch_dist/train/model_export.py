"""``ms.export`` and ``ms.load``: saving a network as a graph file for inference.

* ``file_format="ONNX"`` writes the network traced on the example inputs
  (``train/onnx_graph.py``) through the core ONNX package (``minitorch_dist.onnx``);
  ``ms.load`` reads it back into a callable graph for ``nn.GraphCell``.
* ``file_format="MINDIR"`` (and Ascend's ``"AIR"``) is refused: MindSpore's MindIR is its own
  protobuf, which this framework does not write, and a file of another format under that
  name would mislead. Use ``file_format="ONNX"`` for a graph, or ``ms.save_checkpoint`` for
  the weights.

Nothing is written when export fails.
"""
import importlib
import os

from ..nn.cell import Cell

__all__ = ["export", "load", "onnx_backend"]

_FORMATS = ("ONNX", "MINDIR", "AIR")


def onnx_backend():
    """The core ONNX package (``minitorch_dist.onnx``), or None while it does not exist."""
    try:
        return importlib.import_module("minitorch_dist.onnx")
    except ImportError:
        return None


def _refuse_format(file_format):
    raise ValueError(f"export: file_format={file_format!r} is not written here: MindSpore's "
                     "MindIR/AIR are its own protobuf formats, which this framework does not "
                     "produce. Use file_format='ONNX' for a graph, or ms.save_checkpoint(net, "
                     "'net.ckpt') for the weights")


def export(net, *inputs, file_name, file_format="MINDIR", **kwargs):
    """Export ``net`` traced on ``inputs`` to ``file_name`` (see the module docstring)."""
    if not isinstance(net, Cell) and not callable(net):
        raise TypeError(f"export: net must be a Cell, got {type(net).__name__}")
    if not isinstance(file_name, str) or not file_name:
        raise TypeError(f"export: file_name must be a non-empty str, got {file_name!r}")
    if not isinstance(file_format, str) or file_format.upper() not in _FORMATS:
        raise ValueError(f"export: file_format must be one of {list(_FORMATS)}, got {file_format!r}")
    if file_format.upper() != "ONNX":
        _refuse_format(file_format)
    backend = onnx_backend()
    if backend is None:
        raise NotImplementedError("export: file_format='ONNX' needs the core ONNX package "
                                  "(minitorch_dist.onnx and the onnx wheel)")
    unknown = sorted(set(kwargs) - {"input_names", "output_names"})
    if unknown:
        raise TypeError(f"export: unexpected keyword argument(s) {unknown}")
    from .onnx_graph import write_graph
    # opset 15: BatchNormalization's inference form is explicit (training_mode=0) from 14 on
    builder = backend.GraphBuilder(name=type(net).__name__, opset=15)
    write_graph(net, inputs, builder)
    model = builder.build()          # checked by onnx.checker before anything is written
    path = file_name if file_name.lower().endswith(".onnx") else file_name + ".onnx"
    from ..onnx.builder import _onnx
    _onnx().save(model, path)
    return path


def load(file_name, **kwargs):
    """Load what ``export`` wrote, for ``nn.GraphCell``."""
    if not isinstance(file_name, str):
        raise TypeError(f"load: file_name must be a str, got {type(file_name).__name__}")
    if file_name.lower().endswith((".mindir", ".air")):
        raise ValueError(f"load: {file_name!r} is a MindSpore MindIR/AIR file, which this "
                         "framework does not read; export to ONNX (file_format='ONNX') and "
                         "load the .onnx file")
    if not os.path.exists(file_name):
        raise OSError(f"load: no such file {file_name!r}")
    backend = onnx_backend()
    if backend is None:
        raise NotImplementedError("load: reading ONNX needs the core ONNX package "
                                  "(minitorch_dist.onnx and the onnx wheel)")
    if kwargs:
        raise TypeError(f"load: unexpected keyword argument(s) {sorted(kwargs)} (MindIR options)")
    from .onnx_graph import facade_kernels
    return backend.load(file_name, kernels=facade_kernels())
