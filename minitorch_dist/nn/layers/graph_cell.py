"""``nn.GraphCell(graph)``: a graph loaded by ``ms.load`` run as a Cell (inference only).

The graph is whatever the ONNX package's ``load`` returns: an object that is called with
the inputs (NumPy arrays or Tensors) and returns the outputs.
"""
from ...tensor import Tensor
from ..cell import Cell

__all__ = ["GraphCell"]


class GraphCell(Cell):
    """Run a loaded graph: ``GraphCell(ms.load("net.onnx"))(x)``."""

    def __init__(self, graph, params_init=None, obf_random_seed=None):
        super().__init__()
        if graph is None or not callable(graph):
            raise TypeError("GraphCell: graph must be what ms.load returned (a callable graph), "
                            f"got {type(graph).__name__}")
        if params_init is not None or obf_random_seed is not None:
            raise ValueError("GraphCell: params_init and obf_random_seed are not supported here "
                             "(they apply to MindIR graphs)")
        object.__setattr__(self, "graph", graph)

    def construct(self, *inputs):
        out = self.graph(*[x.asnumpy() if isinstance(x, Tensor) else x for x in inputs])
        if isinstance(out, (tuple, list)):
            out = [o if isinstance(o, Tensor) else Tensor(o) for o in out]
            return out[0] if len(out) == 1 else tuple(out)
        return out if isinstance(out, Tensor) else Tensor(out)
