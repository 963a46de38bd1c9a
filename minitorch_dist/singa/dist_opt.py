"""SINGA's ``opt.DistOpt``: the core ``DistOpt`` with SINGA's construction and binding.

``DistOpt(opt=SGD(), nccl_id=None, local_rank=None, world_size=None, buffSize=4194304)``
joins the MPI job (or a world of one) without ``nccl_id``, or the ``multiprocessing``
group of an ``NcclIdHolder`` with it; a process of such a group runs its BLAS on one
thread, as ``mpiexec`` ranks started by ``minitorch_dist.run`` do. It learns its
parameters from the model it is attached to (``model.compile``), or, as SINGA's autograd
examples need, from the tape of the first loss it is given.

>>> from minitorch_dist.singa import opt
>>> d = opt.DistOpt(opt.SGD(lr=0.1))
>>> d.world_size, d.global_rank
(1, 0)
"""
import os
import warnings

import numpy as np

from ..backend.arrays import contiguous
from ..parallel.data_parallel.dist_opt import DistOpt as CoreDistOpt
from ..tensor import Tensor as CoreTensor
from . import tape as _tape
from .optimizer import SGD, Optimizer, _tape_gradients


__all__ = ["DistOpt"]

# ----------------------------------------------------------------------------
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
        self._bind_params(model.trainable_params())

    def _bind_params(self, params):
        if self._bound:     # every rank must exchange one set: a changed set is refused
            if [id(p) for p in params] != [id(p) for p in self.opt.core.parameters]:
                raise RuntimeError("opt.DistOpt: this optimizer already updates another "
                                   "model's parameters (every rank must exchange one set); "
                                   "create a new DistOpt for the changed model")
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

    def _bind_late(self, loss):
        """Bind at the first backward (no compile), to the model's parameters or, without a
        model, to the trainable leaves on ``loss``'s tape (SINGA's autograd examples).
        Binding copies rank 0's values to every rank; the forward that made ``loss`` already
        used this rank's own values, so a difference is an error with a model (compile
        first) and a warning without one (SINGA itself never synchronises there)."""
        if self._model is not None:
            params = self._model.trainable_params()
        else:
            params = [_tape.as_parameter(t) for t in _tape.parameters_in_order(loss)]
            if not params:
                raise RuntimeError("opt.DistOpt: the loss depends on no trainable tensor")
        before = [p.asnumpy() for p in params]
        self._bind_params(params)
        changed = any(not np.array_equal(b, p.asnumpy()) for b, p in zip(before, params))
        flag = self._host_comm().allreduce(np.array([float(changed)]), "max")
        if float(flag[0]) == 0:
            return
        if self._model is not None:
            raise RuntimeError("opt.DistOpt: the ranks' parameters differed at the first "
                               "step, whose forward ran before DistOpt synchronised them; "
                               "call model.compile([tx], ...) before training, or seed every "
                               "rank alike with dev.SetRandSeed(seed)")
        warnings.warn("opt.DistOpt: the ranks' parameters differed at the first step; rank "
                      "0's values were copied to every rank, after this step's forward "
                      "(seed every rank alike, or average the parameters first as SINGA's "
                      "mnist_cnn.py does)", RuntimeWarning, stacklevel=3)

    def _bind_at_first_loss(self, loss):
        if not self._bound:
            _tape.check_loss(loss, "opt.DistOpt(loss)")
            self._bind_late(loss)

    def backward(self, loss):
        """Gradient arrays of ``loss`` for the bound parameters, read from the tape (so a
        layer held in a list or a closure gets its gradient)."""
        self._bind_at_first_loss(loss)
        return super().backward(loss)

    def _step(self, grads, loss, *args, **kwargs):
        """The core's one-call steps (``backward_and_update``, ...) bind at the first loss."""
        if loss is not None:
            self._bind_at_first_loss(loss)
        return super()._step(grads, loss, *args, **kwargs)

    def _run_backward(self, loss, observer=None):
        """The core's backward, SINGA's way: the gradients read from the tape, each handed
        to the observer (the core's buckets) afterwards, as backward would."""
        grads, _ = _tape_gradients(loss, self.parameters, "opt.DistOpt", self._scale())
        for pos, (param, grad) in enumerate(zip(self.parameters, grads)):
            if observer is not None and grad is not None:
                taken = observer.on_gradient_final(param, grad)
                grads[pos] = grad if taken is None else taken
        return grads

    def step(self, grads, *args, **kwargs):
        """The core ``DistOpt.step`` once the parameters are bound."""
        if not self._bound:
            raise RuntimeError("opt.DistOpt.step: not attached to a compiled model yet "
                               "(model.set_optimizer(sgd), then model.compile([tx], ...))")
        return super().step(grads, *args, **kwargs)

    # ---- SINGA's low-level calls ------------------------------------------------------
    def _host_comm(self):
        return self.communicator.host_communicator

    def all_reduce(self, value, op="sum"):
        """Sum (or ``op``) ``value`` over the ranks, in place: a Tensor, its ``.data`` or any
        array (SINGA passes ``t.data``). Returns ``value``."""
        array = value.data if isinstance(value, CoreTensor) else value
        if not hasattr(array, "shape") or not hasattr(array, "dtype"):
            raise TypeError(f"opt.DistOpt.all_reduce: expected a Tensor or an array, got "
                            f"{type(value).__name__}")
        comm = self._host_comm() if isinstance(array, np.ndarray) else self.communicator
        array[...] = comm.allreduce(contiguous(array), op)
        return value

    def wait(self):
        """SINGA waits for its CUDA streams here; these collectives are already complete."""

    def update(self, param, grad):
        """SINGA's ``DistOpt.update``: ``grad / world_size`` applied by the wrapped optimizer
        (after your own ``all_reduce`` of ``grad``)."""
        self.opt.update(param, grad / self.world_size)

    # SINGA's fusion buffer: arrays queued with send=False go with the next send=True;
    # an array queued twice is reduced once (its copies in SINGA's buffer are identical)
    def _fused(self, tensors, send, reduce_one):
        pending = self.__dict__.setdefault("_pending_fused", {})
        for t in tensors:
            array = t.data if isinstance(t, CoreTensor) else t
            pending[id(array)] = array
        if send:
            for array in pending.values():
                reduce_one(array)
            pending.clear()

    def fused_all_reduce(self, tensors, send=True):
        """Sum the arrays over the ranks, in place; ``send=False`` queues them for the next
        call with ``send=True`` (SINGA's fusion buffer)."""
        self._fused(list(tensors), send, self.all_reduce)

    def all_reduce_half(self, tensor):
        """Sum over the ranks in float16 (SINGA's half-precision exchange), in place."""
        array = tensor.data if isinstance(tensor, CoreTensor) else tensor
        half = array.astype(np.float16)
        self.all_reduce(half)
        array[...] = half.astype(array.dtype)
        return tensor

    def fused_all_reduce_half(self, tensors, send=True):
        """``fused_all_reduce`` in float16."""
        self._fused(list(tensors), send, self.all_reduce_half)

    def sparsification(self, tensor, accumulation, spars, topK):
        """Sum a sparsified gradient over the ranks, in place: the values with ``|g| >=
        spars`` (or, with ``topK``, the ``spars`` fraction of largest magnitude); with
        ``accumulation``, the residual is added first and what was not sent is kept there."""
        array = tensor.data if isinstance(tensor, CoreTensor) else tensor
        acc = None if accumulation is None else (
            accumulation.data if isinstance(accumulation, CoreTensor) else accumulation)
        if acc is not None:
            array += acc
        mag = abs(array).reshape(-1)
        if topK:
            k = max(1, int(round(float(spars) * mag.size)))
            keep = np.zeros(mag.size, bool)
            keep[np.argsort(-mag, kind="stable")[:k]] = True
            keep = keep.reshape(array.shape)
        else:
            keep = abs(array) >= spars
        sent = np.where(keep, array, 0).astype(array.dtype)
        if acc is not None:
            acc[...] = array - sent
        self.all_reduce(sent)
        array[...] = sent
        return tensor

    def fused_sparsification(self, tensors, accumulation, spars, topK):
        """``sparsification`` of the arrays taken as one flat vector."""
        arrays = [t.data if isinstance(t, CoreTensor) else t for t in tensors]
        flat = np.concatenate([a.reshape(-1) for a in arrays])
        self.sparsification(flat, accumulation, spars, topK)
        offset = 0
        for a in arrays:
            a.reshape(-1)[...] = flat[offset:offset + a.size]
            offset += a.size

    def __repr__(self):
        state = "bound" if self._bound else "not yet bound"
        return (f"opt.DistOpt({self.opt!r}, rank={self.global_rank}, "
                f"world_size={self.world_size}, {state})")


def pin_blas_threads():
    """Run the BLAS and the C++ kernels on one thread in this process, as the thread policy
    does for each rank of ``mpiexec``/``minitorch_dist.run``: the processes of a
    ``multiprocessing`` launch share the host's cores, and one thread pool per process per
    core oversubscribes them. A count the user chose (``MINITORCH_DIST_NUM_THREADS``,
    ``OMP_NUM_THREADS``, ... or ``ms.set_context(num_threads=...)``) is kept. Returns the
    count in force."""
    from ..backend import threads
    from ..context import get_context
    chosen = get_context("num_threads") is not None or any(
        os.environ.get(name, "").strip() for name in threads.ENV_VARIABLES)
    return threads.get_num_threads() if chosen else threads.set_num_threads(1)


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
        pin_blas_threads()
        communication.init_from_unique_id(nccl_id, int(local_rank), int(world_size))
    elif not communication.GlobalComm.INITED:
        communication.init()
    return communication.get_communicator()


