"""SINGA's ``layer`` module: Cells whose parameters are created at the first call.

A SINGA layer learns its input size from the first input it sees: ``layer.Linear(500)``
makes its ``(in, 500)`` weight when the first batch arrives (``Model.compile`` sends one).
Here every layer is a minitorch_dist ``Cell`` built from the core's primitives, so layers
nest, show up in ``trainable_params()`` and in ``ms.placement_report()``; only the
``initialize``-on-first-call step and SINGA's argument conventions are added.

Parameters follow SINGA: names ``W`` and ``b`` (paths like ``conv1.W`` in a model), the
``Linear`` weight is ``(in, out)`` (``y = x @ W + b``), Gaussian initialisation with
``std = sqrt(2 / (fan_in + fan_out))`` from the framework's seeded stream, zero biases, and
parameters created on the device of the input.

>>> import numpy as np
>>> from minitorch_dist.singa import layer, tensor
>>> fc = layer.Linear(4)
>>> fc.get_params()
{}
>>> y = fc(tensor.from_numpy(np.ones((2, 3), np.float32)))
>>> y.shape, {name: p.shape for name, p in fc.get_params().items()}
((2, 4), {'W': (3, 4), 'b': (4,)})
"""
from . import autograd as _autograd
from .layer_base import Layer
from .layer_basic import *  # noqa: F401,F403 - Conv2d, Linear, pooling, ReLU, ...
from .layer_basic import __all__ as _BASIC
from .layer_more import *  # noqa: F401,F403 - the rest of SINGA's layers
from .layer_more import __all__ as _MORE
from .layer_rnn import *  # noqa: F401,F403 - RNN, LSTM, Embedding
from .layer_rnn import __all__ as _RNN
from .unsupported import module_getattr

__all__ = ["Layer"] + list(_BASIC) + list(_MORE) + list(_RNN)

_UNSUPPORTED = {name: "build it from the supported layers or minitorch_dist.nn" for name in (
    "MaxPool1d", "AvgPool1d", "Gather")}
_UNSUPPORTED["CudnnRNN"] = "cuDNN's fused RNN needs CUDA and cuDNN; use layer.RNN or layer.LSTM"
__getattr__ = module_getattr("layer", _UNSUPPORTED, __all__)

for _name in _autograd.LAYER_ALIASES:      # SINGA 3.0's autograd.Conv2d, autograd.Linear, ...
    setattr(_autograd, _name, globals()[_name])
