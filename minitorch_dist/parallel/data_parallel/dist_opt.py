"""``DistOpt``: SINGA's distributed optimizer (data parallelism by gradient averaging).

Every rank holds a full replica of the model and computes gradients on its own shard of
the batch; ``DistOpt`` wraps any optimizer and, before each update, makes the gradients
agree across ranks. Five ways to do it (``step(grads, dist_option=...)`` and the
``backward_and_*`` methods, which run backward first):

* ``fp32``: fused buckets, nonblocking allreduce, divide by the world size (the exact mean);
* ``fp16``: the same on a float16 wire, divided *before* casting and summing (no overflow);
* ``partialUpdate``: update with the local gradient, then average one chunk of parameters;
* ``sparseTopK``: send the fraction ``spars`` of largest-magnitude entries (error feedback);
* ``sparseThreshold``: send the entries with ``|g| >= spars``, capped (error feedback).

The ``backward_and_*`` methods run backward themselves, so (like SINGA's generator
backward) they have it write every gradient straight into its slot of a fused bucket as
soon as it is final, each bucket's allreduce starting when its last gradient arrives (a
``BucketFill`` observer of backward, ``bucket_fill.py``); ``step(grads)`` writes the arrays
it is handed into the same slots afterwards. Both take the one bucket path
(``buckets.BucketExchange``) and give the same bits.

It fixes what SINGA's version got wrong (see ``shared/reference/distopt.md`` section 6):
rank 0's parameters are broadcast at construction and every rank's model is checked to
match; fp16 divides before the sum; top-K compares true magnitudes; threshold mode is
capped and sized from exchanged counts; residuals are per parameter; no buffer can overflow.

All ranks must call the same methods with the same arguments in the same order (SPMD).

>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> from minitorch_dist.communication import run_ranks
>>> def train(comm):
...     w = ms.Parameter(ms.Tensor([float(comm.rank)]), name="w")   # ranks disagree at first
...     opt = DistOpt(nn.SGD([w], learning_rate=0.5), communicator=comm)
...     loss = (w * ms.Tensor([comm.rank + 1.0])).sum()             # gradient rank + 1
...     opt(loss)                                                    # mean gradient 1.5
...     return w.asnumpy().tolist()
>>> run_ranks(2, train)
[[-0.75], [-0.75]]
"""
import numpy as np

from ... import autograd
from ...backend.dtypes import UNKNOWN_CODE, dtype_code, dtype_from_code
from ...communication.communicator import Communicator
from ...communication.reduction import array_module
from ...tensor import Tensor
from .grad_arrays import check_gradient_tuple, gradient_array
from .bucket_fill import BucketFill
from .buckets import BucketedAllreduce, BucketExchange, fused_broadcast, unpack
from .loss_scale import resolve_loss_scale
from .partial_update import PartialUpdateSchedule, average_chunk
from .sparsification import (ErrorFeedback, check_spars, index_dtype, select_threshold,
                             select_topk, sparse_allreduce, topk_count)

__all__ = ["DistOpt", "DIST_OPTIONS"]

DEFAULT_THRESHOLD = 2097152
DIST_OPTIONS = ("fp32", "fp16", "partialUpdate", "sparseTopK", "sparseThreshold")
_ALIASES = {"plain": "fp32", "half": "fp16"}


class DistOpt:
    """Data-parallel wrapper of an optimizer (SINGA's ``opt.DistOpt``).

    * ``opt``: any ``nn.Optimizer``; ``DistOpt`` updates ``opt.parameters`` with it.
    * ``communicator``: a ``Communicator`` to use (tests pass a ``LocalCommunicator``);
      else ``nccl_id`` (a ``UniqueId`` made by the parent of a multiprocessing launch) with
      ``local_rank`` and ``world_size``; else the global one of ``minitorch_dist.communication``.
    * ``buffSize``: bytes per fusion bucket, and per partial-update chunk.
    * ``loss_scale``: None, ``"dynamic"`` or a ``DynamicLossScale`` (see ``loss_scale.py``).
    * ``sparse_cap``: the largest fraction of a bucket that threshold mode sends per step.

    Construction is collective: every rank's parameter count, shapes and dtypes are compared
    (a mismatch raises ValueError on every rank) and rank 0's values are broadcast.
    A parameter without a gradient on some rank contributes zeros to the exchange (every rank
    must make the same calls, as in Horovod) and is updated with the resulting mean.
    """

    def __init__(self, opt, nccl_id=None, local_rank=None, world_size=None, buffSize=4194304,
                 communicator=None, loss_scale=None, sparse_cap=0.5):
        if not all(hasattr(opt, a) for a in ("parameters", "update", "step")):
            raise TypeError(f"DistOpt wraps an optimizer (nn.SGD, nn.Adam, ...), got "
                            f"{type(opt).__name__}")
        _check_positive_int("buffSize", buffSize)
        if isinstance(sparse_cap, bool) or not isinstance(sparse_cap, (int, float)) \
                or not 0 < sparse_cap <= 1:
            raise ValueError(f"DistOpt: sparse_cap must be in (0, 1], got {sparse_cap!r}")
        self.opt = opt
        self.communicator = _resolve_communicator(communicator, nccl_id, local_rank, world_size)
        comm = self.communicator
        self.global_rank, self.world_size, self.local_rank = comm.rank, comm.size, comm.local_rank
        self.buffSize = int(buffSize)
        self.loss_scale = resolve_loss_scale(loss_scale)
        self.sparse_cap = float(sparse_cap)
        params = self.parameters
        for p in params:
            if getattr(p, "row_slice", None) is not None or getattr(p, "sharding_layout", None) is not None:
                raise ValueError(f"DistOpt: parameter {p.name!r} is a slice of a table split across "
                                 "ranks (table_row_slice or operator sharding); DistOpt averages whole "
                                 "parameters, which would mix different slices. Train it with "
                                 "TrainOneStepCell (DistributedGradReducer) instead")
        self._fused = BucketedAllreduce(comm, self.buffSize)
        self._feedback = ErrorFeedback(params)
        self._schedule = PartialUpdateSchedule([p.size for p in params],
                                               [np.dtype(p.dtype).itemsize for p in params],
                                               self.buffSize)
        self.partial = 0            # SINGA's counter: the chunk averaged by the next partial step
        self._option_stats = {}
        check_same_model(comm, params, world_size)
        self.sync_parameters()

    @property
    def parameters(self):
        return self.opt.parameters

    @property
    def partial_period(self):
        """K: partial update averages every parameter element once in any K consecutive steps."""
        return self._schedule.period

    # ---- SINGA's entry points ---------------------------------------------------------------
    def __call__(self, loss):
        return self.backward_and_update(loss)

    def backward_and_update(self, loss, threshold=DEFAULT_THRESHOLD):
        """Backward writing the gradients into the fused buckets (each bucket's allreduce
        starts when it is full), mean, update."""
        return self._step(None, loss, "fp32", threshold=threshold)

    def backward_and_update_half(self, loss, threshold=DEFAULT_THRESHOLD, clipping=False,
                                 clip_Value=100):
        """Like ``backward_and_update`` with float16 on the wire (values clamped to
        ``±clip_Value`` first when ``clipping``)."""
        return self._step(None, loss, "fp16", threshold=threshold, clipping=clipping,
                          clip_Value=clip_Value)

    def backward_and_partial_update(self, loss, threshold=DEFAULT_THRESHOLD):
        """Local update, then average chunk ``partial`` of the parameters. The chunks come from
        ``buffSize`` (``partial_period`` of them); ``threshold`` is kept for SINGA's signature."""
        return self.step(self.backward(loss), "partialUpdate", threshold=threshold)

    def backward_and_sparse_update(self, loss, threshold=DEFAULT_THRESHOLD, spars=0.05,
                                   topK=False, corr=True):
        """Sparse exchange: top-K fraction ``spars`` if ``topK`` else ``|g| >= spars``;
        ``corr`` keeps what was not sent for the next step (error feedback)."""
        check_spars(spars, topK)
        option = "sparseTopK" if topK else "sparseThreshold"
        return self._step(None, loss, option, spars=spars, corr=corr, threshold=threshold)

    # ---- building blocks --------------------------------------------------------------------
    def backward(self, loss):
        """Gradients of ``loss`` (times the loss scale, if any) for ``opt.parameters``: arrays."""
        found = self._run_backward(loss)
        return [gradient_array(g, p, "DistOpt") for g, p in zip(found, self.parameters)]

    def _run_backward(self, loss, observer=None):
        """The engine's gradients of ``loss`` for ``opt.parameters``, as they come (a
        ``BucketFill`` ``observer`` takes each into its bucket as soon as it is final)."""
        if not isinstance(loss, Tensor) or not loss.requires_grad:
            raise ValueError("DistOpt.backward: loss must be a Tensor computed from the "
                             "parameters with gradients enabled")
        if loss.size != 1:
            raise ValueError(f"DistOpt.backward: loss must have one element, got shape "
                             f"{loss.shape}")
        seed = loss.device.xp.full(loss.shape, self._scale(), loss.dtype)
        return autograd.run_backward([loss], [seed], targets=list(self.parameters),
                                     observer=observer)

    def step(self, grads, dist_option="fp32", spars=None, topK=None, corr=True,
             threshold=DEFAULT_THRESHOLD, clipping=False, clip_Value=100):
        """Agree on ``grads`` (aligned with ``opt.parameters``) across ranks, then update.

        Returns False when dynamic loss scaling skipped the step, else True.
        """
        return self._step(grads, None, dist_option, spars, topK, corr, threshold, clipping,
                          clip_Value)

    def _step(self, grads, loss, dist_option, spars=None, topK=None, corr=True,
              threshold=DEFAULT_THRESHOLD, clipping=False, clip_Value=100):
        """``step`` on ``grads``, or on ``loss``: then backward runs here, writing the gradients
        into the buckets' buffers (``BucketFill``) instead of arrays written afterwards."""
        option = _ALIASES.get(dist_option, dist_option)
        if option not in DIST_OPTIONS:
            raise ValueError(f"DistOpt.step: dist_option must be one of {DIST_OPTIONS}, got "
                             f"{dist_option!r}")
        _check_positive_int("threshold", threshold)
        sparse = option.startswith("sparse")
        _check_option_arguments(option, sparse, spars, topK, corr, clipping, clip_Value)
        if sparse:
            if topK is not None and bool(topK) != (option == "sparseTopK"):
                raise ValueError(f"DistOpt.step: topK={topK!r} contradicts dist_option={option!r}")
            spars = check_spars(0.05 if spars is None else spars, option == "sparseTopK")
        if grads is not None:
            grads = self._gradients(grads)
        elif option == "partialUpdate":   # updates from each rank's own arrays: nothing to fill
            grads, loss = self.backward(loss), None
        before = self._comm_totals()
        if option == "partialUpdate":
            applied = self._partial_step(grads)
        elif sparse:
            applied = self._sparse_step(grads, loss, threshold, spars, option == "sparseTopK",
                                        corr)
        elif option == "fp32" and self.world_size == 1:
            applied = self._alone_step(grads, loss)
        else:
            half = option == "fp16"
            clip = float(clip_Value) if clipping and half else None
            applied = self._dense_step(grads, loss, threshold, half, clip)
        self._record(option, before)
        return applied

    def sync_parameters(self, root=0):
        """Copy ``root``'s parameter values to every rank (one broadcast per dtype)."""
        fused_broadcast(self.communicator, [(p.device, p.data) for p in self.parameters], root)

    def all_reduce(self, value, op="sum"):
        """Reduce a Tensor or array over ranks (metrics, e.g. summed correct counts)."""
        if isinstance(value, Tensor):
            data = value.device.xp.ascontiguousarray(value.data)
            return Tensor._make(self.communicator.allreduce(data, op), value.device)
        return self.communicator.allreduce(array_module(value).ascontiguousarray(value), op)

    def residual(self, index):
        """The error-feedback residual of parameter ``index`` (None before sparse steps)."""
        return self._feedback.peek(index)

    def comm_stats(self):
        """The communicator's ``{"calls", "bytes_sent", "by_op"}`` for this rank, plus
        ``by_option``: ``{option: {"steps", "calls", "bytes_sent"}}`` of this DistOpt."""
        stats = self.communicator.comm_stats()
        stats["by_option"] = {k: dict(v) for k, v in self._option_stats.items()}
        return stats

    def reset_comm_stats(self):
        self.communicator.reset_stats()
        self._option_stats.clear()

    # ---- the options ------------------------------------------------------------------------
    def _dense_step(self, grads, loss, threshold, half, clip):
        params, world, scale = self.parameters, self.world_size, self._scale()
        # fp16: divide by the world size before casting, so the sum cannot exceed the largest
        # local value; the loss scale stays on the wire (that is what keeps small values alive).
        # fp32 with a power-of-two world: dividing first is exact (a power-of-two scale commutes
        # with rounding), so it rides along with the packing copy instead of a pass of its own.
        early = half or (world & (world - 1)) == 0
        prescale = 1.0 / world if early else 1.0
        wire_clip = None if clip is None else clip * scale * prescale
        divisor = scale if early else world * scale
        exchange = BucketExchange(self._fused, params, threshold, half, prescale, wire_clip)
        if loss is not None:    # backward writes into the buckets and launches each one when full
            grads = self._run_backward(loss, BucketFill(exchange))
        return self._apply_dense(exchange.launch_rest(grads), half, divisor)

    def _alone_step(self, grads, loss):
        """fp32 on one rank: the mean over one rank is the gradient itself, so it goes to the
        optimizer as it is, with no bucket and no reduction (the bits of ``_dense_step``,
        which would copy it into a bucket and through an identity allreduce; a parameter
        without a gradient gets zeros there too)."""
        if grads is None:
            grads = self.backward(loss)
        grads = [p.device.xp.zeros(p.shape, p.dtype) if g is None else g
                 for g, p in zip(grads, self.parameters)]
        if self.loss_scale is not None:
            scale = self._scale()
            if scale != 1:      # copies (the arrays passed to step() are the caller's),
                grads = [g.copy() for g in grads]   # divided as _apply_dense divides a bucket
                for g in grads:
                    g /= scale
            if not self.loss_scale.update(_all_finite(grads)):
                return False
        self._update_bucket(enumerate(grads))
        self.opt.step()
        return True

    def _apply_dense(self, pending, half, divisor):
        """Wait for each launched bucket, divide by ``divisor`` and update (all buckets first
        where an overflow check must come before any update)."""
        params, world = self.parameters, self.world_size
        if self.loss_scale is None and half:   # an fp16 overflow must not reach the weights
            pending = [self._fused.finish(params, item, divisor) for item in pending]
            _check_half_finite(pending, world)
            for _, views in pending:
                self._update_bucket(views)
            self.opt.step()
            return True
        if self.loss_scale is None:    # update each bucket's parameters as soon as it arrives
            for item in pending:
                self._update_bucket(self._fused.finish(params, item, divisor)[1])
            self.opt.step()
            return True
        # Every rank sees the same reduced values, so they agree on "finite" without a message.
        results = [self._fused.finish(params, item, divisor) for item in pending]
        finite = _all_finite(flat for flat, _ in results)
        if not self.loss_scale.update(finite):
            return False
        for _, views in results:
            self._update_bucket(views)
        self.opt.step()
        return True

    def _update_bucket(self, views):
        """Update the parameters of one reduced bucket (``views``: position, gradient): in
        one ``update_many`` call where the optimizer has it (its dense host updates fused
        into one C++ call), else one ``update`` per parameter (SINGA's interface)."""
        many = getattr(self.opt, "update_many", None)
        if many is None:
            for pos, g in views:
                self.opt.update(pos, g)
            return
        grads = [None] * len(self.parameters)
        for pos, g in views:
            grads[pos] = g
        many(grads)

    def _partial_step(self, grads):
        if self.loss_scale is not None and not self.loss_scale.update(self._agree_finite(grads)):
            return False
        inv = 1.0 / self._scale()
        for pos, g in enumerate(grads):
            if g is not None:
                self.opt.update(pos, g if inv == 1.0 else g * inv)
        self.opt.step()
        average_chunk(self.communicator, self.parameters, self._schedule.chunk(self.partial),
                      self.world_size)
        self.partial = (self.partial + 1) % self.partial_period
        return True

    def _sparse_step(self, grads, loss, threshold, spars, topK, corr):
        params, inv = self.parameters, 1.0 / self._scale()
        # grad / loss scale, written into the selection buffers ("acc"): during backward, or
        # (arrays handed in) once the loss scale has checked them
        exchange = BucketExchange(self._fused, params, threshold, prescale=inv, launch=False,
                                  tag="acc")
        if loss is not None:
            grads = exchange.complete(self._run_backward(loss, BucketFill(exchange)))
        if self.loss_scale is not None and not self.loss_scale.update(self._agree_finite(grads)):
            return False
        exchange.complete(grads)
        shapes = [p.shape for p in params]
        for (bucket, device, _, dtype), acc in zip(exchange.plan, exchange.buffers):
            xp, n = device.xp, bucket.size
            if corr:
                self._feedback.add_into(bucket, acc)
            if topK:
                chosen = select_topk(xp, acc, topk_count(spars, n))
            else:
                chosen = select_threshold(xp, acc, spars, max(1, int(self.sparse_cap * n)))
            dense = self._fused.buffer("dense", bucket, device, dtype)
            sparse_allreduce(self.communicator, xp, chosen.astype(index_dtype(n)), acc[chosen],
                             dense)
            if corr:
                acc[chosen] = 0
                self._feedback.keep(bucket, acc)
            dense /= self.world_size
            for pos, g in unpack(bucket, dense, shapes):
                self.opt.update(pos, g)
        self.opt.step()
        return True

    # ---- helpers ----------------------------------------------------------------------------
    def _scale(self):
        return 1.0 if self.loss_scale is None else self.loss_scale.scale

    def _agree_finite(self, grads):
        """True when no rank has inf/NaN in its gradients (one tiny allreduce of a flag)."""
        local = _all_finite(g for g in grads if g is not None)
        xp = self.parameters[0].device.xp
        flag = xp.array([0.0 if local else 1.0], xp.float32)
        return float(self.communicator.allreduce(flag, "max")[0]) == 0.0

    def _gradients(self, grads):
        params = self.parameters
        check_gradient_tuple(grads, len(params), "DistOpt.step", "opt.parameters")
        return [gradient_array(g, p, "DistOpt") for g, p in zip(grads, params)]

    def _comm_totals(self):
        stats = self.communicator.comm_stats()
        return stats["calls"], stats["bytes_sent"]

    def _record(self, option, before):
        calls, sent = self._comm_totals()
        entry = self._option_stats.setdefault(option, {"steps": 0, "calls": 0, "bytes_sent": 0})
        entry["steps"] += 1
        entry["calls"] += calls - before[0]
        entry["bytes_sent"] += sent - before[1]

    def __repr__(self):
        return (f"DistOpt({type(self.opt).__name__}, rank={self.global_rank}, "
                f"world_size={self.world_size}, buffSize={self.buffSize})")


# ---- construction helpers -------------------------------------------------------------------

def _all_finite(arrays):
    """Whether no array holds inf or NaN (NumPy or CuPy)."""
    return all(bool(array_module(a).isfinite(a).all()) for a in arrays)


def _check_option_arguments(option, sparse, spars, topK, corr, clipping, clip_Value=100):
    """Refuse arguments that ``option`` would ignore: ``spars``/``topK``/``corr`` act only in
    the sparse options, ``clipping`` only in fp16 and ``clip_Value`` only with clipping
    (SINGA's signatures say the same). SINGA's own defaults (topK=False) pass."""
    if clip_Value != 100 and not (clipping and option == "fp16"):
        raise ValueError(f"DistOpt.step: clip_Value={clip_Value!r} only applies with "
                         f"clipping=True and 'fp16', not to {option!r} with clipping={clipping!r}")
    if not sparse:
        given = [f"{name}={value!r}" for name, value, default in
                 (("spars", spars, None), ("topK", topK, None), ("corr", corr, True))
                 if value != default and not (name == "topK" and value is False)]
        if given:
            raise ValueError(f"DistOpt.step: {', '.join(given)} only apply to the sparse options "
                             f"('sparseTopK', 'sparseThreshold'), not to {option!r}")
    if clipping and option != "fp16":
        raise ValueError(f"DistOpt.step: clipping only applies to 'fp16' (it bounds what float16 "
                         f"carries), not to {option!r}")


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"DistOpt: {name} must be a positive int, got {value!r}")


def _resolve_communicator(communicator, nccl_id, local_rank, world_size):
    if communicator is not None:
        if not isinstance(communicator, Communicator):
            raise TypeError(f"DistOpt: communicator must be a Communicator, got "
                            f"{type(communicator).__name__}")
        return communicator
    from ... import communication
    if nccl_id is not None:       # SINGA's multiprocessing launch: join the id's group
        if local_rank is None or world_size is None:
            raise ValueError("DistOpt: nccl_id (a multiprocessing launch) needs local_rank and "
                             "world_size too")
        communication.init_from_unique_id(nccl_id, local_rank, world_size)
    elif not communication.GlobalComm.INITED:
        communication.init()
    return communication.get_communicator()


def _signature(params, world_size):
    """int64 words: requested world size (-1: none), count, then per parameter dtype, ndim, dims."""
    words = [-1 if world_size is None else int(world_size), len(params)]
    for p in params:
        words += [dtype_code(p.dtype, UNKNOWN_CODE), len(p.shape), *p.shape]
    return np.array(words, np.int64)


def _decode(words):
    requested, count, specs, k = int(words[0]), int(words[1]), [], 2
    for _ in range(count):
        code, ndim = int(words[k]), int(words[k + 1])
        dtype = str(dtype_from_code(code, default="other"))
        specs.append((tuple(int(d) for d in words[k + 2:k + 2 + ndim]), dtype))
        k += 2 + ndim
    return requested, specs


def check_same_model(comm, params, world_size=None):
    """Collective check that every rank has the same parameters; ValueError on every rank if not.

    One ``allgatherv`` of a small signature, then the same verdict computed on every rank.
    """
    words = _signature(params, world_size)
    if not params[0].device.is_host:
        words = params[0].device.xp.asarray(words)
    data, counts = comm.allgatherv(words)
    data = np.asarray(data.get() if hasattr(data, "get") else data)
    ranks, start = [], 0
    for count in counts:
        ranks.append(_decode(data[start:start + count]))
        start += count
    for r, (requested, _) in enumerate(ranks):
        if requested not in (-1, comm.size):
            raise ValueError(f"DistOpt: world_size={requested} was given on rank {r}, but the "
                             f"communicator has {comm.size} ranks")
    reference = ranks[0][1]
    for r, (_, specs) in enumerate(ranks[1:], start=1):
        for i in range(max(len(reference), len(specs))):
            mine = reference[i] if i < len(reference) else None
            theirs = specs[i] if i < len(specs) else None
            if mine != theirs:
                name = repr(params[i].name) if i < len(params) else "none"
                raise ValueError(
                    f"DistOpt: parameter {i} ({name} on this rank) is {_describe(theirs)} on "
                    f"rank {r} but {_describe(mine)} on rank 0 (rank {r} has {len(specs)} "
                    f"parameters, rank 0 has {len(reference)}); every rank must build the same "
                    "model")


def _describe(spec):
    return "missing" if spec is None else f"shape {spec[0]} {spec[1]}"


def _check_half_finite(results, world):
    """Raise ``FloatingPointError`` (on every rank: the reduced values are the same) when an
    fp16 step without loss scaling produced inf/NaN, before any parameter changes."""
    if not _all_finite(flat for flat, _ in results):
        raise FloatingPointError(
            "DistOpt fp16: a gradient overflowed float16 on the wire (|g| / world size > "
            f"65504 with {world} ranks) or holds inf/NaN; the step was not applied. Use "
            "loss_scale='dynamic' (such steps are skipped and the scale lowered), "
            "clipping=True with clip_Value, or dist_option='fp32'.")
