"""``mindspore.ops.composite`` (scripts import it as ``C``): functions of functions.

* ``GradOperation(get_all, get_by_list, sens_param)``: gradients (``grad_operation.py``).
* ``HyperMap(fn=None, reverse=False)``: ``fn`` applied elementwise over tuples
  (``HyperMap(fn)(xs, ys)``, or ``HyperMap()(fn, xs, ys)``), as model-zoo code scales or clips
  a tuple of gradients; ``reverse=True`` calls it from the last element to the first.
* ``MultitypeFuncGraph(name, read_value=False)``: a function with implementations registered by argument types
  (``@f.register("Number", "Tensor")``); calling it picks the implementation whose types
  match, a ``TypeError`` listing them otherwise.
* ``partial``/``Partial``: ``functools.partial``.

>>> import minitorch_dist as ms
>>> from minitorch_dist.ops import composite as C
>>> scale = C.MultitypeFuncGraph("scale")
>>> @scale.register("Number", "Tensor")
... def _scale(factor, grad):
...     return grad * factor
>>> [g.asnumpy().tolist() for g in C.HyperMap()(C.partial(scale, 0.5), (ms.Tensor([2.0]), ms.Tensor([4.0])))]
[[1.0], [2.0]]
"""
import functools
import numbers

from ..row_tensor import RowTensor
from ..tensor import Tensor
from .grad_operation import GradOperation

__all__ = ["GradOperation", "HyperMap", "MultitypeFuncGraph", "Partial", "partial"]

partial = functools.partial


class Partial:
    """MindSpore's ``ops.Partial()(fn, *args)``: ``functools.partial(fn, *args)``."""

    def __call__(self, fn, *args, **kwargs):
        if not callable(fn):
            raise TypeError(f"Partial: the first argument must be callable, got {type(fn).__name__}")
        return functools.partial(fn, *args, **kwargs)


def _type_name(value):
    if isinstance(value, RowTensor):
        return "RowTensor"
    if isinstance(value, Tensor):
        return "Tensor"
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, numbers.Number):
        return "Number"
    if isinstance(value, str):
        return "String"
    if isinstance(value, tuple):
        return "Tuple"
    if isinstance(value, list):
        return "List"
    if value is None:
        return "None"
    if callable(value):
        return "Function"
    return type(value).__name__


_ALIASES = {"Bool": ("Bool", "Number"), "Number": ("Number",), "Tensor": ("Tensor",)}


class MultitypeFuncGraph:
    """A function dispatched on its arguments' types (see the module docstring)."""

    def __init__(self, name, read_value=False):
        if not isinstance(read_value, bool):
            raise TypeError(f"MultitypeFuncGraph {name!r}: read_value must be True or False, "
                            f"got {read_value!r}")
        self.name = name
        self.entries = []
        self.read_value = read_value
        if read_value:
            # MindSpore's graph compiler then passes Parameters by value; eager calls pass
            # them as they are, which gives the same results for a function that only reads.
            from ..runtime import _once
            _once("MultitypeFuncGraph.read_value", "MultitypeFuncGraph(read_value=True) changes "
                  "nothing here: it lets MindSpore's graph compiler pass Parameters by value, and "
                  "eager calls give the same results")

    def register(self, *types):
        """Decorator: register an implementation for arguments of ``types``."""
        def add(fn):
            self.entries.append((tuple(types), fn))
            return fn
        return add

    def __call__(self, *args):
        names = [_type_name(a) for a in args]
        for types, fn in self.entries:
            if len(types) == len(args) and all(
                    want in _ALIASES.get(have, (have,)) for want, have in zip(types, names)):
                return fn(*args)
        raise TypeError(f"MultitypeFuncGraph {self.name!r}: no implementation for argument types "
                        f"{tuple(names)}; registered: {[t for t, _ in self.entries]}")


class HyperMap:
    """``fn`` over the elements of tuples (see the module docstring)."""

    def __init__(self, ops=None, reverse=False):
        if not isinstance(reverse, bool):
            raise TypeError(f"HyperMap: reverse must be True or False, got {reverse!r}")
        self.fn = ops
        self.reverse = reverse

    def __call__(self, *args):
        fn, seqs = (self.fn, args) if self.fn is not None else (args[0], args[1:])
        if not seqs:
            raise TypeError("HyperMap needs at least one tuple to map over")
        if not all(isinstance(s, (tuple, list)) for s in seqs):
            return fn(*seqs)
        if len({len(s) for s in seqs}) != 1:
            raise ValueError(f"HyperMap: the tuples differ in length: {[len(s) for s in seqs]}")
        # reverse=True calls fn from the last element to the first (the order of any side
        # effects, such as in-place updates); results keep their positions either way
        order = range(len(seqs[0]) - 1, -1, -1) if self.reverse else range(len(seqs[0]))
        results = {}
        for i in order:
            items = [s[i] for s in seqs]
            results[i] = (HyperMap(fn, self.reverse)(*items) if isinstance(items[0], (tuple, list))
                          else fn(*items))
        return tuple(results[i] for i in range(len(seqs[0])))
