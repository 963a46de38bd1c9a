"""Fused multi-tensor dense updates: one C++ call per parameter group (issue 29).

``Optimizer.apply_gradients`` first hands the parameters that qualify to the optimizer's
``_fused_update(params, grads, states, lr, weight_decay, step)``, one call per group and
dtype; the C++ kernels (``cpp/multi_optim.cpp``: ``multi_sgd``, ``multi_adam``) update every
array of the call in place in one pass each, with no temporaries. The rest (sparse
gradients, float16, parameters updated elsewhere than where they live, optimizer parallel)
goes through ``_apply_one`` as before. The per-parameter NumPy path is the twin: both do
the same float operations in the same order, so they give the same bits
(``python_tests/test_fused_optim.py`` checks every option).

A parameter qualifies when it and its gradient are C-contiguous float32/float64 NumPy arrays
of one dtype on the host, updated where they live, and the optimizer's class keeps the
``_apply_one`` and ``_update`` of the class that defines its fused kernel (a subclass that
changes the rule, such as SINGA's momentum start, is updated one parameter at a time).
Without the C++ extension (or with ``MINITORCH_DIST_NO_CPP=1``) nothing is fused.
"""
import weakref
from time import perf_counter

import numpy as np

from ... import kernels
from ...kernels import native
from ...placement import UpdateCounts, record_updates
from ...tensor import Tensor

__all__ = ["apply_fused", "native_kernels"]

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ndarray = np.ndarray
_eligible_classes = weakref.WeakKeyDictionary()
_plans = weakref.WeakKeyDictionary()      # optimizer -> its _Plan


def native_kernels():
    """The C++ module holding ``multi_sgd``/``multi_adam``, or None (not built, disabled by
    ``MINITORCH_DIST_NO_CPP=1``, or an extension built before these kernels)."""
    c = native._C if kernels.HAVE_CPP else None
    return c if c is not None and hasattr(c, "multi_sgd") else None


def _class_fusable(cls):
    """Whether ``cls`` updates with the rule its fused kernel implements (cached per class)."""
    ok = _eligible_classes.get(cls)
    if ok is None:
        owner = getattr(cls, "_fused_owner", None)
        ok = owner is not None and all(getattr(cls, name) is getattr(owner, name)
                                       for name in ("_apply_one", "_update", "_gradient_on"))
        _eligible_classes[cls] = ok
    return ok


def apply_fused(opt, gradients, rates, step):
    """Update every qualifying parameter of ``opt`` with the fused kernels; returns the set
    of the indices it updated (empty when nothing qualified). The parameter side is checked
    once into a ``_Plan``; each step checks only that plan's arrays are still the same
    objects, and the gradients, which are new every step."""
    if native_kernels() is None or not _class_fusable(type(opt)) or not opt._fused_ready():
        return ()
    own = opt.__dict__
    if "_apply_one" in own or "_update" in own or "_gradient_on" in own:
        return ()           # replaced on this instance (a test's spy, a wrapper): respect it
    target = opt._target_device
    if target is not None and not target.is_host:
        return ()           # host parameters are updated on the device target
    plan = _plans.get(opt)
    if plan is None or not plan.holds(opt):
        plan = _plans[opt] = _Plan(opt)
    done = set()
    for key, (indices, tensors, state_tensors, devices) in plan.batches.items():
        group, dtype = key
        params = []         # the plan checked these very arrays (loops: no frame apiece)
        for t in tensors:
            params.append(t.data)
        states = []
        for column in state_tensors:
            states.append([t.data for t in column])
        grads = []
        for i, device in zip(indices, devices):
            grad = gradients[i]
            g = grad.data if type(grad) is Tensor and grad.device is device else grad
            if type(g) is not _ndarray or g.dtype != dtype or not g.flags.c_contiguous:
                break
            grads.append(g)
        else:
            plan.counts[key].count(_run(opt, params, grads, states, rates[group], group, step))
            done.update(indices)
            continue
        kept = _qualifying(gradients, indices, devices, dtype)   # None or an odd gradient
        if kept:
            some, grads = [indices[k] for k, _ in kept], [g for _, g in kept]
            seconds = _run(opt, [params[k] for k, _ in kept], grads,
                           [[column[k] for k, _ in kept] for column in states], rates[group],
                           group, step)
            _record(opt, some, grads, seconds)
            done.update(some)
    return done


def _qualifying(gradients, indices, devices, dtype):
    """``(position, gradient array)`` for the members whose gradient the kernel takes."""
    kept = []
    for k, (i, device) in enumerate(zip(indices, devices)):
        grad = gradients[i]
        if grad is None:
            continue
        g = grad.data if isinstance(grad, Tensor) and grad.device is device else grad
        if type(g) is _ndarray and g.dtype == dtype and g.flags.c_contiguous:
            kept.append((k, g))
    return kept


def _run(opt, params, grads, states, lr, group, step):
    """One fused update of ``params``; returns the seconds it took."""
    start = perf_counter()
    opt._fused_update(params, grads, states, lr, opt._group_wds[group], step)
    return perf_counter() - start


class _Plan:
    """``apply_fused``'s parameter-side checks, made once: the parameters that qualify
    (C-contiguous float32/float64 host arrays, updated where they live, with every state
    array alike), batched by (group, dtype). It holds while the optimizer's parameter tuple,
    target and state columns are the same objects, and so is every parameter's and state's
    array and device, and every parameter's name (``set_data``, a moved state, a new state
    column or a renamed parameter makes a new plan). Each batch counts its calls for the
    placement report (``counts``: one row per parameter, named as when the plan was made).
    It refers to the arrays weakly: an array a parameter dropped is not kept alive here."""

    def __init__(self, opt):
        self.parameters, self.target = opt.parameters, opt._target_device
        self.columns = list(opt._slots.values())
        self.watched = []       # (tensor, weak ref to its array, its device, its name)
        self.batches = {}       # (group, dtype) -> (indices, params, state columns, devices)
        for i, param in enumerate(self.parameters):
            self._add(i, param, opt._group_of[i])
        owner = type(opt).__name__
        self.counts = {key: UpdateCounts([f"{owner}.{p.name}" for p in params], devices,
                                         [p.data.nbytes for p in params])
                       for key, (_, params, _, devices) in self.batches.items()}

    def _add(self, i, param, group):
        device, data = param.device, param.data
        self.watched.append((param, _weak(data), device, param.name))
        target, dtype = self.target, data.dtype
        if type(data) is not _ndarray or not device.is_host or \
                (target is not None and target is not device) or dtype not in _DTYPES or \
                not data.flags.c_contiguous:
            return
        states = []
        for column in self.columns:
            state = column[i]
            s = state.data
            self.watched.append((state, _weak(s), state.device, _UNNAMED))
            if state.device is not device or type(s) is not _ndarray or s.dtype != dtype or \
                    s.shape != data.shape or not s.flags.c_contiguous:
                return      # a state elsewhere or sliced: the per-parameter path moves it
            states.append(state)
        batch = self.batches.get((group, dtype))
        if batch is None:
            batch = self.batches[(group, dtype)] = ([], [], [[] for _ in self.columns], [])
        batch[0].append(i)
        batch[1].append(param)
        for column, s in zip(batch[2], states):
            column.append(s)
        batch[3].append(device)

    def holds(self, opt):
        if opt.parameters is not self.parameters or opt._target_device is not self.target:
            return False
        columns = opt._slots.values()
        if len(columns) != len(self.columns) or \
                any(a is not b for a, b in zip(columns, self.columns)):
            return False
        for tensor, array, device, name in self.watched:
            if tensor.data is not array() or tensor.device is not device or \
                    (name is not _UNNAMED and tensor.name != name):
                return False
        return True


_UNNAMED = object()     # a state's entry in _Plan.watched: its name is not reported


def _weak(array):
    """A weak reference to ``array``, or for a type without them (never one the kernels take)
    a callable that returns it."""
    try:
        return weakref.ref(array)
    except TypeError:
        return lambda: array


def _record(opt, indices, grads, seconds):
    """One placement-report row per parameter of a call on some members of a batch only (the
    others' gradients are odd ones), the call's time shared by gradient bytes."""
    nbytes = []         # loops, not comprehensions: no frame of their own
    for g in grads:
        nbytes.append(g.nbytes)
    total = sum(nbytes) or 1
    owner = type(opt).__name__
    params = opt.parameters
    rows = []
    for i, n in zip(indices, nbytes):
        param = params[i]
        rows.append((f"{owner}.{param.name}", param.device, seconds * n / total, n))
    record_updates(rows)
