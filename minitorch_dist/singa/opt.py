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
>>> sgd.momentum, sgd.weight_decay, sgd.step_counter.asnumpy().tolist()
(0.9, 1e-05, [0.0])
"""
from ..nn.optim.schedules import ExponentialDecayLR, LearningRateSchedule
from .dist_opt import DistOpt
from .optimizer import SGD, AdaGrad, Adam, Optimizer, RMSProp, _number
from .unsupported import module_getattr

__all__ = ["Optimizer", "SGD", "Adam", "RMSProp", "AdaGrad", "DistOpt", "Constant",
           "ExponentialDecay"]


# ---- learning-rate schedules ------------------------------------------------------------
class Constant(LearningRateSchedule):
    """SINGA's ``Constant(init_value)``: the same rate at every step."""

    def __init__(self, init_value):
        super().__init__()
        self.init_value = _number(init_value, "opt.Constant", "init_value")

    def lr_at(self, step):
        """The learning rate at ``step``: always ``init_value``."""
        return self.init_value


class ExponentialDecay(ExponentialDecayLR):
    """SINGA's ``ExponentialDecay(init_value, decay_steps, decay_rate, staircase=False)``:
    ``init_value * decay_rate ** (step / decay_steps)`` (the exponent floored if
    ``staircase``); the core's ``ExponentialDecayLR`` with SINGA's argument order."""

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super().__init__(init_value, decay_rate, decay_steps, is_stair=staircase)


_UNSUPPORTED = {"DecayScheduler": "use opt.Constant, opt.ExponentialDecay or any "
                "minitorch_dist.nn.LearningRateSchedule"}
__getattr__ = module_getattr("opt", _UNSUPPORTED, __all__)
