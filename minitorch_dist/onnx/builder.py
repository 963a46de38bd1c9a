"""Build an ONNX ``ModelProto`` node by node (the export side of ``minitorch_dist.onnx``).

A front end (the SINGA facade's ``sonnx.to_onnx``, or a future MindSpore ``ms.export``)
walks its own record of a computation and calls :class:`GraphBuilder`: ``input`` for
graph inputs, ``constant`` for weights and fixed tensors (ONNX initializers), ``node`` for
each operation, ``output`` for results; ``build()`` returns a checked model.

>>> import numpy as np
>>> from minitorch_dist.onnx import GraphBuilder
>>> g = GraphBuilder("demo")
>>> x = g.input(np.zeros((2, 3), np.float32))
>>> w = g.constant(np.ones((3, 4), np.float32))
>>> y = g.node("MatMul", [x, w])
>>> g.output(y, (2, 4), np.float32)
>>> [n.op_type for n in g.build().graph.node]
['MatMul']
"""
import itertools

import numpy as np

__all__ = ["GraphBuilder", "OPSET"]

OPSET = 13      # Slice/Squeeze/ReduceSum/Split take their settings as inputs from 13 on


def _onnx():
    try:
        import onnx
    except ImportError:      # an optional dependency: only export and import need it
        raise ImportError("minitorch_dist.onnx needs the 'onnx' package (pip install onnx)") \
            from None
    return onnx


class GraphBuilder:
    """Collects inputs, initializers and nodes; ``build()`` makes the ``ModelProto``."""

    def __init__(self, name="minitorch_dist", opset=OPSET):
        self.name, self.opset = name, opset
        self.inputs, self.outputs, self.initializers, self.nodes = [], [], [], []
        self._ids = itertools.count()

    def fresh(self, hint="t"):
        """A new unique value name."""
        return f"{hint}_{next(self._ids)}"

    def input(self, array, name=None):
        """A graph input shaped and typed like ``array``; returns its name."""
        onnx = _onnx()
        name = name or self.fresh("input")
        array = np.asarray(array)
        elem = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        self.inputs.append(onnx.helper.make_tensor_value_info(name, elem, array.shape))
        return name

    def constant(self, array, name=None):
        """An initializer holding ``array`` (a weight or a fixed tensor); returns its name."""
        onnx = _onnx()
        name = name or self.fresh("const")
        self.initializers.append(onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op_type, inputs, n_outputs=1, **attrs):
        """Add ``op_type`` over the named ``inputs`` ("" for an omitted optional one);
        returns the output name (or the list of names when ``n_outputs`` > 1)."""
        onnx = _onnx()
        outs = [self.fresh(op_type.lower()) for _ in range(n_outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), outs,
                                                name=self.fresh(op_type), **attrs))
        return outs[0] if n_outputs == 1 else outs

    def output(self, name, shape, dtype):
        """Declare the value ``name`` a graph output."""
        onnx = _onnx()
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.outputs.append(onnx.helper.make_tensor_value_info(name, elem, tuple(shape)))

    def build(self, check=True):
        """The ``ModelProto`` (checked by ``onnx.checker`` unless ``check=False``)."""
        onnx = _onnx()
        graph = onnx.helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                       self.initializers)
        model = onnx.helper.make_model(graph, producer_name="minitorch_dist",
                                       opset_imports=[onnx.helper.make_opsetid("", self.opset)])
        model.ir_version = min(model.ir_version, 8)
        if check:
            onnx.checker.check_model(model)
        return model
