"""The Primitive base class and dispatch: placement, constants, the tape, statistics.

A primitive subclass writes ``forward(ctx, *arrays, **attrs)`` and
``backward(ctx, *grads)`` once, against ``ctx.xp`` (NumPy or CuPy). Dispatch (``run``) does
the rest, in three steps:

1. placement: it picks the device (the primitive's ``set_device`` target, else where its
   inputs are), lets each input tensor prepare for the use (``Tensor.prepare_use``: a
   deferred tensor draws its values, a new ``Parameter`` settles on that device), and copies
   inputs that live elsewhere through an autograd-aware copy;
2. forward: it turns Python numbers into arrays of a matching dtype, runs ``forward``, counts
   the memory of a device with a capacity, and rewrites errors to name the primitive;
3. recording: a tape node when a gradient is needed, and the calls, time and bytes moved
   for ``ms.placement_report()``.
"""
import itertools
import logging
import weakref
from time import perf_counter

import numpy as np

from ..autograd import Node, _state as _grad_state
from ..backend import dtypes, get_device
from ..backend.device import _ALIASES, VALID_TARGETS
from ..extension import extension
from ..tensor import Tensor, _host_array
from ..thread_state import ThreadState
from .prim_attrs import add_prim_attr

logger = logging.getLogger("minitorch_dist")
_op_ids = itertools.count(1)
_ran = weakref.WeakValueDictionary()   # primitives that have run, in order of first call
# A parallel executor (the pipeline runtime) may see every primitive call first: it returns
# a result of its own (a placeholder for work another rank does) or runs ``prim.run``.
_call_hook = ThreadState(hook=None)   # per thread (ranks as threads)
# Primitive.recompute(): minitorch_dist/recompute.py (which imports this module) fills the slot
_recompute_runner = []
_needs_patterns = {}    # needs_input_grad tuples of up to 4 inputs, one per pattern


def set_primitive_hook(hook):
    """Install ``hook(prim, inputs, attrs)`` in front of every primitive call (None removes
    it); returns the previous hook so that callers can restore it."""
    previous = _call_hook.hook
    _call_hook.hook = hook
    return previous


class Context:
    """What a primitive's forward leaves for its backward.

    ``xp`` is the array module of the device the primitive runs on; ``needs_input_grad[i]``
    says whether input ``i`` wants a gradient (backward may skip the others: return None).
    """

    __slots__ = ("xp", "device", "needs_input_grad", "saved", "__dict__")
    # {input position: (array, scale)} during a backward whose observer offers memory for
    # those gradients (``BackwardObserver.gradient_slot``); a backward may ignore it
    grad_slots = None

    def __init__(self, device):
        self.device = device
        self.xp = device.xp
        self.saved = ()

    def save_for_backward(self, *arrays):
        self.saved = arrays


def _check_target(target):
    if not isinstance(target, str) or target.partition(":")[0].strip().upper() not in _ALIASES:
        raise ValueError(f"unknown device target {target!r}; valid targets are {list(VALID_TARGETS)}")
    return target


def _check_strategy(strategy, what):
    if strategy is None:
        return None
    ok = isinstance(strategy, (tuple, list)) and all(
        isinstance(s, (tuple, list)) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                             for n in s) for s in strategy)
    if not ok:
        raise ValueError(f"{what} must be a tuple of tuples of positive split counts, one tuple per "
                         f"input, e.g. ((2, 1), (1, 4)); got {strategy!r}")
    return tuple(tuple(s) for s in strategy)


class Primitive:
    """Base class of every operation. Subclasses define ``forward`` and ``backward``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> add = ops.Add().set_device("CPU")
    >>> add(ms.Tensor([1.0, 2.0]), 1.0).asnumpy().tolist()
    [2.0, 3.0]
    """

    differentiable = True
    # True where backward computes each input's gradient only when ``needs_input_grad`` asks
    # for it, at no extra cost: a split backward (weights later) then costs nothing extra.
    split_backward = False
    # True where backward may compute a gradient straight into memory an observer offers
    # (``ctx.grad_slots``, ``BackwardObserver.gradient_slot``): only those are offered any.
    writes_gradient_slots = False
    # True where backward exchanges messages with a peer running another program (pipeline
    # send/recv): it runs even when its gradient reaches no requested target, or the peer
    # would wait. Collectives need not: every rank of an SPMD program prunes the same nodes.
    backward_always_runs = False
    # MindSpore primitive attributes this primitive acts on when set with add_prim_attr.
    settable_attrs = ()
    _recompute = False        # Primitive.recompute(): keep only the inputs, re-run in backward
    # Per-instance settings and statistics; class defaults so subclasses need not call super().__init__.
    _target_spec = None
    _target_device = None
    instance_name = None
    in_strategy = None
    out_strategy = None
    calls = 0
    forward_time = 0.0
    backward_time = 0.0
    bytes_in = 0
    bytes_out = 0
    device_used = None
    _op_id = 0

    # ---- to be written by subclasses --------------------------------------------------
    def forward(self, ctx, *arrays, **attrs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, ctx, *grads):
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    # ---- configuration ----------------------------------------------------------------
    @property
    def name(self):
        if self.instance_name:
            return self.instance_name
        if not self._op_id:
            self._op_id = next(_op_ids)
        return f"{type(self).__name__}-op{self._op_id}"

    def set_device(self, device_target):
        """Run this primitive on ``"CPU"`` or ``"GPU"``; returns self for chaining."""
        self._target_spec = _check_target(device_target)
        self._target_device = None
        return self

    @property
    def primitive_target(self):
        return self._target_spec

    def add_prim_attr(self, name, value):
        """MindSpore's primitive attributes: ``add_prim_attr("primitive_target", "CPU")`` is
        ``set_device``, an attribute the primitive has is set, and a compiler hint is recorded
        with a one-time note of why it changes nothing (``ops/prim_attrs.py``)."""
        return add_prim_attr(self, name, value)

    def shard(self, in_strategy=None, out_strategy=None, strategy=None):
        """Record an operator-level sharding strategy: one tuple of split counts per input,
        one count per dimension, e.g. ``MatMul().shard(((2, 4), (4, 1)))`` (``strategy=`` is
        MindSpore's older keyword for ``in_strategy``). It takes effect under
        SEMI_AUTO_PARALLEL / AUTO_PARALLEL (``parallel/sharding``). A split that would run
        unsharded is refused when the primitive runs: outside a network call in those modes,
        inside pipeline stages, or on several ranks in another mode; one process outside
        them runs the whole operator, with a warning."""
        if strategy is not None:
            if in_strategy is not None:
                raise ValueError(f"{self.name}.shard: give in_strategy or strategy (its older "
                                 "name), not both")
            in_strategy = strategy
        if out_strategy is not None and in_strategy is None:
            raise ValueError(f"{self.name}.shard: out_strategy needs an in_strategy too, got "
                             f"in_strategy=None and out_strategy={out_strategy!r}")
        self.in_strategy = _check_strategy(in_strategy, f"{self.name}.shard: in_strategy")
        self.out_strategy = _check_strategy(out_strategy, f"{self.name}.shard: out_strategy")
        return self

    def __repr__(self):
        target = f", target={self._target_spec}" if self._target_spec else ""
        return f"{type(self).__name__}(name={self.name}{target})"

    # ---- dispatch ---------------------------------------------------------------------
    def _device_for(self, inputs):
        if self._target_spec is not None:
            if self._target_device is None:   # the first call since set_device
                self._target_device = get_device(self._target_spec)
                _log_target_mismatch(self)
            return self._target_device
        first = None
        for x in inputs:
            if isinstance(x, Tensor):
                if first is None:
                    first = x.device
                elif x.device is not first:
                    default = get_device(None)
                    return default if any(isinstance(t, Tensor) and t.device is default
                                          for t in inputs) else first
        return first if first is not None else get_device(None)

    def apply(self, *inputs, **attrs):
        """Run forward on ``inputs`` (tensors, arrays or numbers) and record the tape."""
        if self.in_strategy is not None:     # is a parallel executor running the strategy?
            extension().check_primitive_call(self)
        hook = _call_hook.hook
        if hook is not None:
            return hook(self, inputs, attrs)
        if self._recompute and _recompute_runner:
            return _recompute_runner[0](lambda *xs: self.run(*xs, **attrs), inputs)
        return self.run(*inputs, **attrs)

    __call__ = apply     # one call less per primitive call

    def __init_subclass__(cls, **kwargs):
        # a subclass (a user's too) that overrides apply is called through its own apply
        super().__init_subclass__(**kwargs)
        if "apply" in cls.__dict__ and "__call__" not in cls.__dict__:
            cls.__call__ = cls.__dict__["apply"]

    def recompute(self, mode=True):
        """MindSpore's ``Primitive.recompute``: keep only this call's inputs for backward and
        run the forward again there (``minitorch_dist/recompute.py``)."""
        if not isinstance(mode, bool):
            raise TypeError(f"{self.name}.recompute: mode must be True or False, got {mode!r}")
        self._recompute = mode
        return self

    def run(self, *inputs, **attrs):
        """``apply`` without the installed hook, in three steps: placement, forward and
        recording (the tape node and the statistics)."""
        start = perf_counter()
        device = None
        if self._target_spec is None:    # _device_for's common case, inline: one device
            for x in inputs:
                if not isinstance(x, Tensor):
                    device = None
                    break
                if device is None:
                    device = x.device
                elif x.device is not device:
                    device = None
                    break
        if device is not None and device.memory is None:
            # every input a tensor on ``device``: _plain_inputs' loop without its checks
            arrays, needs, placed = [], [], inputs
            for x in inputs:
                x.prepare_use(device, self)
                if x.device is not device:      # it settled elsewhere: copied as _placed does
                    arrays, placed = None, self._copied(inputs, device)
                    break
                arrays.append(x.data)
                needs.append(x.requires_grad)
        else:
            if device is None:
                device = self._device_for(inputs)
            if device.memory is None:
                arrays, needs, placed = _plain_inputs(self, inputs, device)
            else:
                arrays, placed = None, self._placed(inputs, device)
        if arrays is None:   # a constant, a tensor to copy, or a device with a capacity
            ctx, out = self._forward(placed, device, attrs)
            return self._recorded(ctx, _tape_inputs(placed), out, start)
        # the common case: every input a tensor already on ``device``, found in one pass
        ctx = _new_object(Context)     # Context(device) without its __init__ frame
        ctx.device, ctx.xp, ctx.saved = device, device.xp, ()
        grad_on = any(needs) and self.differentiable and _grad_state.enabled
        needs = tuple(needs) if grad_on else (False,) * len(needs)
        # one shared tuple per pattern of up to 4 inputs: a tape node keeps none of its own
        ctx.needs_input_grad = _needs_patterns.setdefault(needs, needs) if len(needs) <= 4 \
            else needs
        return self._recorded(ctx, inputs, self._called(ctx, arrays, attrs, None), start)

    def _placed(self, inputs, device, start=0):
        """``inputs`` with every tensor on ``device``: each tensor prepares for the use (a
        Parameter may settle there for good), and one living elsewhere is copied through an
        autograd-aware copy (backward copies the gradient back). The common case, nothing to
        copy, returns ``inputs`` itself rather than a new list. The ``start`` inputs before
        are on ``device`` and prepared already (``_plain_inputs``)."""
        for x in inputs[start:] if start else inputs:
            if isinstance(x, Tensor):
                x.prepare_use(device, self)
                if x.device is not device:
                    return self._copied(inputs, device)
        return inputs

    def _copied(self, inputs, device):
        """``_placed`` where some tensor lives elsewhere (``prepare_use`` may run twice on
        a tensor: it does its work once)."""
        from .device_copy import copy_to     # device_copy imports this module
        placed = []
        for x in inputs:
            if isinstance(x, Tensor):
                x.prepare_use(device, self)
                if x.device is not device:
                    x = copy_to(x, device, owner=self)
            placed.append(x)
        return placed

    def _forward(self, placed, device, attrs):
        """(ctx, output arrays): constants made arrays of a matching dtype, memory charged on
        a device with a capacity, and errors rewritten to name this primitive."""
        ref_dtype, requires, constants, arrays = None, False, False, []
        for x in placed:     # one pass: the arrays, the first dtype, whether any wants grad
            if isinstance(x, Tensor):
                data = x.data
                if ref_dtype is None:
                    ref_dtype = data.dtype
                if x.requires_grad:
                    requires = True
                arrays.append(data)
            else:
                constants = True
                arrays.append(x)
        if constants:        # numbers take the dtype of the first tensor, wherever it is
            arrays = [x.data if isinstance(x, Tensor) else _constant(x, ref_dtype, device)
                      for x in placed]
        memory = device.memory
        if memory is not None:   # a virtual GPU with a capacity: count what it holds
            _charge(memory, arrays)
        ctx = Context(device)
        if requires and self.differentiable and _grad_state.enabled:
            needs = tuple([isinstance(x, Tensor) and x.requires_grad for x in placed])
        else:
            needs = (False,) * len(placed)
        ctx.needs_input_grad = _needs_patterns.setdefault(needs, needs) if len(needs) <= 4 \
            else needs
        return ctx, self._called(ctx, arrays, attrs, memory)

    def _called(self, ctx, arrays, attrs, memory):
        """``forward``'s output arrays, charged to ``memory`` (a device's capacity, or None),
        with errors rewritten to name this primitive."""
        device = ctx.device
        try:
            out = self.forward(ctx, *arrays, **attrs)
        except (MemoryError, ValueError, TypeError, IndexError) as err:
            error = self._forward_error(err, device, arrays)
            if error is None:
                raise
            raise error from err
        if isinstance(out, tuple):
            out = tuple([_as_array(o, device) for o in out])
            if memory is not None:
                _charge(memory, out)
        else:
            if type(out) is not np.ndarray and device.xp is np:
                out = np.asarray(out)
            if memory is not None:
                _charge(memory, (out,))
        return out

    def _forward_error(self, err, device, arrays):
        """The error to raise in place of ``forward``'s ``err``, or None to raise ``err``:
        CuPy's out-of-memory says what and what to do; other errors name this primitive."""
        if isinstance(err, MemoryError):
            return device.memory_error(err, what=f"in {self.name}")
        if str(err).startswith(self.name):
            return None
        described = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays if hasattr(a, "shape"))
        return _same_kind_error(err, f"{self.name}: {err} (inputs: {described})")

    def _recorded(self, ctx, tape_inputs, out, start):
        """The output tensors, with a tape node on ``tape_inputs`` (the tensors, None for
        each constant) when a gradient is needed (floating outputs only), and this call
        counted in the statistics."""
        device = ctx.device
        grad_on = any(ctx.needs_input_grad)
        if isinstance(out, tuple):
            node = Node(self, ctx, tape_inputs, tuple((o.shape, o.dtype) for o in out)) \
                if grad_on else None
            result = tuple(Tensor._make(o, device, grad_on and o.dtype.kind == "f",
                                        node if grad_on and o.dtype.kind == "f" else None, i)
                           for i, o in enumerate(out))
        else:
            differentiable = grad_on and out.dtype.kind == "f"
            # Tensor._make(out, device, differentiable, node, 0), inline: one frame less
            result = _new_object(Tensor)
            result.data, result.device, result.requires_grad = out, device, differentiable
            result.grad, result._out_index = None, 0
            result.grad_fn = Node(self, ctx, tape_inputs) if differentiable else None
        if not self.calls:       # count_call, inlined: this runs once per primitive call
            _list_ran(self)
        self.calls += 1
        self.device_used = device
        self.forward_time += perf_counter() - start
        return result


_new_object = object.__new__     # makes a Context or a Tensor without an __init__ frame


def _plain_inputs(prim, inputs, device):
    """Dispatch's common case in one pass: ``(arrays, needs_input_grad, inputs)`` when every
    input is a tensor on ``device`` (after its ``prepare_use``); else ``(None, None, placed)``
    with ``placed`` as ``Primitive._placed`` makes it, each tensor prepared as often as there."""
    arrays, needs = [], []
    for x in inputs:
        if not isinstance(x, Tensor):     # a constant: the rest placed as _placed does
            return None, None, prim._placed(inputs, device, len(arrays))
        x.prepare_use(device, prim)
        if x.device is not device:
            return None, None, prim._copied(inputs, device)
        arrays.append(x.data)
        needs.append(x.requires_grad)
    return arrays, needs, inputs


def _tape_inputs(placed):
    """A tape node's inputs: the tensors, None in place of each constant."""
    return [x if isinstance(x, Tensor) else None for x in placed]


def _charge(budget, arrays):
    """Count, once each, the arrays a primitive reads or writes on a device with a capacity
    (parameters made there by a plain copy are first seen as inputs)."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            budget.charge(a)


def _target_kind(spec):
    return _ALIASES.get(str(spec).partition(":")[0].strip().upper())


def _log_target_mismatch(prim):
    """MindSpore's INFO line for a primitive placed off the context's backend (seed 000 greps
    the log for it); called once per ``set_device``, on the first call."""
    if not logger.isEnabledFor(logging.INFO):
        return
    from ..context import get_context
    backend = _target_kind(get_context("device_target"))
    if _target_kind(prim._target_spec) != backend:
        logger.info("primitive target does not match backend: %s, primitive_target: %s, "
                    "node name: %s", backend, _target_kind(prim._target_spec), display_name(prim))


def display_name(prim):
    """Scope and type, as the placement report and the log show it: ``layer1.matmul (MatMul)``;
    an unnamed instance's own name already says its type (``Add-op7``)."""
    name, kind = prim.name, type(prim).__name__
    return name if name.startswith(kind + "-op") else f"{name} ({kind})"


def _same_kind_error(err, message):
    """``err``'s class with a new message; its base class when that class cannot take one
    (NumPy's ``_UFuncNoLoopError`` wants the ufunc and dtypes, not a message)."""
    try:
        return type(err)(message)
    except Exception:
        for base in (ValueError, TypeError, IndexError):
            if isinstance(err, base):
                return base(message)
        raise


def count_call(prim, device, seconds):
    """Add one call to ``prim``'s statistics (and list it in the placement report)."""
    if not prim.calls:
        _list_ran(prim)
    prim.calls += 1
    prim.device_used = device
    prim.forward_time += seconds


def _list_ran(prim):
    """List ``prim`` in the placement report at its first call."""
    if not prim._op_id:
        prim._op_id = next(_op_ids)
    _ran[prim._op_id] = prim


def _as_array(out, device):
    if device.xp is np and type(out) is not np.ndarray:
        return np.asarray(out)
    return out


def _constant(x, ref_dtype, device):
    """A Python number, list or array used as a primitive input, as an array on ``device``."""
    if x is None:
        return None
    if isinstance(x, (bool, int, float)):
        if ref_dtype is None:
            dtype = dtypes.bool_ if isinstance(x, bool) else dtypes.int64 if isinstance(x, int) \
                else dtypes.DEFAULT_FLOAT
        elif isinstance(x, float) and ref_dtype.kind != "f":
            dtype = dtypes.DEFAULT_FLOAT    # int tensor * 0.5 is a float32 result
        elif not isinstance(x, bool) and ref_dtype.kind == "b":
            dtype = dtypes.int64
        else:
            dtype = ref_dtype               # Python numbers do not widen a tensor's dtype
        return device.xp.asarray(x, dtype=dtype)
    if device.xp is not np and hasattr(x, "__cuda_array_interface__"):
        return x
    array = _host_array(x, None)
    return array if device.is_host else device.copy_from(array, get_device("CPU"))


def primitives_that_ran():
    return list(_ran.values())
