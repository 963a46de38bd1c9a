"""Run an ONNX model on minitorch_dist: ``load(path_or_model, kernels=None)``.

The graph's initializers become trainable ``Parameter``\\s (floating point) or constant
Tensors (integer settings such as shapes and indices), and each node runs through a kernel:
a function ``kernel(inputs, attrs) -> output or tuple of outputs`` over Tensors. Kernels are
looked up by op type in the ``kernels`` mapping given (a front end such as the SINGA
facade's ``sonnx`` passes its own), then in :data:`CORE_KERNELS`. Because every kernel is
built from recorded operations, the loaded model trains like any other: ``fn.parameters()``
are its weights.

>>> import numpy as np
>>> from minitorch_dist.onnx import GraphBuilder, load
>>> g = GraphBuilder()
>>> x = g.input(np.zeros((1, 2), np.float32))
>>> y = g.node("Relu", [g.node("Add", [x, g.constant(np.array([1.0, -5.0], np.float32))])])
>>> g.output(y, (1, 2), np.float32)
>>> fn = load(g.build())
>>> fn(np.array([[1.0, 2.0]], np.float32))[0].asnumpy().tolist()
[[2.0, 0.0]]
"""
import numpy as np

from ..nn.parameter import Parameter
from ..tensor import Tensor
from .builder import _onnx
from .kernels import CORE_KERNELS

__all__ = ["OnnxFunction", "load", "attributes", "node_settings"]


def attributes(node):
    """A node's attributes as a dict of Python values (tensors as NumPy arrays)."""
    onnx = _onnx()
    out = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, onnx.TensorProto):
            value = onnx.numpy_helper.to_array(value)
        elif isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        out[attr.name] = value
    return out


def node_settings(node):
    """The node's attributes plus ``_outputs``, its number of outputs (ONNX's Split into
    equal parts takes the count from there)."""
    settings = attributes(node)
    settings["_outputs"] = len(node.output)
    return settings


class OnnxFunction:
    """A loaded ONNX graph: ``fn(*inputs)`` returns the list of outputs (Tensors)."""

    def __init__(self, model, kernels=None, device=None, make_tensor=None):
        self.model = model
        self.graph = model.graph
        self.kernels = dict(CORE_KERNELS)
        self.kernels.update(kernels or {})
        self.make_tensor = make_tensor or (lambda a: Tensor(a))
        self.input_names = [i.name for i in self.graph.input]
        self.weights = self._initializers()
        # an input that has an initializer of its name takes that value when not given
        self.required = [n for n in self.input_names if n not in self.weights]
        self.output_names = [o.name for o in self.graph.output]
        missing = sorted({n.op_type for n in self.graph.node} - set(self.kernels))
        if missing:
            raise NotImplementedError(f"minitorch_dist.onnx.load: no kernel for the ONNX "
                                      f"operator(s) {missing}")

    def _initializers(self):
        onnx = _onnx()
        weights = {}
        for init in self.graph.initializer:
            array = onnx.numpy_helper.to_array(init).copy()
            if array.dtype.kind == "f" and init.name not in self.input_names:
                weights[init.name] = Parameter(Tensor(array), name=init.name)
            else:
                weights[init.name] = self.make_tensor(array)
        return weights

    def parameters(self):
        """The trainable weights (floating-point initializers that are not inputs' default
        values), in graph order."""
        return [w for w in self.weights.values() if isinstance(w, Parameter)]

    def __call__(self, *inputs):
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        given = self.input_names[:len(inputs)]
        if len(inputs) > len(self.input_names) or any(n not in given for n in self.required):
            raise ValueError(f"minitorch_dist.onnx: the model takes the input(s) "
                             f"{self.input_names} ({self.required} required), got "
                             f"{len(inputs)}")
        values = dict(self.weights)
        for name, x in zip(self.input_names, inputs):
            values[name] = x if isinstance(x, Tensor) else self.make_tensor(np.asarray(x))
        for node in self.graph.node:
            args = [values[n] if n else None for n in node.input]
            result = self.kernels[node.op_type](args, node_settings(node))
            result = result if isinstance(result, (tuple, list)) else (result,)
            for name, value in zip(node.output, result):
                values[name] = value
        return [values[n] for n in self.output_names]


def load(path_or_model, kernels=None, device=None):
    """An :class:`OnnxFunction` for an ONNX file path, bytes, or a ``ModelProto``."""
    onnx = _onnx()
    if isinstance(path_or_model, (str, bytes)) and not isinstance(path_or_model, bytes):
        try:
            model = onnx.load(path_or_model)
        except FileNotFoundError:
            raise OSError(f"minitorch_dist.onnx.load: no ONNX file at {path_or_model!r}") \
                from None
    elif isinstance(path_or_model, bytes):
        model = onnx.load_from_string(path_or_model)
    elif isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    else:
        raise TypeError(f"minitorch_dist.onnx.load: expected a path, bytes or a ModelProto, "
                        f"got {type(path_or_model).__name__}")
    return OnnxFunction(model, kernels, device)
