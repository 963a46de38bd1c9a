"""ONNX export and import for minitorch_dist (needs the optional ``onnx`` package).

* :class:`GraphBuilder` builds a ``ModelProto`` node by node; front ends walk their own
  record of a computation and call it (the SINGA facade's ``sonnx.to_onnx`` does).
* :func:`load` turns an ONNX file or ``ModelProto`` into a callable whose kernels are
  compositions of recorded core operations, so a loaded model runs and trains on the core.
* :func:`export` writes ``fn(*example_inputs)`` to ONNX through a front end's graph
  walker (``walker(outputs, inputs, builder)``): the one given, else the one a front end
  registered with :func:`register_walker` (importing ``minitorch_dist.singa.sonnx``
  registers the SINGA facade's, which reads each result's ``creator``).

This package knows nothing of SINGA or MindSpore; both facades build on it.

>>> import numpy as np
>>> from minitorch_dist.onnx import GraphBuilder, load
>>> g = GraphBuilder()
>>> x = g.input(np.zeros((2,), np.float32))
>>> g.output(g.node("Neg", [x]), (2,), np.float32)
>>> load(g.build())(np.array([1.0, -2.0], np.float32))[0].asnumpy().tolist()
[-1.0, 2.0]
"""
from .builder import OPSET, GraphBuilder
from .kernels import CORE_KERNELS, register
from .runner import OnnxFunction, attributes, load

__all__ = ["GraphBuilder", "OPSET", "CORE_KERNELS", "register", "OnnxFunction", "attributes",
           "load", "export", "register_walker"]

_WALKERS = []


def register_walker(walker):
    """Make ``walker(outputs, inputs, builder)`` the default of :func:`export`."""
    if not callable(walker):
        raise TypeError(f"minitorch_dist.onnx.register_walker: expected a function, got "
                        f"{type(walker).__name__}")
    _WALKERS[:] = [walker]


def export(fn_or_cell, example_inputs, path=None, walker=None):
    """Run ``fn_or_cell(*example_inputs)`` and write the computation to ONNX.

    ``walker(outputs, inputs, builder)`` turns the recorded computation into builder calls
    and declares the outputs; by default the registered one (see :func:`register_walker`).
    Returns the ``ModelProto``; writes it to ``path`` when given.
    """
    if not callable(fn_or_cell):
        raise TypeError(f"minitorch_dist.onnx.export: expected a function or a Cell, got "
                        f"{type(fn_or_cell).__name__}")
    inputs = list(example_inputs)
    outputs = fn_or_cell(*inputs)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if walker is None:
        if not _WALKERS:
            raise RuntimeError("minitorch_dist.onnx.export: no graph walker; pass walker=... "
                               "or import minitorch_dist.singa.sonnx, which registers one")
        walker = _WALKERS[0]
    builder = GraphBuilder()
    walker(outputs, inputs, builder)
    model = builder.build()
    if path is not None:
        from .builder import _onnx
        _onnx().save(model, path)
    return model
