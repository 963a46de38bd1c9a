"""SINGA's ``layer.Layer``: the base class, registration rules and argument checks.

A SINGA layer is a minitorch_dist ``Cell`` that creates its parameters at its first call
(``initialize``), follows SINGA's attribute rules (plain attributes may come before
``super().__init__()``; layers in lists are registered with ``register_layers``; layers a
closure attribute holds are registered under ``<attribute>.<variable>``) and reports its
parameters and states by SINGA's dotted names. The concrete layers are in ``layer.py`` and
``layer_more.py``; user code imports them all from ``minitorch_dist.singa.layer``.

>>> from minitorch_dist.singa import layer
>>> class Pair(layer.Layer):
...     def __init__(self):
...         self.width = 2                  # before super().__init__(), as SINGA allows
...         super().__init__()
...         self.parts = [layer.Linear(self.width), layer.Linear(1)]
...         self.register_layers(*self.parts)
...     def forward(self, x):
...         return self.parts[1](self.parts[0](x))
>>> sorted(Pair()._cells)
['Linear_0', 'Linear_1']
"""
import numpy as np

from ..nn.cell import Cell
from ..tensor import Tensor as CoreTensor
from . import tensor as _tensor
from .results import Recompute, as_result

__all__ = ["Layer"]

_PAD_MODES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


class Layer(Cell):
    """SINGA's ``layer.Layer``: subclasses define ``forward`` and may define
    ``initialize(*inputs)``, which runs once, just before the first ``forward``, to create
    the parameters from the inputs' shapes.

    A facade tensor made with ``stores_grad=True`` and set as an attribute (a custom layer's
    ``self.W = tensor.Tensor(shape, x.device, stores_grad=True)``) becomes a parameter.
    """

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_initialized", False)
        object.__setattr__(self, "_buffers", {})

    def __setattr__(self, name, value):
        if "_params" not in self.__dict__:
            # SINGA allows plain attributes before super().__init__() (ResNet sets
            # self.inplanes first); layers and tensors need the registries
            if isinstance(value, (Cell, CoreTensor)):
                raise AttributeError(f"layer.Layer: {type(self).__name__}.__init__ must call "
                                     f"super().__init__() before setting the {type(value).__name__} "
                                     f"attribute {name!r}")
            object.__setattr__(self, name, value)
            return
        if isinstance(value, _tensor.Tensor) and value.stores_grad:
            value = _tensor.Parameter.from_tensor(value)
        super().__setattr__(name, value)
        held = _layers_in_closure(value)
        if held:                        # layers already in this tree keep their names
            mine = {id(c) for _, c in self.cells_and_names()}
            held = [(k, v) for k, v in held if id(v) not in mine]
        if held:                        # SINGA finds these on the tape; register them too
            holder = _Held()
            for key, layer in held:
                Cell.__setattr__(holder, key, layer)
            self._cells[name] = holder

    def register_layers(self, *args):
        """Register layers kept in a list or a dict (SINGA's ``register_layers``): given an
        ``OrderedDict`` name -> layer, under those names; given layers, as
        ``<ClassName>_<index>`` (e.g. ``Bottleneck_3``). Their parameters then appear in
        ``get_params``/``get_states`` and are trained."""
        if len(args) == 1 and isinstance(args[0], dict):
            items = list(args[0].items())
        else:
            items = [(f"{type(v).__name__}_{i}", v) for i, v in enumerate(args)]
        for key, value in items:
            if not isinstance(value, Layer):
                raise TypeError(f"layer.Layer.register_layers: expected layers, got "
                                f"{type(value).__name__} for {key!r}")
            for holder in self._cells.values():     # a registered name beats a closure's
                if isinstance(holder, _Held):
                    for k, v in list(holder._cells.items()):
                        if v is value:
                            del holder._cells[k]
            setattr(self, key, value)

    def register_buffer(self, name, value):
        """Keep the non-trainable tensor ``value`` (e.g. BatchNorm's running mean) as state
        ``name``: part of ``get_states``/``set_states`` and of ``save_states``."""
        object.__setattr__(self, name, value)
        self._buffers[name] = value

    def initialize(self, *inputs):
        """Create the parameters from the first inputs (nothing to do by default)."""

    def forward(self, *inputs):
        raise NotImplementedError(f"layer.Layer: {type(self).__name__} must define "
                                  "forward(self, x)")

    def construct(self, *inputs, **kwargs):
        if not self._initialized:
            self.initialize(*inputs)
            object.__setattr__(self, "_initialized", True)
        return _with_creator(self, self.forward(*inputs, **kwargs), inputs, kwargs)

    # ---- parameters by SINGA name ------------------------------------------------------
    def _named_parameters(self):
        """(dotted name relative to this layer, Parameter), without renaming anything."""
        seen = set()
        for path, cell in self.cells_and_names():
            for attr, param in cell._params.items():
                if id(param) not in seen:
                    seen.add(id(param))
                    yield (f"{path}.{attr}" if path else attr), param

    def get_params(self):
        """``{name: parameter}`` of the layers created so far (empty before the first call),
        e.g. ``conv1.W``; the values are the live parameters."""
        return dict(self._named_parameters())

    def set_params(self, parameters):
        """Copy values (Tensors or NumPy arrays) into the parameters with the same names."""
        _copy_in(self, parameters, "set_params")

    def _named_buffers(self):
        for path, cell in self.cells_and_names():
            for attr, buf in getattr(cell, "_buffers", {}).items():
                yield (f"{path}.{attr}" if path else attr), buf

    def get_states(self):
        """The parameters plus the buffers (BatchNorm's running statistics)."""
        states = self.get_params()
        states.update(self._named_buffers())
        return states

    def set_states(self, states):
        """Copy values into the parameters and buffers with the same names."""
        _copy_in(self, states, "set_states", self.get_states())


def _with_creator(layer, out, inputs, kwargs):
    """Give a layer's result SINGA's ``creator``: its ``backward(dy)`` returns the inputs'
    gradients, then those of the layer's own parameters (Conv2d: dx, dW, db). It runs the
    forward again, so a BatchNorm2d's running statistics move once more."""
    if not isinstance(out, CoreTensor) or any(out is x for x in inputs):
        return out
    own = list(layer._params.values())
    if own or getattr(out, "creator", None) is None:
        creator = Recompute(layer.forward, inputs, kwargs, extra=own)
        creator.out_ids = [id(out)]
        as_result(out, creator, inputs)
    return out


class _Held(Cell):
    """Holds the layers a closure attribute uses (ResNet's ``downsample``), so their
    parameters are registered under ``<attribute>.<variable>``."""

    def construct(self, *inputs):
        raise TypeError("layer: a closure's layers are called through the closure")


def _layers_in_closure(value):
    """``(variable name, layer)`` for the layers a function attribute closes over."""
    closure = getattr(value, "__closure__", None)
    code = getattr(value, "__code__", None)
    if not closure or code is None or isinstance(value, Cell):
        return []
    found = []
    for var, cell in zip(code.co_freevars, closure):
        try:
            content = cell.cell_contents
        except ValueError:          # not yet bound
            continue
        if isinstance(content, Layer):
            found.append((var, content))
    return found


def _copy_in(layer, values, call, mine=None):
    owner = f"{type(layer).__name__}.{call}"
    if not hasattr(values, "items"):
        raise TypeError(f"{owner}: expected a dict name -> Tensor or array, got "
                        f"{type(values).__name__}")
    mine = layer.get_params() if mine is None else mine
    unknown = sorted(set(values) - set(mine))
    if unknown:
        raise KeyError(f"{owner}: no parameter named {unknown}; this model has {sorted(mine)} "
                       "(layers get their parameters at their first call: compile first)")
    missing = sorted(set(mine) - set(values))
    if missing:
        raise KeyError(f"{owner}: no value given for {missing}")
    for name, param in mine.items():
        value = values[name]
        array = value.asnumpy() if isinstance(value, CoreTensor) else np.asarray(value)
        if array.shape != param.shape:
            raise ValueError(f"{owner}: {name!r} has shape {param.shape}, the value has shape "
                             f"{array.shape}")
        param.set_data(array.astype(param.dtype, copy=False))


# ---- argument checks ------------------------------------------------------------------
def _positive_int(value, call, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{call}: {name} must be a positive int, got {value!r}")
    return int(value)


def _pair(value, call, name, minimum=1):
    """An int or a pair of ints (each >= minimum) as a 2-tuple."""
    pair = (value, value) if isinstance(value, (int, np.integer)) else value
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= minimum
            for v in pair):
        raise ValueError(f"{call}: {name} must be an int or a pair of ints >= {minimum}, "
                         f"got {value!r}")
    return int(pair[0]), int(pair[1])


def _pad_mode(value, call):
    mode = value.upper() if isinstance(value, str) else value
    if mode not in _PAD_MODES:
        raise ValueError(f"{call}: pad_mode must be one of {list(_PAD_MODES)}, got {value!r}")
    return mode


def _same_lower(size, kernel, stride, dilation=1):
    """SAME_LOWER pads (before, after): output ceil(size/stride), the odd pixel in front."""
    out = -(-size // stride)
    total = max((out - 1) * stride + dilation * (kernel - 1) + 1 - size, 0)
    return total - total // 2, total // 2


def _check_input(x, call, ndim):
    if not isinstance(x, CoreTensor):
        raise TypeError(f"{call}: expected a Tensor input, got {type(x).__name__}")
    if x.ndim != ndim:
        layout = "(N, C, H, W)" if ndim == 4 else "(N, features)"
        raise ValueError(f"{call}: expected a {ndim}-D input {layout}, got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{call}: expected a floating-point input, got {x.dtype}")


def _gaussian_parameter(shape, std, like):
    """A parameter of ``shape`` ~ N(0, std²) (the framework's seeded stream), on ``like``'s
    device with its dtype."""
    from .. import random as _random
    values = _random.rng().normal(0.0, std, shape).astype(like.dtype)
    return _tensor.Parameter.create(values, like.device)


def _zero_parameter(shape, like):
    return _tensor.Parameter.create(np.zeros(shape, like.dtype), like.device)
