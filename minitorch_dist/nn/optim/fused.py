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
from ...placement import record_update
from ...tensor import Tensor

__all__ = ["apply_fused", "native_kernels"]

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ndarray = np.ndarray
_eligible_classes = weakref.WeakKeyDictionary()


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
    of the indices it updated (empty when nothing qualified). One flat pass over the
    parameters: this runs every step, so it calls no helper per parameter."""
    if native_kernels() is None or not _class_fusable(type(opt)) or not opt._fused_ready():
        return ()
    own = opt.__dict__
    if "_apply_one" in own or "_update" in own or "_gradient_on" in own:
        return ()           # replaced on this instance (a test's spy, a wrapper): respect it
    target = opt._target_device
    if target is not None and not target.is_host:
        return ()           # host parameters are updated on the device target
    slots = list(opt._slots.values())
    group_of = opt._group_of
    batches = {}
    for i, (param, grad) in enumerate(zip(opt.parameters, gradients)):
        if grad is None:
            continue
        device, data = param.device, param.data
        if type(data) is not _ndarray or not device.is_host or \
                (target is not None and target is not device):
            continue
        g = grad.data if isinstance(grad, Tensor) and grad.device is device else grad
        dtype = data.dtype
        if type(g) is not _ndarray or g.dtype != dtype or dtype not in _DTYPES or \
                not data.flags.c_contiguous or not g.flags.c_contiguous:
            continue
        states = []
        for column in slots:
            state = column[i]
            s = state.data
            if state.device is not device or type(s) is not _ndarray or s.dtype != dtype or \
                    s.shape != data.shape or not s.flags.c_contiguous:
                break       # a state elsewhere or sliced: the per-parameter path moves it
            states.append(s)
        else:
            key = (group_of[i], dtype)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = ([], [], [], [[] for _ in slots])
            batch[0].append(i)
            batch[1].append(data)
            batch[2].append(g)
            for column, s in zip(batch[3], states):
                column.append(s)
    done = set()
    for (group, _), (indices, params, grads, states) in batches.items():
        start = perf_counter()
        opt._fused_update(params, grads, states, rates[group], opt._group_wds[group], step)
        _record(opt, indices, grads, perf_counter() - start)
        done.update(indices)
    return done


def _record(opt, indices, grads, seconds):
    """One placement-report row per parameter, the call's time shared by gradient bytes."""
    total = sum(g.nbytes for g in grads) or 1
    owner = type(opt).__name__
    for i, g in zip(indices, grads):
        record_update(f"{owner}.{opt.parameters[i].name}", opt.parameters[i].device,
                      seconds * g.nbytes / total, g.nbytes)
