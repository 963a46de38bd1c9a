"""SINGA's ``singa.autograd``: the training flag, ``backward`` and the operators.

A thin mapping onto minitorch_dist's tape, as the rest of the facade is:

* ``autograd.training`` is SINGA's global switch (False at import, as in SINGA). Dropout
  and batch normalisation follow it; ``Model.train()``/``eval()``/``compile`` set it.
* ``autograd.backward(loss, dy=None)`` yields ``(parameter, gradient)`` pairs in SINGA's
  order (a parameter comes out once its last consumer has been back-propagated) for every
  trainable leaf the loss depends on, found on the tape: layers held in lists or closures
  included. The gradients are computed by the core engine, once. ``gradients(loss)`` is
  the dict ``id(param) -> grad``.
* The operators (``matmul``, ``add_bias``, ``relu``, ``softmax_cross_entropy``, ...) are
  the core's primitives (see :mod:`minitorch_dist.singa.functional`); each also exists as
  a SINGA ``Operator`` class (``autograd.ReLU()(x)[0]``), and users may subclass
  ``Operator`` with their own ``forward``/``backward`` on arrays.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor, opt
>>> w = tensor.Tensor(data=np.full((2, 2), 0.5, np.float32), stores_grad=True, name="w")
>>> x = tensor.from_numpy(np.ones((4, 2), np.float32))
>>> y = tensor.from_numpy(np.array([0, 1, 0, 1], np.int32))
>>> autograd.training = True
>>> loss = autograd.softmax_cross_entropy(autograd.matmul(x, w), y)
>>> [(p.name, g.shape) for p, g in autograd.backward(loss)]
[('w', (2, 2))]
"""
import sys

from . import flags
from . import tape as _tape
from .functional import *  # noqa: F401,F403 - the operators are part of this module
from .functional import __all__ as _FUNCTIONS
from . import functional as _f
from .operator import Operator
from .tensor import Tensor
from .unsupported import module_getattr
from .results import facade_call
from .np_functions import FUNCTIONS as _NP_FUNCTIONS, OPERATORS as _NP_OPERATORS
from . import functional_checked as _checked

training = False
flags.keep_in(sys.modules[__name__])    # the flag stays a plain attribute here, as in SINGA

__all__ = ["training", "backward", "gradients", "Operator", "Tensor"] + list(_FUNCTIONS)


def _facaded(fn):
    """``fn`` returning facade Tensors whose ``creator`` can back-propagate."""
    def call(*args, **kwargs):
        return facade_call(fn, *args, **kwargs)
    call.__name__, call.__doc__, call.__wrapped__ = fn.__name__, fn.__doc__, fn
    return call


for _name in _FUNCTIONS:
    globals()[_name] = _facaded(getattr(_f, _name))
globals().update(_NP_FUNCTIONS)
globals().update(_checked.FUNCTIONS)
globals().update(_NP_OPERATORS)
__all__ += sorted(set(_NP_FUNCTIONS) | set(_NP_OPERATORS))


def backward(y, dy=None):
    """Back-propagate from the one-element ``y``; yield ``(param, grad)`` for every
    trainable leaf (``stores_grad``) that ``y`` depends on, in SINGA's order.

    ``dy`` (a number or a Tensor) scales the gradient of ``y`` (default 1). The gradients
    are facade Tensors on the parameters' devices. Like SINGA's, this is a generator: the
    backward runs when the first pair is asked for, and the tape is freed by it.
    """
    _tape.check_loss(y, "autograd.backward(y)")
    params = _tape.parameters_in_order(y)
    grads = _tape.gradients(y, params, dy)
    for p, g in zip(params, grads):
        if g is None:
            continue
        yield p, _wrap(g, p)


def _wrap(array, like):
    """A facade Tensor holding ``array`` (no copy) on ``like``'s device."""
    t = Tensor.__new__(Tensor)
    t.data, t.device = array, like.device
    t.grad, t.grad_fn, t._out_index, t.requires_grad = None, None, 0, False
    t.stores_grad, t.creator, t.name = False, None, None
    return t


def gradients(y, dy=None):
    """``{id(param): grad}`` for the parameters ``y`` depends on (SINGA's helper)."""
    return {id(p): g for p, g in backward(y, dy)}


# ---- the operators as SINGA Operator classes ---------------------------------------------
class _Builtin(Operator):
    """A SINGA operator class over one of the functions: ``Cls(*settings)(*xs)`` returns
    ``(fn(*xs, *settings),)``; the core tape records it (no forward/backward of its own)."""

    _fn = None

    def __init__(self, *settings, **named):
        super().__init__()
        self.settings, self.named = settings, named

    def __call__(self, *xs):
        self.requires_grad = any(getattr(x, "requires_grad", False) for x in xs)
        return (facade_call(type(self)._fn, *xs, *self.settings, **self.named),)


class _WithTarget(_Builtin):
    """Loss operators take the target at construction: ``Cls(t)(x)``."""

    def __call__(self, x):
        return (facade_call(type(self)._fn, x, *self.settings, n_grads=1, **self.named),)


class _ListInput(_Builtin):
    """``Concat(axis)(*xs)``."""

    def __call__(self, *xs):
        return (facade_call(type(self)._fn, list(xs), *self.settings, **self.named),)


def _operator(name, fn, base=_Builtin):
    doc = f"SINGA's ``autograd.{name}`` operator class: ``{name}(...)(*xs)[0]`` is " \
          f"``autograd.{fn.__name__}``."
    return type(name, (base,), {"_fn": staticmethod(fn), "__doc__": doc,
                                "__module__": __name__})


_CLASSES = {
    "ReLU": _f.relu, "Sigmoid": _f.sigmoid, "Tanh": _f.tanh, "SoftMax": _f.softmax,
    "LeakyRelu": _f.leakyrelu, "Matmul": _f.matmul, "AddBias": None, "Add": _f.add,
    "Sub": _f.sub, "Mul": _f.mul, "Div": _f.div, "Pow": _f.pow, "Exp": _f.exp, "Log": _f.log,
    "Sqrt": _f.sqrt, "Abs": _f.abs, "Negative": _f.negative, "Reciprocal": _f.reciprocal,
    "Identity": _f.identity, "Flatten": _f.flatten, "Reshape": _f.reshape,
    "Transpose": _f.transpose, "Squeeze": _f.squeeze, "Unsqueeze": _f.unsqueeze,
    "ReduceMean": _f.reduce_mean, "ReduceSum": _f.reduce_sum, "Gemm": None,
    "Dropout": None, "Mean": _f.mean, "Sum": _f.sum, "GlobalAveragePool": _f.globalaveragepool,
}
for _name, _fn in _CLASSES.items():
    if _fn is not None:
        globals()[_name] = _operator(_name, _fn)


class AddBias(_Builtin):
    """SINGA's ``AddBias(axis=0)(x, b)[0]`` = ``autograd.add_bias(x, b, axis)``."""

    def __call__(self, x, b):
        return (facade_call(_f.add_bias, x, b, *self.settings, **self.named),)


class Gemm(_Builtin):
    """SINGA's ``Gemm(alpha, beta, transA, transB)(A, B, C)[0]`` = ``autograd.gemm``."""

    def __call__(self, A, B, C=None):
        return (facade_call(_f.gemm, A, B, C, *self.settings, **self.named),)


class Dropout(_Builtin):
    """SINGA's ``Dropout(seed=0, ratio=0.5)(x)[0]`` = ``autograd.dropout``."""

    def __call__(self, x):
        return (facade_call(_f.dropout, x, *self.settings, **self.named),)


SoftMaxCrossEntropy = _operator("SoftMaxCrossEntropy", _f.softmax_cross_entropy, _WithTarget)
CrossEntropy = _operator("CrossEntropy", _f.cross_entropy, _WithTarget)
BinaryCrossEntropy = _operator("BinaryCrossEntropy", _f.binary_cross_entropy, _WithTarget)
Concat = _operator("Concat", _f.cat, _ListInput)

__all__ += [n for n in _CLASSES] + ["SoftMaxCrossEntropy", "CrossEntropy",
                                    "BinaryCrossEntropy", "Concat"]

_UNSUPPORTED = {"_RNN": "use layer.RNN / layer.LSTM (compositions of autograd operators)",
                "CudnnRNN": "cuDNN's fused RNN needs CUDA; use layer.RNN / layer.LSTM"}
__getattr__ = module_getattr("autograd", _UNSUPPORTED, __all__)

# SINGA 3.0 kept its layers in autograd (``autograd.Conv2d(1, 32, 3, padding=1)``, as the
# autograd documentation page writes); they are the layer module's classes, which accept
# that older argument form. The layer module sets them here when it loads (the package
# imports it), since it imports this module.
LAYER_ALIASES = ("Layer", "Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                 "MaxPool2d", "AvgPool2d")
__all__ += list(LAYER_ALIASES)
