"""SINGA's ``sonnx``: ONNX export (``to_onnx``) and backend (``prepare``), on
:mod:`minitorch_dist.onnx`.

* ``to_onnx(inputs, outputs)`` walks each output's ``creator`` back to ``inputs`` and
  returns a checked ``ModelProto``; parameters become initializers.
* ``prepare(model, device=None)`` returns a ``SingaRep`` whose ``run(inputs,
  last_layers=None)`` executes the graph with the facade's autograd operators, so the
  outputs have creators and ``autograd.backward`` trains the loaded weights.
  ``last_layers=-k`` stops ``k`` nodes before the end and returns that node's outputs.
* ``SONNXModel(onnx_model)`` is the same as a ``model.Model`` to subclass.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, sonnx, tensor
>>> x = tensor.from_numpy(np.array([[-1.0, 2.0]], np.float32))
>>> model = sonnx.to_onnx([x], [autograd.relu(x)])
>>> tensor.to_numpy(sonnx.prepare(model).run([x])[0]).tolist()
[[0.0, 2.0]]
"""
import re

import numpy as np

from ..onnx import GraphBuilder, OnnxFunction, register_walker
from ..onnx.runner import node_settings
from . import tensor
from .model import Model
from .sonnx_export import walk
from .sonnx_kernels import KERNELS, make_tensor as _make_tensor

__all__ = ["to_onnx", "prepare", "SingaRep", "SingaBackend", "get_onnx_model", "SONNXModel",
           "save", "load"]


def to_onnx(inputs, y, model_name="sonnx"):
    """The ONNX model of the computation from ``inputs`` to ``y`` (lists of Tensors)."""
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    outputs = list(y) if isinstance(y, (list, tuple)) else [y]
    builder = GraphBuilder(model_name)
    walk(outputs, inputs, builder)
    return builder.build()


get_onnx_model = to_onnx
register_walker(walk)       # minitorch_dist.onnx.export(fn, inputs, path) uses it


class SingaRep:
    """A prepared ONNX model: ``run(inputs, last_layers=None)`` returns the outputs."""

    def __init__(self, model, device=None):
        self.fn = OnnxFunction(model, KERNELS, device, make_tensor=_make_tensor)
        self.device = device
        self.is_graph = False
        self.layers = [(node, KERNELS[node.op_type]) for node in model.graph.node]

    @property
    def params(self):
        """The trainable weights by initializer name."""
        return {p.name: p for p in self.fn.parameters()}

    def run(self, x, last_layers=None, **kwargs):
        """Run on the input Tensors ``x`` (a list)."""
        if kwargs:
            raise TypeError(f"SingaRep.run: unexpected arguments {sorted(kwargs)}")
        x = [t if hasattr(t, "asnumpy") else _make_tensor(t) for t in x]
        if last_layers is None:
            return self.fn(*x)
        nodes = list(self.fn.graph.node)
        keep = nodes[:last_layers] if last_layers < 0 else nodes[:last_layers + 1]
        if not keep:
            raise ValueError(f"SingaRep.run: last_layers={last_layers} leaves no node to run")
        values = dict(self.fn.weights)
        for name, t in zip(self.fn.input_names, x):
            values[name] = t
        for node in keep:
            result = KERNELS[node.op_type]([values[n] if n else None for n in node.input],
                                           node_settings(node))
            result = result if isinstance(result, (tuple, list)) else (result,)
            values.update(zip(node.output, result))
        return [values[n] for n in keep[-1].output]


def _backend_base():
    try:
        from onnx.backend.base import Backend
    except ImportError:      # onnx is optional: without it the class still has prepare
        return object
    return Backend


class _ArrayRep:
    """ONNX's backend API returns arrays typed as the graph declares its outputs."""

    def __init__(self, rep, model):
        from ..onnx.builder import _onnx
        helper = _onnx().helper
        self.rep = rep
        for value in list(model.graph.input) + list(model.graph.output):
            kind = value.type.WhichOneof("value")
            if kind not in ("tensor_type", None):
                raise NotImplementedError(f"sonnx: {value.name!r} is an ONNX {kind}; SINGA's "
                                          f"backend runs graphs of tensors only")
        self.dtypes = [helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
                       for o in model.graph.output]

    def run(self, inputs, **kwargs):
        outs = self.rep.run(list(inputs), **kwargs)
        return [np.asarray(tensor.to_numpy(o)).astype(d) for o, d in zip(outs, self.dtypes)]


class SingaBackend(_backend_base()):
    """SINGA's backend class (an ``onnx.backend.base.Backend``):
    ``SingaBackend.prepare(model, device)`` and ``run_model``. ``_rename_operators``
    lists the ONNX operators it runs (SINGA's table of the same name; its test suite
    selects ONNX's node tests from it)."""

    _rename_operators = {op: op for op in KERNELS}

    @classmethod
    def prepare(cls, model, device=None, **kwargs):
        rep = prepare(model, None if device in ("CPU", None) else device, **kwargs)
        return _ArrayRep(rep, model)

    @classmethod
    def run_model(cls, model, inputs, device=None, **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device):
        return device == "CPU"


def prepare(model, device=None, init_inputs=None, **kwargs):
    """A :class:`SingaRep` for ``model`` (a ``ModelProto``, or a path to an ONNX file).
    ``init_inputs`` (arrays or Tensors), as in SINGA, runs the model once on them, so a
    model that cannot run fails here."""
    if kwargs:
        raise TypeError(f"sonnx.prepare: unexpected arguments {sorted(kwargs)}")
    if isinstance(model, str):
        from ..onnx.builder import _onnx
        model = _onnx().load(model)
    rep = SingaRep(model, device)
    if init_inputs is not None:
        items = init_inputs if isinstance(init_inputs, (list, tuple)) else [init_inputs]
        rep.run([x if hasattr(x, "asnumpy") else _make_tensor(x) for x in items])
    return rep


def save(model, path):
    """``onnx.save`` (SINGA re-exports it as ``sonnx.save``)."""
    from ..onnx.builder import _onnx
    _onnx().save(model, path)


def load(path):
    """``onnx.load`` (SINGA re-exports it as ``sonnx.load``)."""
    from ..onnx.builder import _onnx
    return _onnx().load(path)



class SONNXModel(Model):
    """SINGA's ``sonnx.SONNXModel(onnx_model)``: an ONNX model as a ``model.Model``.
    Subclass it to run, fine-tune (the initializers are its parameters, so
    ``set_optimizer``/``compile`` bind them) or cut it: ``forward(*x, last_layers=None)``
    returns the list of outputs (of the node ``last_layers`` from the end when given)."""

    def __init__(self, onnx_model):
        super().__init__()
        rep = prepare(onnx_model)
        object.__setattr__(self, "sg_ir", rep)
        for index, param in enumerate(rep.fn.parameters()):
            setattr(self, f"onnx_{index}_{re.sub(r'[^0-9A-Za-z_]', '_', param.name)}", param)

    def forward(self, *x, last_layers=None, aux_output=()):
        if aux_output:
            raise ValueError("SONNXModel.forward: aux_output is not supported; use "
                             "last_layers=-k to take an inner node's outputs")
        return self.sg_ir.run(list(x), last_layers=last_layers)
