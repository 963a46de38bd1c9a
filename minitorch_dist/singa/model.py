"""SINGA's ``model.Model``: a layer with ``train_one_batch``, ``compile`` and train/eval modes.

Calling a model runs the user's ``train_one_batch(*args)`` in training mode and
``forward(*args)`` in evaluation mode (under ``no_grad``), as in SINGA.
``compile(inputs, is_train=True, use_graph=False, sequential=False)`` runs ``forward`` once
on the placeholder inputs, only to create the layers' parameters from their shapes, and
then attaches the optimizer given to ``set_optimizer`` to those parameters (for a
``DistOpt`` that is the collective step that checks the replicas and copies rank 0's
values to every rank). Execution is always eager: ``use_graph`` and ``sequential`` are
recorded (graph mode with a one-time warning saying so) and change nothing, except that
per-call arguments such as ``dist_option`` are honoured on every call (SINGA's graph mode
freezes them at the first call).

>>> import numpy as np
>>> from minitorch_dist.singa import layer, model, opt, tensor
>>> class MLP(model.Model):
...     def __init__(self):
...         super().__init__()
...         self.fc = layer.Linear(2)
...         self.loss_fn = layer.SoftMaxCrossEntropy()
...     def forward(self, x):
...         return self.fc(x)
...     def train_one_batch(self, x, y):
...         out = self.forward(x)
...         loss = self.loss_fn(out, y)
...         self.optimizer(loss)
...         return out, loss
>>> net = MLP()
>>> net.set_optimizer(opt.SGD(lr=0.1))
>>> tx = tensor.Tensor((4, 3))
>>> ty = tensor.Tensor((4,), dtype=tensor.int32)
>>> net.compile([tx], is_train=True, use_graph=False, sequential=False)
>>> sorted(net.get_params())
['fc.W', 'fc.b']
>>> tx.copy_from_numpy(np.ones((4, 3), np.float32))
>>> ty.copy_from_numpy(np.array([0, 1, 0, 1], np.int32))
>>> out, loss = net(tx, ty)
>>> out.shape, loss.shape
((4, 2), (1,))
>>> net.eval()
>>> net(tx).shape
(4, 2)
"""
import io
import json
import os
import zipfile

import numpy as np

from ..autograd import no_grad
from ..nn.cell import Cell
from ..tensor import Tensor as CoreTensor
from . import flags
from . import tape as _tape
from . import tensor as _tensor
from .layer_base import Layer, _Held
from .device import note_eager_graph
from .unsupported import module_getattr

__all__ = ["Model"]

_STATES_FILE = "tensor_dict.npz"
_ATTR_FILE = "states_attr.json"


class Model(Layer):
    """SINGA's ``model.Model``; subclass it and define ``forward`` and ``train_one_batch``.

    ``set_optimizer(opt)`` (or assigning ``self.optimizer``, as SINGA's example models do)
    attaches an ``opt.SGD`` or ``opt.DistOpt`` to this model's parameters.
    """

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "graph_mode", True)
        object.__setattr__(self, "sequential", False)
        object.__setattr__(self, "_optimizer", None)
        object.__setattr__(self, "_compiled", False)

    # ---- optimizer --------------------------------------------------------------------
    @property
    def optimizer(self):
        """The optimizer ``train_one_batch`` uses (``set_optimizer``)."""
        if self._optimizer is None:
            raise AttributeError(f"model.Model: {type(self).__name__} has no optimizer; call "
                                 "model.set_optimizer(sgd) before training (train_one_batch "
                                 "uses self.optimizer)")
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer):
        """The optimizer ``train_one_batch`` uses (``set_optimizer``)."""
        if not hasattr(optimizer, "_attach"):
            raise TypeError(f"model.Model.set_optimizer: expected an optimizer from "
                            f"minitorch_dist.singa.opt (opt.SGD or opt.DistOpt), got "
                            f"{type(optimizer).__name__}")
        object.__setattr__(self, "_optimizer", optimizer)
        optimizer._attach(self)
        if self._compiled:       # parameters exist already: bind now (a collective for DistOpt)
            optimizer._bind_to(self)

    def set_optimizer(self, optimizer):
        """Use ``optimizer`` in ``train_one_batch`` (as ``self.optimizer``)."""
        self.optimizer = optimizer

    # ---- compiling and modes ----------------------------------------------------------
    def compile(self, inputs, is_train=True, use_graph=False, sequential=False):
        """Create every layer's parameters from placeholder ``inputs`` (a list of Tensors),
        then set the mode (``train()`` or ``eval()``) and record the graph flags."""
        if not isinstance(inputs, (list, tuple)) or not inputs or not all(
                isinstance(t, CoreTensor) for t in inputs):
            got = type(inputs).__name__ if not isinstance(inputs, (list, tuple)) else \
                [type(t).__name__ for t in inputs]
            raise TypeError(f"model.Model.compile(inputs): expected a non-empty list of Tensors "
                            f"(e.g. [tx]), got {got}")
        # SINGA buffers this forward and discards it, so no state changes: batch norm runs
        # in evaluation mode here. Gradients stay enabled: the tape shows which trainable
        # tensors the model really uses (a layer held in a list or a closure included).
        was_training = flags.training()
        flags.set_training(False)
        try:
            outputs = self.forward(*inputs)
        finally:
            flags.set_training(was_training)
        self._adopt_tape_parameters(outputs)
        object.__setattr__(self, "_initialized", True)
        object.__setattr__(self, "_compiled", True)
        self.train(bool(is_train))
        self._record_graph(use_graph, sequential, "Model.compile(use_graph=True)", stacklevel=4)
        if self._optimizer is not None:
            self._optimizer._bind_to(self)

    def _adopt_tape_parameters(self, outputs):
        """Register the trainable tensors the forward used but no attribute, list
        registration or closure names, as ``_unregistered.p<i>`` (SINGA trains them because
        it reads the tape; here they also get saved with the model's states)."""
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        known = {id(p) for p in self.trainable_params()}
        holder = self._cells.get("_unregistered")
        for out in outputs:
            if not isinstance(out, CoreTensor) or out.grad_fn is None:
                continue
            for leaf in _tape.parameters_in_order(out):
                param = _tape.as_parameter(leaf)
                if id(param) in known:
                    continue
                if holder is None:
                    holder = _Held()
                    self._cells["_unregistered"] = holder
                known.add(id(param))
                Cell.__setattr__(holder, f"p{len(holder._params)}", param)

    def graph(self, mode=True, sequential=False):
        """Record SINGA's graph switches (execution stays eager: ``note_eager_graph``)."""
        self._record_graph(mode, sequential, "Model.graph(True)", stacklevel=4)

    def _record_graph(self, mode, sequential, call, stacklevel):
        object.__setattr__(self, "graph_mode", bool(mode))
        object.__setattr__(self, "sequential", bool(sequential))
        if self.graph_mode:
            note_eager_graph(call, stacklevel)      # pointing at the user's call

    def train(self, mode=True):
        """Training mode: calls run ``train_one_batch``; sets ``autograd.training`` (dropout
        active, batch norm on batch statistics), as SINGA does."""
        self.set_train(bool(mode))
        flags.set_training(bool(mode))

    def eval(self):
        """Evaluation mode: calls run ``forward`` without recording gradients; clears
        ``autograd.training``."""
        self.set_train(False)
        flags.set_training(False)

    def __call__(self, *args, **kwargs):
        if self.training:
            return self.train_one_batch(*args, **kwargs)
        with no_grad():
            return self.forward(*args, **kwargs)

    def forward(self, *inputs):
        raise NotImplementedError(f"model.Model: {type(self).__name__} must define "
                                  "forward(self, x)")

    def train_one_batch(self, *args, **kwargs):
        """One training step; subclasses define it (SINGA calls it in training mode)."""
        raise NotImplementedError(f"model.Model: {type(self).__name__} must define "
                                  "train_one_batch(self, x, y, ...) to be called in training "
                                  "mode (or call model.eval() to run forward)")

    # ---- checkpoints ------------------------------------------------------------------
    def save_states(self, fpath, aux_states=None):
        """Write every state and the ``aux_states`` dict (name -> Tensor) to a new zip file
        ``fpath`` (an ``.npz`` of the arrays plus a JSON of their shapes and kinds)."""
        call = "model.Model.save_states"
        if os.path.exists(fpath):
            raise FileExistsError(f"{call}: {fpath} exists; choose a new path")
        aux_states = aux_states or {}
        arrays, attrs = {}, {}
        for kind, states in (("state", self.get_states()), ("aux", aux_states)):
            for name, value in states.items():
                if not isinstance(value, CoreTensor):
                    raise TypeError(f"{call}: {kind} {name!r} must be a Tensor, got "
                                    f"{type(value).__name__}")
                if name in arrays:
                    raise ValueError(f"{call}: {name!r} is both a state and an aux state")
                arrays[name] = value.asnumpy()
                attrs[name] = {"shape": list(arrays[name].shape),
                               "dtype": str(arrays[name].dtype), "kind": kind}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        with zipfile.ZipFile(fpath, "w") as archive:
            archive.writestr(_STATES_FILE, buffer.getvalue())
            archive.writestr(_ATTR_FILE, json.dumps(attrs))

    def load_states(self, fpath):
        """Restore what ``save_states`` wrote (compile first, so the layers exist); returns
        the aux states as host Tensors."""
        with zipfile.ZipFile(fpath) as archive:
            attrs = json.loads(archive.read(_ATTR_FILE))
            data = np.load(io.BytesIO(archive.read(_STATES_FILE)))
            arrays = {name: data[name] for name in data.files}
        states = {n: arrays[n] for n, a in attrs.items() if a["kind"] == "state"}
        self.set_states(states)
        return {n: _tensor.Tensor(data=arrays[n], dtype=arrays[n].dtype)
                for n, a in attrs.items() if a["kind"] == "aux"}


__getattr__ = module_getattr("model", {}, __all__)
