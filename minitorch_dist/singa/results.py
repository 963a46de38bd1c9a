"""Results as SINGA sees them: facade Tensors that know their ``creator``.

SINGA's operators return Python ``Tensor``\\s whose ``creator`` is the operator that made
them; tests and programs call ``y.creator.backward(dy)`` to get the inputs' gradients as
``CTensor``\\s. Here an operation runs on the core (so ``autograd.backward`` and the
optimizers see it on the core tape), and its result is turned into a facade Tensor in place
(same object, so the tape is untouched) with ``creator`` set:

* a SINGA ``Operator`` (NumPy forward/backward) is its own creator;
* a function built from core primitives gets a :class:`Recompute` creator, whose
  ``backward(*dys)`` runs the same function again on fresh leaves and back-propagates
  ``dys`` through the core engine. Random operations (dropout) draw a new mask there.

A creator holds the intermediate results it consumed weakly (:class:`_Link`), so a
network's activations are freed as soon as backward is done with them, as SINGA's are.
"""
import weakref

from .. import autograd as core_autograd
from ..tensor import Tensor as CoreTensor
from .ctensor import as_ctensor, raw

__all__ = ["as_result", "Recompute", "facade_call", "FACADE"]

FACADE = {}     # "Tensor"/"Parameter": the facade classes, set by singa/tensor.py (no cycle)


def as_result(y, creator, inputs=()):
    """Make the core Tensor ``y`` a facade Tensor with ``creator`` (in place); return it.

    An input handed back unchanged keeps its own identity and creator."""
    if not isinstance(y, CoreTensor) or any(y is x for x in inputs):
        return y
    if isinstance(y, FACADE["Parameter"]):
        return y
    if type(y) is CoreTensor:
        y.__class__ = FACADE["Tensor"]
        y.stores_grad, y.name = False, None
    y.creator = creator
    return y


def _flat_tensors(args):
    out = []
    for a in args:
        if isinstance(a, CoreTensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, CoreTensor))
    return out


class Recompute:
    """The creator of a result of core primitives: ``fn(*args, **kwargs)``.

    ``extra`` are tensors used inside ``fn`` that are not arguments (a layer's parameters);
    their gradients follow those of the arguments, in SINGA's input order.
    """

    def __init__(self, fn, args, kwargs=None, extra=(), n_grads=None):
        self.fn, self.kwargs = fn, kwargs or {}
        self._args = tuple(_held(a) for a in args)
        self.extra = list(extra)
        self.n_grads = n_grads      # a loss gives the gradient of its input only
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.requires_grad = True

    @property
    def args(self):
        """The arguments; an intermediate result that is gone reads as its ghost."""
        return tuple(_resolved(a) for a in self._args)

    def _leaf(self, x):
        float_kind = x.dtype.kind == "f"
        return CoreTensor._make(x.data, x.device, float_kind)

    def backward(self, *dys):
        """The gradients (CTensors) of the tensor arguments, then of ``extra``, for the
        outputs' gradients ``dys`` (arrays, CTensors or Tensors)."""
        mapping = {}

        def swap(a):
            if isinstance(a, CoreTensor):
                mapping[id(a)] = self._leaf(a)
                return mapping[id(a)]
            if isinstance(a, (list, tuple)):
                return type(a)(swap(x) for x in a)
            return a

        args = [swap(a) for a in self.args]
        if any(getattr(t, "_ghost_of", None) is not None for t in _flat_tensors(self.args)):
            raise RuntimeError(f"{self.name}: creator.backward needs this operation's inputs, "
                               "and an intermediate one is gone (results hold their inputs "
                               "weakly, so that activations are freed as in SINGA); keep a "
                               "reference to the input until its backward has run")
        ys = self.fn(*args, **self.kwargs)
        ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
        if not dys:             # SINGA's loss operators: backward(dy=1.0)
            dys = (1.0,)
        seeds = [ys[i].device.xp.asarray(raw(d), dtype=ys[i].dtype) *
                 ys[i].device.xp.ones(ys[i].shape, ys[i].dtype) for i, d in enumerate(dys)]
        inputs = [mapping[id(x)] for x in _flat_tensors(self.args)]
        targets = inputs[:self.n_grads] + self.extra
        grads = core_autograd.run_backward(ys[:len(seeds)], seeds, targets=targets)
        grads = [g if g is not None else t.device.xp.zeros(t.shape, t.dtype)
                 for g, t in zip(grads, targets)]
        out = tuple(as_ctensor(g) for g in grads)
        return out[0] if len(out) == 1 else out


class _Link:
    """A creator's weak hold on an intermediate result it consumed.

    Holding results strongly kept every activation of a network alive until the loss was
    dropped (a creator holds its inputs, whose creators hold theirs), whatever backward
    needs. Once the result is gone, the link gives a ghost: a facade Tensor with its creator,
    shape and dtype over a zero-strided array, enough for ``sonnx.to_onnx`` to walk on."""

    __slots__ = ("ref", "creator", "original_id", "shape", "dtype", "device", "ghost")

    def __init__(self, t):
        self.ref, self.creator, self.original_id = weakref.ref(t), t.creator, id(t)
        self.shape, self.dtype, self.device = t.shape, t.dtype, t.device
        self.ghost = None

    def resolve(self):
        t = self.ref()
        if t is not None:
            return t
        if self.ghost is None:
            self.ghost = _ghost(self)
        return self.ghost


def _ghost(link):
    xp = link.device.xp
    t = FACADE["Tensor"].__new__(FACADE["Tensor"])
    t.data = xp.broadcast_to(xp.zeros((), link.dtype), link.shape)
    t.device, t.grad, t.grad_fn, t._out_index, t.requires_grad = link.device, None, None, 0, False
    t.stores_grad, t.creator, t.name = False, link.creator, None
    t._ghost_of = link.original_id
    return t


def _held(a):
    """How a creator holds the argument ``a``: intermediate results through a link."""
    if isinstance(a, (list, tuple)):
        return type(a)(_held(x) for x in a)
    if isinstance(a, CoreTensor) and hasattr(getattr(a, "creator", None), "backward") \
            and not isinstance(a, FACADE["Parameter"]):
        return _Link(a)
    return a


def _resolved(a):
    if isinstance(a, _Link):
        return a.resolve()
    if isinstance(a, (list, tuple)):
        return type(a)(_resolved(x) for x in a)
    return a


def facade_call(fn, *args, n_grads=None, **kwargs):
    """Run ``fn`` and make each Tensor it returns a facade Tensor with a Recompute creator
    (whose ``backward`` gives the first ``n_grads`` tensor arguments' gradients; all by
    default)."""
    ys = fn(*args, **kwargs)
    creator = Recompute(fn, args, kwargs, n_grads=n_grads)
    creator.out_ids = [id(y) for y in (ys if isinstance(ys, (tuple, list)) else (ys,))]
    inputs = _flat_tensors(args)
    if isinstance(ys, (tuple, list)):
        return type(ys)(as_result(y, creator, inputs) for y in ys)
    return as_result(ys, creator, inputs)
