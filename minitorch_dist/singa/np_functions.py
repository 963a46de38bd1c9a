"""SINGA's lower-case autograd functions over the NumPy operators, with SINGA's argument
order: ``cos(x)``, ``clip(x, min, max)``, ``where(x, y, condition)``, ``split(x, axis,
parts)``, ``onehot(axis, indices, depth, values)``, ... Each returns ``Op(...)(*xs)[0]``
(``split`` returns every piece), a facade Tensor whose ``creator`` is the operator.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> x = tensor.from_numpy(np.array([-1.0, 0.5, 2.0], np.float32))
>>> tensor.to_numpy(autograd.clip(x, 0.0, 1.0)).tolist()
[0.0, 0.5, 1.0]
"""
import builtins

from .np_ops import OPERATORS as _UNARY_OPS
from .np_ops_binary import OPERATORS as _BINARY_OPS
from .np_ops_shape import OPERATORS as _SHAPE_OPS
from .tensor import Tensor, from_numpy

OPERATORS = {**_UNARY_OPS, **_BINARY_OPS, **_SHAPE_OPS}
_O = OPERATORS


def _as_tensor(x):
    """SINGA accepts NumPy arrays in a few places (indices, conditions)."""
    import numpy as np
    if isinstance(x, Tensor) or not isinstance(x, np.ndarray):
        return x
    return from_numpy(x)


def _first(op, *xs):
    return op(*xs)[0]


def _unary(cls_name):
    def fn(x):
        return _first(_O[cls_name](), x)
    fn.__name__ = cls_name.lower()
    fn.__doc__ = f"SINGA's ``autograd.{fn.__name__}(x)``: ``{cls_name}()(x)[0]``."
    return fn


FUNCTIONS = {name.lower(): _unary(name) for name in (
    "Cos", "Cosh", "Acos", "Acosh", "Sin", "Sinh", "Asin", "Asinh", "Tan", "Atan", "Atanh",
    "Sign", "Erf", "Ceil", "Floor", "Round", "Rounde", "Shape", "NonZero", "CosSim")}
FUNCTIONS["softsign"] = _unary("SoftSign")
FUNCTIONS["softplus"] = _unary("SoftPlus")
FUNCTIONS["_not"] = _unary("Not")


def cossim(a, b):
    """The cosine similarity of each row pair of ``a`` and ``b`` (shape ``(batch,)``)."""
    return _first(_O["CosSim"](), a, b)


def hardsigmoid(x, alpha=0.2, gamma=0.5):
    """``max(0, min(1, alpha * x + gamma))``."""
    return _first(_O["HardSigmoid"](alpha, gamma), x)


def elu(x, alpha=1):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    return _first(_O["Elu"](alpha), x)


def selu(x, alpha=1.67326, gamma=1.0507):
    """``gamma * elu_alpha(x)``."""
    return _first(_O["SeLU"](alpha, gamma), x)


def clip(x, min=None, max=None):  # noqa: A002 - SINGA's names
    """``x`` limited to ``[min, max]`` (either may be None)."""
    return _first(_O["Clip"](min, max), x)


def prelu(x, slope):
    """``x`` where positive, ``slope * x`` elsewhere."""
    return _first(_O["PRelu"](), x, slope)


def _binary(cls_name, name):
    def fn(x, y):
        return _first(_O[cls_name](), x, y)
    fn.__name__ = name
    fn.__doc__ = f"SINGA's ``autograd.{name}(x, y)``: a 0/1 float32 tensor, no gradient."
    return fn


for _cls, _name in (("Less", "less"), ("Greater", "greater"), ("Equal", "equal"),
                    ("And", "_and"), ("Or", "_or"), ("Xor", "_xor")):
    FUNCTIONS[_name] = _binary(_cls, _name)


def max(*xs):  # noqa: A001 - SINGA's name
    """The element-wise maximum of the inputs (broadcasting)."""
    return _first(_O["Max"](), *xs)


def min(*xs):  # noqa: A001 - SINGA's name
    """The element-wise minimum of the inputs (broadcasting)."""
    return _first(_O["Min"](), *xs)


def where(x, y, condition):
    """``x`` where ``condition`` holds, else ``y``."""
    import numpy as np
    cond = condition.asnumpy() if hasattr(condition, "asnumpy") else np.asarray(condition)
    return _first(_O["Where"](cond), x, y)


def ranking_loss(pos, neg, M=0.2):
    """The mean of ``max(0, M - (pos - neg))``."""
    return _first(_O["RankingLoss"](M), pos, neg)


def cast(x, to):
    """The values of ``x`` converted to ``to``."""
    return _first(_O["Cast"](to), x)


def constant_of_shape(x, value=0):
    """A float32 tensor of the shape that ``x`` holds, filled with ``value``."""
    return _first(_O["ConstantOfShape"](value), x)


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001 - SINGA's name
    """ONNX's Slice."""
    return _first(_O["Slice"](starts, ends, axes, steps), x)


def split(x, axis, parts, num_output=None):
    """The pieces of ``x`` along ``axis`` (a tuple)."""
    return _O["Split"](axis, parts, num_output)(x)


def gather(x, axis, indices):
    """``np.take(x, indices, axis)``."""
    return _first(_O["Gather"](axis, indices), x)


def tile(x, repeats):
    """``np.tile(x, repeats)``."""
    return _first(_O["Tile"](repeats), x)


def onehot(axis, indices, depth, values):
    """ONNX's OneHot: ``values[0]`` off, ``values[1]`` on, a new axis ``axis``."""
    return _first(_O["OneHot"](axis, depth, values), _as_tensor(indices))


def expand(x, shape):
    """``x`` broadcast to ``shape``."""
    return _first(_O["Expand"](shape), x)


def pad(x, mode, pads, constant=0.0):
    """ONNX's Pad."""
    return _first(_O["Pad"](mode, pads, constant), x)


def upsample(x, mode, scales):
    """Nearest-neighbour up-sampling by an integer scale per axis."""
    return _first(_O["UpSample"](mode, scales), x)


def depth_to_space(x, blocksize, mode="DCR"):
    """ONNX's DepthToSpace."""
    return _first(_O["DepthToSpace"](blocksize, mode), x)


def space_to_depth(x, blocksize, mode="DCR"):
    """ONNX's SpaceToDepth."""
    return _first(_O["SpaceToDepth"](blocksize, mode), x)


def scatter_elements(x, indices, updates, axis=0):
    """ONNX's ScatterElements."""
    return _first(_O["ScatterElements"](indices, updates, axis), x)


def embedding(x, w):
    """The rows of ``w`` picked by the ids in ``x``."""
    return _first(_O["Embedding"](), x, w)


for _fn in (cossim, hardsigmoid, elu, selu, clip, prelu, max, min, where, ranking_loss, cast,
            constant_of_shape, slice, split, gather, tile, onehot, expand, pad, upsample,
            depth_to_space, space_to_depth, scatter_elements, embedding):
    FUNCTIONS[_fn.__name__] = _fn
del builtins
