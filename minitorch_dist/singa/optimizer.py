"""SINGA's optimizers: ``Optimizer``, ``SGD``, ``Adam``, ``RMSProp``, ``AdaGrad``.

``minitorch_dist.singa.opt`` gives them with ``DistOpt`` and the schedules; its docstring
says how a SINGA optimizer binds to a model and which rule each one applies. Each drives a
core optimizer (``nn.SGD`` with SINGA's momentum start, or a rule of ``opt_adaptive``).
"""
import numpy as np

from ..nn.optim.schedules import LearningRateSchedule
from ..nn.optim.sgd import SGD as CoreSGD
from ..parallel.data_parallel.grad_arrays import gradient_array
from ..tensor import Tensor as CoreTensor
from . import tape as _tape
from . import tensor as _tensor
from .opt_adaptive import AdaGradRule, AdamRule, RMSPropRule
from .unsupported import not_supported

__all__ = ["Optimizer", "SGD", "Adam", "RMSProp", "AdaGrad"]


def _number(value, call, name):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not value >= 0 or not np.isfinite(value):
        raise ValueError(f"{call}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


# ---- the core optimizer with SINGA's momentum start ---------------------------------------
class _SingaRuleSGD(CoreSGD):
    """The core SGD, except that the momentum buffer starts at zero on the first step
    (SINGA) instead of at the gradient (PyTorch); the two differ only when dampening != 0."""

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        super()._apply_one(i, param, grad, lr, weight_decay, max(step, 1), device)

    def _fused_update(self, params, grads, states, lr, weight_decay, step):
        super()._fused_update(params, grads, states, lr, weight_decay, max(step, 1))


_SingaRuleSGD._fused_owner = _SingaRuleSGD     # the same rule, fused (nn/optim/fused.py)


def _tape_gradients(loss, params, call, scale=1.0):
    """``params`` (the optimizer's Parameters) and their gradient arrays for ``loss``, read
    from the tape the SINGA way; every trainable leaf the loss depends on must be one of
    ``params`` (a layer reached through a list or a closure is found on the tape, so bind
    to the tape, not only to a model's attributes)."""
    _tape.check_loss(loss, f"{call}(loss)")
    found = _tape.parameters_in_order(loss)
    mine = {id(p): p for p in params}
    targets, owners = [], []
    for t in found:
        param = _tape.as_parameter(t)
        if id(param) not in mine:
            raise RuntimeError(f"{call}(loss): the loss depends on a trainable tensor "
                               f"{getattr(param, 'name', None)!r} {tuple(param.shape)} that this "
                               "optimizer was not bound to (it binds once, to the parameters "
                               "of the first loss or of model.compile); use one optimizer "
                               "per set of parameters")
        targets.append(t)
        owners.append(param)
    seed_scale = None if scale == 1.0 else scale
    grads = _tape.gradients(loss, targets, seed_scale, f"{call}(loss)")
    by_id = {id(p): g for p, g in zip(owners, grads)}
    return [by_id.get(id(p)) for p in params], owners


def _tape_parameters(loss, call):
    """The Parameters for the trainable leaves of ``loss``'s tape, in SINGA's order."""
    _tape.check_loss(loss, f"{call}(loss)")
    return [_tape.as_parameter(t) for t in _tape.parameters_in_order(loss)]


class Optimizer:
    """What SINGA's optimizers share: the learning rate, the step counter and the binding to
    a model's parameters (``model.set_optimizer`` / ``model.compile``)."""

    _name = "opt.Optimizer"

    def __init__(self, lr, dtype=_tensor.float32):
        if isinstance(lr, LearningRateSchedule):
            self.lr = lr
        else:
            self.lr = _number(lr, self._name, "lr")
        self.dtype = _tensor.to_dtype(dtype, self._name)
        if self.dtype.kind != "f":
            raise ValueError(f"{self._name}: dtype must be a floating-point type, got {self.dtype}")
        self.core = None          # the core optimizer, once the parameters are known
        self._model = None
        self._single = {}         # id(param) -> core of one parameter updated by update()
        self._steps = 0

    # ---- binding ----------------------------------------------------------------------
    def _attach(self, model):
        self._model = model

    def _bind_to(self, model):
        self._bind(model.trainable_params())

    def _bind(self, params):
        params = list(params)
        if self.core is not None:
            if [id(p) for p in params] == [id(p) for p in self.core.parameters]:
                return
            # SINGA keys state by parameter, so a changed set (layers swapped, e.g. for
            # LoRA) is accepted: a new core keeps the step count; the state of parameters
            # that stay is carried over where the core supports it
            self.core = self._rebind(params)
            return
        if not params:
            raise RuntimeError(f"{self._name}: the model has no parameters yet; call "
                               "model.compile([tx], ...) first (layers create their "
                               "parameters at their first call)")
        self.core = self._new_core(params)

    def _new_core(self, params):
        for p in params:
            if p.dtype != self.dtype:
                raise TypeError(f"{self._name}(dtype={self.dtype}): parameter "
                                f"{p.name or tuple(p.shape)!r} is {p.dtype}; pass "
                                f"dtype=tensor.{p.dtype} to match the model (SINGA asserts "
                                "the same)")
        core = self._make_core(params)
        core.global_step.data[...] = self._steps     # schedules follow this optimizer's steps
        return core

    def _make_core(self, params):
        raise NotImplementedError(f"{self._name}: the base Optimizer updates nothing; use "
                                  "opt.SGD, Adam, RMSProp or AdaGrad")

    def _rebind(self, params):
        """A core for ``params``; parameters this optimizer already updated keep their
        state (as SINGA keeps state per parameter) through the single-parameter cores."""
        old = self.core
        for p in old.parameters:
            if not any(p is q for q in params):
                continue
            if id(p) not in self._single:
                self._single[id(p)] = (p, old)      # its state lives on in the old core
        fresh = [p for p in params if id(p) not in self._single]
        return self._new_core(fresh) if fresh else old

    def _ensure_bound(self, call, loss=None):
        if self.core is None:
            if self._model is not None:
                self._bind_to(self._model)
            elif loss is not None:         # SINGA's way: the parameters are on the loss's tape
                self._bind(_tape_parameters(loss, call))
            else:
                raise RuntimeError(f"{call}: this optimizer does not know its parameters "
                                   "yet; call it with a loss (sgd(loss)) or attach it with "
                                   "model.set_optimizer(sgd)")

    @property
    def parameters(self):
        """The parameters this optimizer is bound to."""
        if self.core is None:
            raise AttributeError(f"{self._name}.parameters: not attached to a compiled model "
                                 "yet (model.set_optimizer, then model.compile)")
        return self.core.parameters

    @property
    def step_counter(self):
        """Steps taken so far: a one-element float32 tensor, as in SINGA."""
        return _tensor.from_numpy(np.array([self._steps], np.float32))

    @property
    def lr_value(self):
        """The learning rate of the current step: a one-element float32 tensor."""
        lr = self.lr.lr_at(self._steps) if isinstance(self.lr, LearningRateSchedule) \
            else self.lr
        return _tensor.from_numpy(np.array([float(lr)], np.float32))

    # ---- SINGA's entry points ---------------------------------------------------------
    def __call__(self, loss):
        """Backward from ``loss``, update every parameter, then ``step()``."""
        self.call(loss)
        self.step()

    def call(self, loss):
        """Backward from ``loss`` and update every trainable tensor it depends on, in
        SINGA's order (no ``step()``). Without a model the parameters come from the loss's
        tape; a tensor outside the bound set gets its own state, as in SINGA."""
        self._ensure_bound(self._name, loss)
        found = _tape.parameters_in_order(loss)
        for t, g in zip(found, _tape.gradients(loss, found, call=f"{self._name}(loss)")):
            if g is not None:
                param = _tape.as_parameter(t)
                self.update(param, gradient_array(g, param, self._name))

    def backward_and_update(self, loss):
        """SINGA's deprecated alias of ``__call__``."""
        self(loss)

    def update(self, param, grad):
        """Apply the current step's update to one parameter (a trainable Tensor, or an index
        into the bound parameters). As in SINGA, any trainable tensor may be given: one this
        optimizer is not bound to gets its own state, kept until it is freed."""
        if not isinstance(param, CoreTensor):
            self._ensure_bound(f"{self._name}.update")
            self.core.update(param, grad)
            return
        param = _tape.as_parameter(param)
        if self.core is not None and any(p is param for p in self.core.parameters):
            self.core.update(param, grad)
            return
        entry = self._single.get(id(param))
        if entry is None or entry[0] is not param:
            entry = self._single[id(param)] = (param, self._new_core([param]))
        entry[1].update(param, grad)

    def update_many(self, gradients):
        """``update`` for every bound parameter at once (``gradients`` aligned with the bound
        parameters; None leaves one alone), fused where the core optimizer can (DistOpt
        updates each reduced bucket this way)."""
        self._ensure_bound(f"{self._name}.update_many")
        self.core.update_many(gradients)

    def apply(self, param_name, param_value, param_grad):
        """SINGA's ``apply(name, param, grad)``: the update of one parameter."""
        self.update(param_value, param_grad)

    def step(self):
        """Advance the step counter (the learning-rate schedule follows it)."""
        self._steps += 1
        for core in self._cores():
            core.step()

    def _cores(self):
        """Every core optimizer in use, once each."""
        cores = {}
        for core in [self.core] + [c for _, c in self._single.values()]:
            if core is not None:
                cores[id(core)] = core
        return list(cores.values())

    def get_states(self):
        """SINGA's ``{'step_counter': steps}`` (the moments stay in the optimizer; save the
        model with ``model.save_states``)."""
        return {"step_counter": float(self._steps)}

    def set_states(self, states):
        """Restore ``{'step_counter': n}``; any other key is refused (moment buffers are
        not restored here)."""
        if not isinstance(states, dict):
            raise TypeError(f"{self._name}.set_states: expected a dict, got "
                            f"{type(states).__name__}")
        unknown = sorted(set(states) - {"step_counter"})
        if unknown:
            raise not_supported(f"{self._name}.set_states({unknown})",
                                "only 'step_counter' is restored; moment buffers are not")
        if "step_counter" in states:
            value = states["step_counter"]
            value = value.asnumpy() if isinstance(value, CoreTensor) else value
            self._steps = int(np.asarray(value).reshape(-1)[0])
            for core in self._cores():
                core.global_step.data[...] = self._steps


class SGD(Optimizer):
    """SINGA's ``opt.SGD(lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
    dtype=tensor.float32)``; ``lr`` is a number or a schedule (``Constant``,
    ``ExponentialDecay`` or any ``nn.LearningRateSchedule``)."""

    _name = "opt.SGD"

    def __init__(self, lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 dtype=_tensor.float32):
        super().__init__(lr, dtype)
        self.momentum = _number(momentum, self._name, "momentum")
        self.dampening = _number(dampening, self._name, "dampening")
        self.weight_decay = _number(weight_decay, self._name, "weight_decay")
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError(f"{self._name}: nesterov=True needs momentum > 0 and dampening 0, "
                             f"got momentum={momentum!r}, dampening={dampening!r}")

    def _make_core(self, params):
        return _SingaRuleSGD(params, learning_rate=self.lr, momentum=self.momentum,
                             dampening=self.dampening, weight_decay=self.weight_decay,
                             nesterov=self.nesterov)

    def __repr__(self):
        return (f"opt.SGD(lr={self.lr}, momentum={self.momentum}, dampening={self.dampening}, "
                f"weight_decay={self.weight_decay}, nesterov={self.nesterov})")


class Adam(Optimizer):
    """SINGA's ``opt.Adam(lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0)``
    (the rule is in :mod:`minitorch_dist.singa.opt_adaptive`)."""

    _name = "opt.Adam"

    def __init__(self, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0):
        super().__init__(lr)
        for name, value in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0 <= _number(value, self._name, name) < 1:
                raise ValueError(f"{self._name}: {name} must be in [0, 1), got {value!r}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = _number(epsilon, self._name, "epsilon")
        self.weight_decay = _number(weight_decay, self._name, "weight_decay")

    def _make_core(self, params):
        return AdamRule(params, self.lr, self.beta_1, self.beta_2, self.epsilon,
                        self.weight_decay)


class RMSProp(Optimizer):
    """SINGA's ``opt.RMSProp(lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0)``."""

    _name = "opt.RMSProp"

    def __init__(self, lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0):
        super().__init__(lr)
        if not 0 <= _number(rho, self._name, "rho") <= 1:
            raise ValueError(f"{self._name}: rho must be in [0, 1], got {rho!r}")
        self.rho = float(rho)
        self.epsilon = _number(epsilon, self._name, "epsilon")
        self.weight_decay = _number(weight_decay, self._name, "weight_decay")

    def _make_core(self, params):
        return RMSPropRule(params, self.lr, self.rho, self.epsilon, self.weight_decay)


class AdaGrad(Optimizer):
    """SINGA's ``opt.AdaGrad(lr=0.1, epsilon=1e-8, weight_decay=0)``."""

    _name = "opt.AdaGrad"

    def __init__(self, lr=0.1, epsilon=1e-8, weight_decay=0):
        super().__init__(lr)
        self.epsilon = _number(epsilon, self._name, "epsilon")
        self.weight_decay = _number(weight_decay, self._name, "weight_decay")

    def _make_core(self, params):
        return AdaGradRule(params, self.lr, self.epsilon, self.weight_decay)
