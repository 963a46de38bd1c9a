"""Optimizer: the base class that owns parameters, learning rates, state and the update loop.

An optimizer is a Cell. Its step counter (``global_step``) and per-parameter state (momentum
buffers, Adam moments) are Parameters registered on it, so a checkpoint of a training cell
that holds the optimizer includes them. The network's own parameters are *not* registered
on the optimizer (they belong to the network); they are listed in ``optimizer.parameters``.
"""
import math
import weakref
from time import perf_counter

import numpy as np  # host scalars only (the step counter); update math uses the device's xp

from ... import kernels
from ...backend import VALID_TARGETS, get_device
from ...kernels._checks import bad_id_error
from ...offload import offload_on
from ...placement import gradient_nbytes, record_update
from ...row_tensor import RowTensor
from ...tensor import Tensor
from ..cell import Cell
from ..parameter import Parameter, ParameterTuple
from .fused import apply_fused
from .schedules import LearningRateSchedule
from .state_slicing import GradientPiece, slice_plan

__all__ = ["Optimizer", "optimizers_holding"]

_live = weakref.WeakSet()     # every optimizer alive, for ``optimizers_holding``


def optimizers_holding(param):
    """The live optimizers that update ``param``: when a parallel layer gives a parameter
    a new shape (a slice), their state for it must follow."""
    return [opt for opt in list(_live) if id(param) in opt._index_of]

_GROUP_KEYS = ("params", "lr", "weight_decay")


class Optimizer(Cell):
    """Base class of optimizers (MindSpore signature and semantics).

    * ``parameters``: an iterable of Parameters, or MindSpore group dicts such as
      ``[{'params': decayed, 'weight_decay': 0.01}, {'params': others, 'lr': 0.1},
      {'order_params': net.trainable_params()}]`` (keys ``params``, ``lr``,
      ``weight_decay``; ``order_params`` fixes the order of ``.parameters``).
    * ``learning_rate``: a float, a list of per-step floats (step ``s`` uses entry
      ``min(s, len - 1)``) or a ``LearningRateSchedule`` called with the global step.
    * ``weight_decay``: L2 coefficient (decoupled in ``AdamWeightDecay``/``AdamW``).
    * ``loss_scale``: gradients are divided by it before use.

    ``optimizer(grads)`` applies one step to every parameter (``grads`` aligned with
    ``optimizer.parameters``, e.g. from ``ms.value_and_grad(fn, None, opt.parameters)``),
    then adds one to ``global_step``. The pieces are public for wrappers that update one
    parameter at a time (SINGA-style ``DistOpt``): ``update(param_or_index, grad)`` applies
    one parameter's update at the current step, ``step()`` advances the step counter, and
    ``apply_gradients(grads)`` is both for a whole tuple. A gradient may be a Tensor, an array
    on the parameter's device, a ``RowTensor`` (sparse rows) or None (parameter left as is).

    ``target`` ("CPU" or "GPU") says where updates run; by default each parameter is updated
    where it lives. A parameter living elsewhere is copied to the target with its gradient,
    updated there and copied back (counted in ``ms.transfer_stats()``); state stays on the target.

    Subclasses implement ``_apply_one(i, param, grad, lr, weight_decay, step, device)``, which
    updates the array ``param`` in place on ``device`` (use ``device.xp``), with ``grad`` an
    array on ``device`` (a ``RowTensor`` there if the class sets ``supports_sparse``).
    ``step`` counts from 0. State comes from ``self._slot(name, i, device)`` for slots made with
    ``self._add_slots(name)``; scratch arrays from ``self._scratch(i, device, like, count)``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> w = ms.Parameter(ms.Tensor([1.0, 2.0]), name="w")
    >>> opt = nn.SGD([w], learning_rate=0.5)
    >>> opt((ms.Tensor([1.0, 1.0]),))
    True
    >>> w.asnumpy().tolist(), int(opt.global_step.asnumpy()[0])
    ([0.5, 1.5], 1)
    """

    supports_sparse = False   # True: _apply_one receives RowTensor gradients as they are
    _fused_owner = None       # the class whose _apply_one its _fused_update twins (fused.py)

    def _fused_ready(self):
        """Whether this instance's options allow the fused dense update (fused.py)."""
        return True

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__(auto_prefix=False)   # as MindSpore's: its state keeps its names
        owner = type(self).__name__
        self.learning_rate = _lr_source(owner, learning_rate, "learning_rate")
        self.weight_decay = non_negative(owner, "weight_decay", weight_decay)
        self.loss_scale = positive(owner, "loss_scale", loss_scale)
        self._inv_scale = 1.0 / self.loss_scale
        params, self._group_of, self._group_lrs, self._group_wds, has_group_lr = \
            _parse_groups(owner, parameters, self.learning_rate, self.weight_decay)
        self.parameters = ParameterTuple(params)
        self.is_group = len(self._group_lrs) > 1
        self.is_group_lr = has_group_lr
        self.dynamic_lr = any(not isinstance(lr, float) for lr in self._group_lrs)
        self.global_step = Parameter(np.zeros(1, np.int32), name="global_step",
                                     requires_grad=False, device="CPU")
        self._index_of = {id(p): i for i, p in enumerate(params)}
        self._slot_keys = _unique_keys(params)
        self._slots = {}
        self._buffers = {}
        self._target = None
        self._target_device = None
        _live.add(self)

    # ---- placement --------------------------------------------------------------------
    @property
    def target(self):
        """Where updates run: "CPU" or "GPU" (unset: where the parameters live)."""
        if self._target is not None:
            return self._target
        return "CPU" if self.parameters[0].device.is_host else "GPU"

    @target.setter
    def target(self, value):
        owner = type(self).__name__
        if not isinstance(value, str):
            raise TypeError(f"{owner}: target must be a string, one of {list(VALID_TARGETS)}, "
                            f"got {type(value).__name__}")
        name = value.strip().upper()
        if name not in VALID_TARGETS:
            raise ValueError(f"{owner}: target must be one of {list(VALID_TARGETS)}, got {value!r}")
        self._target_device = get_device(name)   # fails clearly when no GPU is available
        self._target = name
        self._buffers.clear()
        for slots in self._slots.values():
            for i, state in enumerate(slots):
                _move(state, self._update_device(self.parameters[i]))

    def _update_device(self, param):
        if self._target_device is None and not param.device.is_host and offload_on("states"):
            return get_device("CPU")     # memory_offload="ON": the state waits on the host
        target = self._target_device
        if target is None or (not target.is_host and not param.device.is_host):
            return param.device
        return target

    # ---- state ------------------------------------------------------------------------
    def update_parameters_name(self, prefix="", recurse=True):
        """A parent renames only the optimizer's own Parameters (``global_step``, ...): as in
        MindSpore, whose optimizer keeps its moments in ParameterTuples that a renaming does
        not reach, the state stays named ``<slot>.<parameter name>``."""
        if not isinstance(prefix, str):
            raise TypeError(f"update_parameters_name: prefix must be a str, got {prefix!r}")
        for name, param in self._params.items():
            param.name = prefix + name

    def _add_slots(self, name):
        """Zero state shaped like every parameter, registered as ``<name>.<param name>``."""
        store = _SlotStore()
        slots = []
        for key, param in zip(self._slot_keys, self.parameters):
            dev = self._update_device(param)
            zeros = Tensor._make(dev.xp.zeros(param.shape, param.dtype), dev)
            state = Parameter(zeros, name=f"{name}.{key}", requires_grad=False)
            state.slot_of = param       # checkpoints follow the parameter (pipeline stages)
            if getattr(param, "row_slice", None) is not None:   # a row-sliced table's state
                state.row_slice = param.row_slice               # holds the same rows
            setattr(store, key, state)
            slots.append(state)
        object.__setattr__(store, "_order", slots)
        setattr(self, name, store)
        self._slots[name] = slots
        return store

    def states_of(self, param):
        """This optimizer's state tensors for ``param`` (one per slot: moments, ...)."""
        i = self._index(param)
        return [slots[i] for slots in self._slots.values()]

    def _slot(self, name, i, device):
        """The array of state ``name`` for parameter ``i``, moved to ``device`` if needed."""
        state = self._slots[name][i]
        if state.device is not device:
            _move(state, device)
        return state.data

    def _scratch(self, i, device, like, count):
        """``count`` reusable arrays shaped like ``like`` (contents undefined)."""
        bufs = self._buffers.get(i)
        if bufs is None or len(bufs) < count or bufs[0].shape != like.shape \
                or bufs[0].dtype != like.dtype or type(bufs[0]) is not type(like):
            bufs = tuple(device.xp.empty(like.shape, like.dtype) for _ in range(count))
            self._buffers[i] = bufs
        return bufs

    # ---- learning rate ----------------------------------------------------------------
    def current_step(self):
        """The number of steps applied so far (the value of ``global_step``)."""
        return int(self.global_step.data[0])

    def get_lr(self):
        """The learning rate of the current step: a float, or a tuple with one per parameter
        when groups set their own ``lr``."""
        step = self.current_step()
        if not self.is_group_lr:
            return _lr_at(self._group_lrs[0], step)
        rates = [_lr_at(lr, step) for lr in self._group_lrs]
        return tuple(rates[g] for g in self._group_of)

    def get_lr_parameter(self, param):
        """The learning rate that ``param`` (a Parameter or an index) gets at the current step."""
        return _lr_at(self._group_lrs[self._group_of[self._index(param)]], self.current_step())

    # ---- updating ---------------------------------------------------------------------
    def construct(self, gradients):
        return self.apply_gradients(gradients)

    def apply_gradients(self, gradients):
        """Update every parameter with its gradient, then advance ``global_step``; returns True."""
        self._check_gradients(gradients)
        plan = self._update_each(gradients)
        if plan is not None:
            plan.flush()     # optimizer parallel: the updated slices gathered whole
        self.global_step.data += 1
        return True

    def update_many(self, gradients):
        """One ``update`` per parameter whose gradient (aligned with ``parameters``) is not
        None, the dense host ones fused into one C++ call per group (``fused.py``); the step
        counter does not move (call ``step()``). DistOpt updates each bucket this way."""
        self._check_gradients(gradients)
        self._update_each(gradients)

    def _update_each(self, gradients):
        """Update each parameter with a gradient; returns the slice plan to flush, or None."""
        step = self.current_step()
        rates = [_lr_at(lr, step) for lr in self._group_lrs]
        decays, group_of = self._group_wds, self._group_of
        plan = slice_plan(self)
        fused = apply_fused(self, gradients, rates, step) if plan is None else ()
        for i, (param, grad) in enumerate(zip(self.parameters, gradients)):
            if grad is not None and i not in fused:
                g = group_of[i]
                piece = None if plan is None else plan[i]
                self._update(i, param, grad, rates[g], decays[g], step, piece)
        return plan

    def update(self, param, grad):
        """Apply the current step's update to one parameter (a Parameter or its index).
        The step counter does not move: call ``step()`` once all parameters are updated."""
        i = self._index(param)
        if grad is None:
            return
        self._check_gradient(i, self.parameters[i], grad)
        g, step = self._group_of[i], self.current_step()
        plan = slice_plan(self)
        self._update(i, self.parameters[i], grad, _lr_at(self._group_lrs[g], step),
                     self._group_wds[g], step, None if plan is None else plan[i])

    def step(self):
        """Advance ``global_step`` by one (after per-parameter ``update`` calls)."""
        plan = slice_plan(self)
        if plan is not None:
            plan.flush()
        self.global_step.data += 1

    def _update(self, i, param, grad, lr, weight_decay, step, piece=None):
        start = perf_counter()
        if piece is not None:
            self._update_slice(i, param, grad, lr, weight_decay, step, piece)
            record_update(f"{type(self).__name__}.{param.name}", param.device,
                          perf_counter() - start, gradient_nbytes(grad))
            return
        device = self._update_device(param)
        g = self._gradient_on(grad, param, device)
        if param.device is device:
            self._apply_one(i, param.data, g, lr, weight_decay, step, device)
        else:   # update on the target, then write the result back where the parameter lives
            work = device.copy_from(param.data, param.device)
            self._apply_one(i, work, g, lr, weight_decay, step, device)
            param.data[...] = param.device.copy_from(work, device)
        # the placement report lists each update with the device it ran on
        record_update(f"{type(self).__name__}.{param.name}", device, perf_counter() - start,
                      gradient_nbytes(grad))

    def _update_slice(self, i, param, grad, lr, weight_decay, step, piece):
        """Optimizer parallel (``state_slicing``): update only this rank's flat slice of
        ``param``, with state kept for that slice, then let ``piece.finish`` gather the
        whole parameter from every rank's slice."""
        device = param.device
        xp = device.xp
        if piece.read is not None:      # a weight kept sliced between steps: its own piece
            work = piece.read(param)
        else:
            work = param.data.reshape(-1)[piece.start:piece.stop]
            if not xp.shares_memory(work, param.data):   # a non-contiguous parameter: a copy
                work = work.copy()
        if isinstance(grad, GradientPiece):
            if (grad.start, grad.stop) != (piece.start, piece.stop):
                raise ValueError(f"{type(self).__name__}: the gradient of {param.name!r} holds "
                                 f"elements [{grad.start}:{grad.stop}], but this rank updates "
                                 f"[{piece.start}:{piece.stop}]")
            g = grad.values if grad.device in (None, device) else \
                device.copy_from(grad.values, grad.device)
        else:
            g = self._gradient_on(grad, param, device)
            if isinstance(g, RowTensor):
                g = g.to_dense().data
            g = g.reshape(-1)[piece.start:piece.stop]
        self._slice_states(i, piece, device)
        if piece.size:
            self._apply_one(i, work, g, lr, weight_decay, step, device)
        piece.finish(param, work)

    def _slice_states(self, i, piece, device):
        """Cut parameter ``i``'s state to the slice (once: later steps find it cut)."""
        for slots in self._slots.values():
            state = slots[i]
            if state.data.ndim == 1 and state.data.shape[0] == piece.size and \
                    getattr(state, "state_slice", None) == (piece.start, piece.stop):
                continue
            if state.device is not device:
                _move(state, device)
            state.data = state.data.reshape(-1)[piece.start:piece.stop].copy()
            state.state_slice = (piece.start, piece.stop)

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        raise NotImplementedError(f"{type(self).__name__} must define _apply_one")

    def _gradient_on(self, grad, param, device):
        if isinstance(grad, Tensor):
            return grad.data if grad.device is device else device.copy_from(grad.data, grad.device)
        if isinstance(grad, RowTensor):
            if grad.values.device is not device or grad.indices.device is not device:
                grad = RowTensor(_tensor_on(grad.indices, device), _tensor_on(grad.values, device),
                                 grad.dense_shape)
            return grad if self.supports_sparse else grad.to_dense().data
        return grad if param.device is device else device.copy_from(grad, param.device)

    # ---- checks -----------------------------------------------------------------------
    def _index(self, param):
        if isinstance(param, (int, np.integer)) and not isinstance(param, bool):
            if not 0 <= param < len(self.parameters):
                raise ValueError(f"{type(self).__name__}: parameter index {param} out of range "
                                 f"for {len(self.parameters)} parameters")
            return int(param)
        i = self._index_of.get(id(param))
        if i is None:
            raise ValueError(f"{type(self).__name__}: {param!r} is not one of this optimizer's parameters")
        return i

    def _check_gradients(self, gradients):
        owner = type(self).__name__
        if not isinstance(gradients, (tuple, list)):
            raise TypeError(f"{owner} expects a tuple of gradients (one per entry of "
                            f"optimizer.parameters), got {type(gradients).__name__}")
        if len(gradients) != len(self.parameters):
            raise ValueError(f"{owner}: got {len(gradients)} gradients for {len(self.parameters)} "
                             "parameters; pass one per entry of optimizer.parameters, e.g. from "
                             "ms.value_and_grad(fn, None, optimizer.parameters)")
        for i, (param, grad) in enumerate(zip(self.parameters, gradients)):
            if grad is None:
                continue
            # Tensor.shape is its array's: read there, without a property call per tensor
            shape = grad.data.shape if type(grad) is Tensor else getattr(grad, "shape", None)
            if shape != param.data.shape:
                self._check_gradient(i, param, grad)

    def _check_gradient(self, i, param, grad):
        owner = type(self).__name__
        shape = getattr(grad, "shape", None)
        if shape is None:
            raise TypeError(f"{owner}: gradient {i} (for parameter {param.name!r}) must be a Tensor, "
                            f"a RowTensor or an array, got {type(grad).__name__}")
        if tuple(shape) != param.shape:
            raise ValueError(f"{owner}: gradient {i} has shape {tuple(shape)} but parameter {i} "
                             f"({param.name!r}) has shape {param.shape}")

    def extra_repr(self):
        lr = self.learning_rate
        lr = type(lr).__name__ if isinstance(lr, LearningRateSchedule) else \
            (f"[{len(lr)} per-step values]" if isinstance(lr, tuple) else lr)
        return (f"learning_rate={lr}, parameters={len(self.parameters)}, "
                f"weight_decay={self.weight_decay}, target={self.target}")


class _SlotStore(Cell):
    """One state Parameter per optimized parameter, keyed by the parameter's name."""

    def __getitem__(self, i):
        return self._order[i]

    def __len__(self):
        return len(self._order)

    def __iter__(self):
        return iter(self._order)


# ---- helpers shared by the optimizers -------------------------------------------------------
def non_negative(owner, name, value):
    """``value`` as a float, or ValueError naming the argument when it is negative."""
    value = _as_float(owner, name, value)
    if not value >= 0:
        raise ValueError(f"{owner}: {name} must be >= 0, got {value!r}")
    return value


def positive(owner, name, value):
    value = _as_float(owner, name, value)
    if not value > 0:
        raise ValueError(f"{owner}: {name} must be > 0, got {value!r}")
    return value


def unit_interval(owner, name, value):
    """A beta: a float in [0, 1)."""
    value = _as_float(owner, name, value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1), got {value!r}")
    return value


def effective_gradient(xp, param, grad, out, tmp, weight_decay, inv_scale):
    """``grad * inv_scale + weight_decay * param``, written to ``out`` (``grad`` itself if
    there is nothing to add or scale)."""
    if inv_scale == 1.0 and not weight_decay:
        return grad
    xp.multiply(grad, inv_scale, out=out)
    if weight_decay:
        xp.multiply(param, weight_decay, out=tmp)
        out += tmp
    return out


# ---- sparse (RowTensor) updates -------------------------------------------------------------
def row_gradient(grad, param, inv_scale):
    """``(ids, values)`` of a RowTensor gradient for a row update of the array ``param``:
    values in param's dtype and already divided by the loss scale (before duplicates merge,
    so the host kernels and the array-module path sum the same numbers)."""
    values = grad.values.data
    if values.dtype != param.dtype:
        values = values.astype(param.dtype)
    if inv_scale != 1.0:
        values = values * inv_scale
    return grad.indices.data, values


def merge_rows(xp, param, ids, values):
    """Sorted distinct ``ids`` and ``values`` summed per id, with the array module ``xp``
    (what a device runs; the host kernels merge on their own). Ids outside the table raise
    the same IndexError as the host kernels.

    >>> import numpy as np
    >>> rows, summed = merge_rows(np, np.zeros((5, 1)), np.array([3, 1, 3]),
    ...                           np.array([[1.0], [2.0], [4.0]]))
    >>> rows.tolist(), summed.ravel().tolist()
    ([1, 3], [2.0, 5.0])
    """
    n = param.shape[0]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise bad_id_error(bad, n)
    rows, inverse = xp.unique(ids, return_inverse=True)
    merged = xp.zeros((rows.shape[0],) + tuple(values.shape[1:]), values.dtype)
    xp.add.at(merged, inverse.reshape(-1), values)
    return rows, merged


def update_rows(xp, param, states, ids, values, weight_decay, update):
    """A sparse step through the array module (the device path; the host kernels do the
    same fused): merge duplicate ``ids``, gather those rows of ``param`` and of its
    ``states``, add the weight decay, ``update(w, state_rows, g)`` them in place, and write
    them back. Every other row stays untouched."""
    rows, g = merge_rows(xp, param, ids, values)
    w = param[rows]
    state_rows = [state[rows] for state in states]
    if weight_decay:
        g = g + weight_decay * w
    update(w, state_rows, g)
    param[rows] = w
    for state, values_of_rows in zip(states, state_rows):
        state[rows] = values_of_rows


def host_kernel(device, param, name):
    """The fused host kernel ``minitorch_dist.kernels.<name>`` (C++ when built, else its
    NumPy twin) when ``param`` is a float32/float64 array on the host, else None."""
    if not device.is_host or param.dtype not in _KERNEL_DTYPES:
        return None
    return getattr(kernels, name)


_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _as_float(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    if math.isinf(value):
        raise ValueError(f"{owner}: {name} must be finite, got {value!r}")
    return value


def _lr_source(owner, value, name):
    """A learning rate as a float, a tuple of per-step floats, or a LearningRateSchedule."""
    if isinstance(value, LearningRateSchedule):
        return value
    if isinstance(value, Tensor):
        value = value.asnumpy()
        value = value.item() if value.ndim == 0 else value.reshape(-1).tolist()
    elif isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{owner}: {name} is an empty list; give at least one value")
        return tuple(non_negative(owner, f"{name}[{k}]", v) for k, v in enumerate(value))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}: {name} must be a float, a list of per-step floats or a "
                        f"LearningRateSchedule, got {type(value).__name__}")
    return non_negative(owner, name, value)


def _lr_at(source, step):
    if isinstance(source, float):
        return source
    if isinstance(source, tuple):
        return source[min(step, len(source) - 1)]
    return source.lr_at(step)


def _parse_groups(owner, parameters, learning_rate, weight_decay):
    """(params, group of each param, lr per group, weight decay per group, any group lr)."""
    if isinstance(parameters, (Parameter, dict)):
        parameters = [parameters]
    try:
        items = list(parameters)
    except TypeError:
        raise TypeError(f"{owner}: parameters must be a list of Parameters or of group dicts, "
                        f"got {type(parameters).__name__}") from None
    if not items:
        raise ValueError(f"{owner}: the parameter list is empty; pass e.g. net.trainable_params()")
    is_dict = [isinstance(item, dict) for item in items]
    if any(is_dict) and not all(is_dict):
        raise TypeError(f"{owner}: parameters mixes group dicts and Parameters; use one or the other")
    groups = items if all(is_dict) else [{"params": items}]
    params, group_of, rates, decays, order, seen = [], [], [], [], None, {}
    has_group_lr = False
    for k, group in enumerate(groups):
        if "order_params" in group:
            if len(group) != 1:
                raise ValueError(f"{owner}: an 'order_params' entry must be a dict of its own")
            order = list(group["order_params"])
            continue
        unknown = sorted(set(group) - set(_GROUP_KEYS))
        if unknown or "params" not in group:
            raise ValueError(f"{owner}: parameter group {k} must have key 'params' and may have "
                             f"{list(_GROUP_KEYS[1:])}; got keys {sorted(group)}")
        has_group_lr |= "lr" in group
        rates.append(_lr_source(owner, group["lr"], f"lr of group {k}") if "lr" in group else learning_rate)
        decays.append(non_negative(owner, f"weight_decay of group {k}", group["weight_decay"])
                      if "weight_decay" in group else weight_decay)
        members = group["params"]
        for p in [members] if isinstance(members, Parameter) else members:
            if not isinstance(p, Parameter):
                raise TypeError(f"{owner}: parameters must be Parameters, got {type(p).__name__}")
            if id(p) in seen:
                raise ValueError(f"{owner}: parameter {p.name!r} appears more than once")
            seen[id(p)] = len(params)
            params.append(p)
            group_of.append(len(rates) - 1)
    if not params:
        raise ValueError(f"{owner}: the parameter groups hold no parameters")
    if order is not None:
        picks = [seen.get(id(p)) for p in order]
        if None in picks or len(set(picks)) != len(params) or len(picks) != len(params):
            raise ValueError(f"{owner}: 'order_params' must list every grouped parameter exactly once")
        params, group_of = [params[k] for k in picks], [group_of[k] for k in picks]
    return params, group_of, rates, decays, has_group_lr


def _unique_keys(params):
    """Names for state slots: the parameter names, made unique (unnamed ones get ``param<i>``)."""
    keys, used = [], set()
    for i, p in enumerate(params):
        key = p.name or f"param{i}"
        while key in used:
            key = f"{key}_{i}"
        used.add(key)
        keys.append(key)
    return keys


def _move(state, device):
    if state.device is not device:
        state.data = device.copy_from(state.data, state.device)
        state.device = device


def _tensor_on(tensor, device):
    if tensor.device is device:
        return tensor
    return Tensor._make(device.copy_from(tensor.data, tensor.device), device)
