"""SINGA's ``opt`` module: ``SGD`` and ``DistOpt`` under SINGA's names and arguments.

Both are the core's: ``opt.SGD`` drives a ``minitorch_dist.nn.SGD`` and ``opt.DistOpt`` *is*
a ``minitorch_dist.parallel.DistOpt`` (a subclass). What this module adds is SINGA's order of
events: a SINGA optimizer is created before the model has parameters (they appear at
``model.compile``), and learns them from the model it is attached to with
``model.set_optimizer``. For a ``DistOpt`` that binding is the collective step that checks
every rank built the same model and copies rank 0's values to all ranks.

Rules, as in SINGA's source:

* ``SGD(lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False, dtype=float32)``:
  ``g += weight_decay * p``; ``v = momentum * v + (1 - dampening) * g`` with ``v`` starting
  at zero; ``p -= lr * (g + momentum * v if nesterov else v)``. (With ``dampening=0``, the
  guide's setting, this is also ``torch.optim.SGD``.)
* ``DistOpt(opt=SGD(), nccl_id=None, local_rank=None, world_size=None, buffSize=4194304)``:
  without ``nccl_id`` the process joins its MPI job (or is a world of one); with an
  ``NcclIdHolder`` from the parent of a ``multiprocessing`` launch it joins that group as
  ``local_rank`` of ``world_size``. ``buffSize`` counts elements (float32: 16 MiB).
  The ``backward_and_*`` methods take SINGA's arguments (``threshold`` in elements).

>>> from minitorch_dist.singa import opt
>>> sgd = opt.SGD(lr=0.005, momentum=0.9, weight_decay=1e-5)
>>> sgd.momentum, sgd.weight_decay, sgd.step_counter
(0.9, 1e-05, 0)
"""
import numpy as np

from .. import autograd
from ..nn.optim.schedules import ExponentialDecayLR, LearningRateSchedule
from ..nn.optim.sgd import SGD as CoreSGD
from ..parallel.dist_opt import DistOpt as CoreDistOpt
from ..parallel.grad_arrays import gradient_array
from ..tensor import Tensor as CoreTensor
from . import tensor as _tensor
from .unsupported import module_getattr, not_supported

__all__ = ["Optimizer", "SGD", "DistOpt", "Constant", "ExponentialDecay"]


# ---- learning-rate schedules ------------------------------------------------------------
class Constant(LearningRateSchedule):
    """SINGA's ``Constant(init_value)``: the same rate at every step."""

    def __init__(self, init_value):
        super().__init__()
        self.init_value = _number(init_value, "opt.Constant", "init_value")

    def lr_at(self, step):
        return self.init_value


class ExponentialDecay(ExponentialDecayLR):
    """SINGA's ``ExponentialDecay(init_value, decay_steps, decay_rate, staircase=False)``:
    ``init_value * decay_rate ** (step / decay_steps)`` (the exponent floored if
    ``staircase``); the core's ``ExponentialDecayLR`` with SINGA's argument order."""

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super().__init__(init_value, decay_rate, decay_steps, is_stair=staircase)


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


def _backward(loss, params, call):
    """Gradients of the one-element ``loss`` for ``params`` (arrays, None where unused)."""
    if not isinstance(loss, CoreTensor) or not loss.requires_grad:
        raise ValueError(f"{call}(loss): loss must be a Tensor computed from the model's "
                         "parameters in training mode (model.train())")
    if loss.size != 1:
        raise ValueError(f"{call}(loss): loss must have one element, got shape {loss.shape}")
    seed = loss.device.xp.ones(loss.shape, loss.dtype)
    found = autograd.run_backward([loss], [seed], targets=list(params))
    return [gradient_array(g, p, call) for g, p in zip(found, params)]


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

    # ---- binding ----------------------------------------------------------------------
    def _attach(self, model):
        self._model = model

    def _bind_to(self, model):
        self._bind(model.trainable_params())

    def _bind(self, params):
        params = list(params)
        if self.core is not None:
            if [id(p) for p in params] != [id(p) for p in self.core.parameters]:
                raise RuntimeError(f"{self._name}: this optimizer already updates another "
                                   "model's parameters; create one optimizer per model")
            return
        if not params:
            raise RuntimeError(f"{self._name}: the model has no parameters yet; call "
                               "model.compile([tx], ...) first (layers create their "
                               "parameters at their first call)")
        for p in params:
            if p.dtype != self.dtype:
                raise TypeError(f"{self._name}(dtype={self.dtype}): parameter {p.name!r} is "
                                f"{p.dtype}; pass dtype=tensor.{p.dtype} to match the model")
        self.core = self._make_core(params)

    def _make_core(self, params):
        raise NotImplementedError

    def _ensure_bound(self, call):
        if self.core is None:
            if self._model is None:
                raise RuntimeError(f"{call}: this optimizer does not know its parameters; "
                                   "attach it with model.set_optimizer(sgd)")
            self._bind_to(self._model)

    @property
    def parameters(self):
        if self.core is None:
            raise AttributeError(f"{self._name}.parameters: not attached to a compiled model "
                                 "yet (model.set_optimizer, then model.compile)")
        return self.core.parameters

    @property
    def step_counter(self):
        """Steps taken so far."""
        return 0 if self.core is None else self.core.current_step()

    # ---- SINGA's entry points ---------------------------------------------------------
    def __call__(self, loss):
        """Backward from ``loss``, update every parameter, then ``step()``."""
        self.call(loss)
        self.step()

    def call(self, loss):
        """Backward from ``loss`` and update every parameter (no ``step()``)."""
        self._ensure_bound(f"{self._name}(loss)")
        params = self.core.parameters
        for i, g in enumerate(_backward(loss, params, self._name)):
            self.core.update(i, g)

    def backward_and_update(self, loss):
        """SINGA's deprecated alias of ``__call__``."""
        self(loss)

    def update(self, param, grad):
        """Apply the current step's update to one parameter (Parameter or index)."""
        self._ensure_bound(f"{self._name}.update")
        self.core.update(param, grad)

    def apply(self, param_name, param_value, param_grad):
        """SINGA's ``apply(name, param, grad)``: the update of one parameter."""
        self.update(param_value, param_grad)

    def step(self):
        """Advance the step counter (the learning-rate schedule follows it)."""
        self._ensure_bound(f"{self._name}.step")
        self.core.step()

    def get_states(self):
        raise not_supported(f"{self._name}.get_states", "save the model with "
                            "model.save_states; optimizer state is not checkpointed here")

    def set_states(self, states):
        raise not_supported(f"{self._name}.set_states")


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


# ---- DistOpt ----------------------------------------------------------------------------
_CORE_EXTRAS = ("communicator", "loss_scale", "sparse_cap")


class DistOpt(CoreDistOpt):
    """SINGA's ``opt.DistOpt``: the core ``DistOpt`` around an ``opt.SGD``, bound to the
    model's parameters at ``model.compile`` (see the module docstring).

    ``global_rank``, ``local_rank``, ``world_size`` and ``communicator`` exist from
    construction on (the guide picks its GPU with ``sgd.local_rank`` before compiling).
    ``all_reduce(t)`` sums a Tensor or an array over the ranks in place, as SINGA's does, and
    ``wait()`` returns at once (the collectives here finish before they return).
    Keyword extras of the core: ``communicator`` (e.g. an in-process one for tests),
    ``loss_scale``, ``sparse_cap``.
    """

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304, **kwargs):
        call = "opt.DistOpt"
        if opt is None:
            opt = SGD()
        if not isinstance(opt, Optimizer):
            raise TypeError(f"{call}(opt): expected an optimizer from minitorch_dist.singa.opt "
                            f"(e.g. opt.SGD(lr=0.005, momentum=0.9)), got {type(opt).__name__}")
        if isinstance(buffSize, bool) or not isinstance(buffSize, (int, np.integer)) \
                or buffSize < 1:
            raise ValueError(f"{call}: buffSize must be a positive int (elements), got "
                             f"{buffSize!r}")
        unknown = sorted(set(kwargs) - set(_CORE_EXTRAS))
        if unknown:
            raise TypeError(f"{call}: unexpected keyword arguments {unknown}")
        self.opt = opt
        self._model = None
        self._bound = False
        self._requested_world = world_size
        self._extras = {k: v for k, v in kwargs.items() if k != "communicator"}
        self.buffSize = int(buffSize) * np.dtype(opt.dtype).itemsize     # the core counts bytes
        self._option_stats = {}
        self.communicator = kwargs.get("communicator") or \
            _join(nccl_id, local_rank, world_size, call)
        comm = self.communicator
        self.global_rank, self.world_size, self.local_rank = comm.rank, comm.size, comm.local_rank

    # ---- binding ----------------------------------------------------------------------
    def _attach(self, model):
        self._model = model
        self.opt._attach(model)

    def _bind_to(self, model):
        params = model.trainable_params()
        if self._bound:
            self.opt._bind(params)      # raises if these are another model's parameters
            return
        self.opt._bind(params)
        device = params[0].device
        if not device.is_host and not device.virtual and self.communicator.backend != "nccl":
            from ..communication import NCCLCommunicator   # CUDA arrays travel over NCCL
            self.communicator = NCCLCommunicator(bootstrap=self.communicator)
        CoreDistOpt.__init__(self, self.opt, world_size=self._requested_world,
                             buffSize=self.buffSize, communicator=self.communicator,
                             **self._extras)
        self._bound = True

    def _bind_late(self):
        """Bind at the first backward (no compile): rank 0's values must not change this
        rank's parameters, since the forward that made the loss already used them."""
        if self._model is None:
            raise RuntimeError("opt.DistOpt: this optimizer does not know its parameters; "
                               "attach it with model.set_optimizer(sgd) and call "
                               "model.compile([tx], ...) before training")
        params = self._model.trainable_params()
        before = [p.asnumpy() for p in params]
        self._bind_to(self._model)
        changed = any(not np.array_equal(b, p.asnumpy()) for b, p in zip(before, params))
        flag = self._host_comm().allreduce(np.array([float(changed)]), "max")
        if float(flag[0]) > 0:
            raise RuntimeError("opt.DistOpt: the ranks' parameters differed at the first "
                               "step, whose forward ran before DistOpt synchronised them; "
                               "call model.compile([tx], ...) before training, or seed every "
                               "rank alike with dev.SetRandSeed(seed)")

    def backward(self, loss):
        if not self._bound:
            self._bind_late()
        return super().backward(loss)

    def step(self, grads, *args, **kwargs):
        if not self._bound:
            raise RuntimeError("opt.DistOpt.step: not attached to a compiled model yet "
                               "(model.set_optimizer(sgd), then model.compile([tx], ...))")
        return super().step(grads, *args, **kwargs)

    # ---- SINGA's low-level calls ------------------------------------------------------
    def _host_comm(self):
        comm = self.communicator
        bootstrap = getattr(comm, "bootstrap", None) if comm.backend == "nccl" else None
        return bootstrap or comm

    def all_reduce(self, value, op="sum"):
        """Sum (or ``op``) ``value`` over the ranks, in place: a Tensor, its ``.data`` or any
        array (SINGA passes ``t.data``). Returns ``value``."""
        array = value.data if isinstance(value, CoreTensor) else value
        if not hasattr(array, "shape") or not hasattr(array, "dtype"):
            raise TypeError(f"opt.DistOpt.all_reduce: expected a Tensor or an array, got "
                            f"{type(value).__name__}")
        comm = self._host_comm() if isinstance(array, np.ndarray) else self.communicator
        contiguous = array if array.flags.c_contiguous else array.copy()
        array[...] = comm.allreduce(contiguous, op)
        return value

    def wait(self):
        """SINGA waits for its CUDA streams here; these collectives are already complete."""

    def update(self, param, grad):
        """SINGA's ``DistOpt.update``: ``grad / world_size`` applied by the wrapped optimizer
        (after your own ``all_reduce`` of ``grad``)."""
        self.opt.update(param, grad / self.world_size)

    def _unsupported(self, name):
        raise not_supported(f"DistOpt.{name}", "the backward_and_* methods fuse, cast and "
                            "sparsify the gradients themselves")

    def fused_all_reduce(self, tensors, send=True):
        self._unsupported("fused_all_reduce")

    def all_reduce_half(self, tensor):
        self._unsupported("all_reduce_half")

    def fused_all_reduce_half(self, tensors, send=True):
        self._unsupported("fused_all_reduce_half")

    def sparsification(self, tensor, accumulation, spars, topK):
        self._unsupported("sparsification")

    def fused_sparsification(self, tensors, accumulation, spars, topK):
        self._unsupported("fused_sparsification")

    def __repr__(self):
        state = "bound" if self._bound else "not yet bound"
        return (f"opt.DistOpt({self.opt!r}, rank={self.global_rank}, "
                f"world_size={self.world_size}, {state})")


def _join(nccl_id, local_rank, world_size, call):
    """The communicator of this process: the group of ``nccl_id`` (multiprocessing launch),
    else the MPI job (or a world of one)."""
    from .. import communication
    if nccl_id is not None:
        if not isinstance(nccl_id, communication.UniqueId):
            raise TypeError(f"{call}: nccl_id must come from singa.NcclIdHolder() in the parent "
                            f"process, got {type(nccl_id).__name__}")
        for name, value in (("local_rank", local_rank), ("world_size", world_size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{call}: with nccl_id (a multiprocessing launch) {name} must "
                                 f"be an int, got {value!r}")
        if world_size < 1 or not 0 <= local_rank < world_size:
            raise ValueError(f"{call}: need 0 <= local_rank < world_size, got local_rank="
                             f"{local_rank}, world_size={world_size}")
        communication.init_from_unique_id(nccl_id, int(local_rank), int(world_size))
    elif not communication.GlobalComm.INITED:
        communication.init()
    return communication.get_communicator()


_UNSUPPORTED = {name: "opt.SGD and opt.DistOpt are translated; for other rules use "
                "minitorch_dist.nn's optimizers directly" for name in (
                    "RMSProp", "AdaGrad", "Adam", "DecayScheduler")}
__getattr__ = module_getattr("opt", _UNSUPPORTED, __all__)
