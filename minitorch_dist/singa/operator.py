"""SINGA's ``autograd.Operator``: users write ``forward``/``backward`` on raw arrays.

In SINGA a new differentiable operation is a subclass of ``Operator`` whose
``forward(*xs)`` takes and returns ``CTensor``\\s and whose ``backward(*dys)`` returns one
gradient per input; calling an instance returns a tuple of output Tensors and records the
operation for ``autograd.backward``. Here the same subclass runs as a core primitive: its
``forward`` receives the inputs' arrays (NumPy, or CuPy on a GPU) and returns an array or a
tuple of arrays, its ``backward`` receives one gradient array per output and returns one
per input (``None`` for an input that needs none). The core engine records and replays it
like every built-in primitive, so shape fitting, device placement and the placement report
apply unchanged.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> class Square(autograd.Operator):
...     def forward(self, x):
...         self.x = x
...         return x * x
...     def backward(self, dy):
...         return 2 * self.x * dy
>>> w = tensor.Tensor(data=np.array([3.0], np.float32), stores_grad=True)
>>> y = Square()(w)[0]
>>> [(p is w, g.data.tolist()) for p, g in autograd.backward(y)]
[(True, [6.0])]
"""
import itertools

from ..ops.primitive import Primitive
from ..tensor import Tensor as CoreTensor
from .ctensor import raw
from .results import as_result

__all__ = ["Operator"]

_counter = itertools.count()


class _OperatorPrimitive(Primitive):
    """Runs one SINGA ``Operator`` instance as a core primitive."""

    def __init__(self, op):
        self.op = op
        self.instance_name = op.name

    def forward(self, ctx, *arrays):
        ys = self.op.forward(*arrays)
        ys = tuple(raw(y) for y in ys) if isinstance(ys, (tuple, list)) else raw(ys)
        if isinstance(ys, list):
            ys = tuple(ys)
        if isinstance(ys, tuple) and len(ys) == 1:
            ys = ys[0]
        ctx.multi = isinstance(ys, tuple)
        return ys

    def backward(self, ctx, *dys):
        """Call the user's ``backward`` with one gradient per output."""
        dxs = self.op.backward(*dys)
        if not isinstance(dxs, (tuple, list)):
            dxs = (dxs,)
        return tuple(raw(dx) for dx in dxs)


class Operator:
    """Base class of SINGA operators: override ``forward(*xs)`` and ``backward(*dys)``
    (arrays in, arrays out); ``op(*tensors)`` returns a tuple of output Tensors.

    ``forward`` runs once per call; keep what ``backward`` needs on ``self`` (an instance
    is used for one call, as in SINGA's functional wrappers: ``MyOp()(x)[0]``).
    """

    def __init__(self, name=None):
        self.name = name if name is not None else f"{type(self).__name__}#{next(_counter)}"
        self.requires_grad = False

    def __call__(self, *xs):
        return self._do_forward(*xs)

    def _do_forward(self, *xs):
        bad = [type(x).__name__ for x in xs if not isinstance(x, CoreTensor)]
        if bad:
            raise TypeError(f"autograd.Operator {type(self).__name__}: every input must be a "
                            f"Tensor, got {bad}")
        self.requires_grad = any(x.requires_grad for x in xs)
        self.src = xs           # what the ONNX export walks (SINGA keeps it as ``src`` too)
        ys = _OperatorPrimitive(self)(*xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        ys = tuple(as_result(y, self, xs) for y in ys)
        self.y_id2idx = {id(y): i for i, y in enumerate(ys)}
        return ys

    def output_name(self, idx):
        """SINGA's name of output ``idx``: ``"<op name>:<idx>"``."""
        return f"{self.name}:{idx}"

    def grad_name(self, idx):
        """SINGA's name of the gradient of output ``idx``."""
        return f"{self.output_name(idx)}_g"

    def forward(self, *xs):
        """The outputs (an array or a tuple of arrays) for input arrays ``xs``."""
        raise NotImplementedError(f"autograd.Operator: {type(self).__name__} must define "
                                  "forward(self, *xs)")

    def backward(self, *dys):
        """The gradient of each input (arrays, or None) for the outputs' gradients ``dys``."""
        raise NotImplementedError(f"autograd.Operator: {type(self).__name__} must define "
                                  "backward(self, *dys)")

    def get_params(self):
        """SINGA's hook for operators that own parameters (none here)."""
        return []
