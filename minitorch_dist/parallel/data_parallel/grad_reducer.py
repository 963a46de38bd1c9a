"""``DistributedGradReducer``: MindSpore's data-parallel gradient reduction.

Every rank computes gradients on its own shard of the batch; the reducer makes them agree
before the optimizer runs:

* dense gradients are summed with fused, nonblocking allreduces (small gradients share one
  flat buffer, large ones travel alone), the one bucket path DistOpt takes too (see
  ``buckets.py``), then divided by the number of ranks when ``mean``;
* ``RowTensor`` gradients (embedding lookups) are gathered, not summed: every rank receives
  all ranks' indices and rows (``allgatherv``), so only the touched rows travel and the
  optimizer still sees a sparse gradient;
* a row-sliced table (``EmbeddingLookup(slice_mode="table_row_slice")``, a parameter with
  a ``row_slice`` attribute) is neither: its gradient already holds every rank's rows (the
  lookup's all-to-all backward summed them on the owner), so it is only divided by
  ``degree`` when ``mean``, and ``broadcast_parameters`` leaves each rank's slice alone.

All ranks must call it with gradients of the same kinds (dense or ``RowTensor``) in the
same order, as every collective requires.

>>> import minitorch_dist as ms
>>> from minitorch_dist.communication import run_ranks
>>> def reduce(comm):
...     w = ms.Parameter(ms.Tensor([0.0, 0.0]), name="w")
...     reducer = DistributedGradReducer([w], mean=True, communicator=comm)
...     (g,) = reducer((ms.Tensor([1.0, 2.0]) * (comm.rank + 1),))
...     return g.asnumpy().tolist()
>>> run_ranks(2, reduce)
[[1.5, 3.0], [1.5, 3.0]]
"""
import numpy as np

from ...nn.cell import Cell
from ...row_tensor import RowTensor
from ...tensor import Tensor
from .buckets import BucketedAllreduce, FusionGroups, fused_broadcast
from ..comm_fusion import groups_for
from ..comm.collectives import communicator_for
from ..comm.rows import gather_rows
from ..context import get_auto_parallel_context
from .grad_arrays import check_gradient_tuple, gradient_array
from .accumulation_shard import note_if_unused, ready_piece
from .optimizer_parallel import scattered_gradients

__all__ = ["DistributedGradReducer"]

def fusion_splits(count):
    """``all_reduce_fusion_config`` from the parallel context, for a reducer of ``count``
    parameters: the positions where one fused group ends and the next begins.

    MindSpore numbers the split points over every gradient allreduce of the graph, so a
    program with two reducers (Wide&Deep's wide and deep optimizers, ``[6, 12]``) gives the
    small one split points past its end; those split nothing here either."""
    return tuple(s for s in get_auto_parallel_context("all_reduce_fusion_config") if s < count)


# Gradients with at least this many elements are sent from their own array, unpacked.
_ALONE_THRESHOLD = 1 << 20


class DistributedGradReducer(Cell):
    """Average (or sum) gradients over the ranks of a data-parallel job.

    * ``parameters``: the optimizer's parameters; the gradients passed in are aligned with them.
    * ``mean``: divide the sum by ``degree``; None reads ``gradients_mean`` from
      ``ms.set_auto_parallel_context``.
    * ``degree``: the divisor for ``mean`` (default: the group size).
    * ``fusion_type``: 1 fuses small gradients into buckets of ``buff_size`` bytes; 0 sends
      every gradient on its own (one allreduce each).
    * ``group``: a group made by ``communication.create_group`` (default: the world);
      ``communicator`` passes a ``Communicator`` directly (tests use ``run_ranks``).

    ``__call__(grads)`` returns a new tuple: the inputs are not modified, and the results do
    not share memory with anything the reducer reuses.
    """

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None,
                 communicator=None, buff_size=4 << 20):
        super().__init__()
        self.parameters_ = tuple(parameters)   # a tuple is not registered as the cell's own
        if not self.parameters_:
            raise ValueError("DistributedGradReducer: parameters is empty; pass "
                             "optimizer.parameters")
        if communicator is None:
            from ... import communication
            communicator = communication.get_communicator(group)
        self.communicator = communicator
        self.mean = bool(get_auto_parallel_context("gradients_mean") if mean is None else mean)
        if degree is None:
            degree = communicator.size
        if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
            raise ValueError(f"DistributedGradReducer: degree must be a positive int, got "
                             f"{degree!r}")
        self.degree = int(degree)
        if fusion_type not in (0, 1):
            raise ValueError(f"DistributedGradReducer: fusion_type must be 0 (no fusion) or 1, "
                             f"got {fusion_type!r}")
        self.fusion_type = fusion_type
        self._fused = BucketedAllreduce(communicator, int(buff_size),
                                        comm_for=self._communicator_for)
        self._params_checked = False

    def check_parameters(self):
        """Raise ``CollectiveMismatchError`` on every rank unless all ranks hold the same
        parameter list (names, shapes, dtypes, in order). Runs once, before the first
        collective of ``__call__`` or ``broadcast_parameters``: ranks that built different
        models fail there with the first differing parameter, not with MPI_ERR_TRUNCATE."""
        if self._params_checked or self.communicator.size == 1:
            return
        entries = [f"{p.name} {'row-sliced' if _row_sliced(p) else tuple(p.shape)} {p.dtype}"
                   for p in self.parameters_]
        self.communicator.check_same_parameters("DistributedGradReducer", entries)
        self._params_checked = True

    def construct(self, grads):
        params = self.parameters_
        check_gradient_tuple(grads, len(params), "DistributedGradReducer", "the parameters")
        if self.communicator.size == 1 and not (self.mean and self.degree != 1):
            return tuple(grads)
        self.check_parameters()
        divisor = self.degree if self.mean else 1
        result = list(grads)
        local = [_row_sliced(p) for p in params]
        dense = [i for i, g in enumerate(grads) if not isinstance(g, RowTensor) and not local[i]]
        dense = self._scatter_sliced(dense, params, grads, result, divisor)
        if dense:
            for i, g in zip(dense, self._reduce_dense([params[i] for i in dense],
                                                      [grads[i] for i in dense], divisor)):
                result[i] = g
        for i, g in enumerate(grads):
            if local[i]:
                result[i] = _divided(g, params[i], divisor)
            elif isinstance(g, RowTensor):
                result[i] = gather_rows(self._communicator_for(g.device), g,  # every rank's rows
                                        params[i].dtype, divisor)
        return tuple(result)

    def _scatter_sliced(self, dense, params, grads, result, divisor):
        """Optimizer parallel: the gradients of parameters whose optimizer state is sliced
        over this group travel by reduce-scatter (each rank receives its slice only) into
        ``result``; returns the positions still to all-reduce."""
        arrays = [None if grads[i] is None else
                  gradient_array(grads[i], params[i], "DistributedGradReducer") for i in dense]
        ready = _accumulated_pieces([params[i] for i in dense], arrays, divisor)
        note_if_unused(bool(ready))
        arrays = [None if k in ready else a for k, a in enumerate(arrays)]
        pieces = scattered_gradients(self.communicator, [params[i] for i in dense], arrays,
                                     divisor)
        pieces.update(ready)
        for k, piece in pieces.items():
            result[dense[k]] = piece
        return [i for k, i in enumerate(dense) if k not in pieces]

    def broadcast_parameters(self, root=0):
        """Copy ``root``'s parameter values to every rank (collective; one call per dtype)."""
        self.check_parameters()
        by_comm = {}
        for p in self.parameters_:
            if _row_sliced(p):
                continue    # each rank holds different rows
            by_comm.setdefault(id(self._communicator_for(p.device)), []).append(p)
        for params in by_comm.values():
            fused_broadcast(self._communicator_for(params[0].device),
                            [(p.device, p.data) for p in params], root)

    # ---- dense: the one bucket path (DistOpt's too), into fresh buffers ----------------------
    def _reduce_dense(self, params, grads, divisor):
        arrays = [gradient_array(g, p, "DistributedGradReducer") for g, p in zip(grads, params)]
        threshold, splits = self._grouping(params)
        # fresh buffers: the results are handed out, so no later call may reuse their memory
        pending = self._fused.start(params, arrays, threshold, splits=splits, fresh=True,
                                    owner="DistributedGradReducer")
        out = [None] * len(params)
        for item in pending:
            device = item[1]
            for pos, view in self._fused.finish(params, item, divisor)[1]:
                out[pos] = Tensor._make(view, device)
        return out

    def _grouping(self, params):
        """``(threshold, splits)`` of the bucket plan: ``fusion_type=0`` or comm fusion off
        sends every gradient alone; fusion ids (``Cell.set_comm_fusion``) or
        ``comm_fusion``'s allreduce size/index modes fix the groups; otherwise the default
        4 MB buckets, split at ``all_reduce_fusion_config``."""
        kind, groups = ("alone", None) if self.fusion_type == 0 else \
            groups_for("allreduce", params)
        if kind == "alone":
            return 1, ()
        if kind == "ids":
            return _ALONE_THRESHOLD, FusionGroups(groups)
        if kind == "index":
            return _ALONE_THRESHOLD, groups
        return _ALONE_THRESHOLD, fusion_splits(len(self.parameters_))

    def _communicator_for(self, device):
        """Host-resident gradients (a host/device heterogeneous model) travel over the host
        communicator that bootstrapped NCCL: NCCL only moves device arrays."""
        return communicator_for(self.communicator, device)

    def __repr__(self):
        return (f"DistributedGradReducer(parameters={len(self.parameters_)}, mean={self.mean}, "
                f"degree={self.degree}, ranks={self.communicator.size})")


def _accumulated_pieces(params, arrays, divisor):
    """``{position: GradientPiece}`` for the gradients accumulation already reduce-scattered
    (``gradient_accumulation_shard``), divided by ``divisor``: they travel no more."""
    out = {}
    for k, (param, array) in enumerate(zip(params, arrays)):
        piece = None if array is None else ready_piece(param, array)
        if piece is not None:
            if divisor != 1:
                piece.values = piece.values / divisor
            out[k] = piece
    return out


def _row_sliced(param):
    """True for a row-sliced table: its gradient needs no reduction across ranks."""
    return getattr(param, "row_slice", None) is not None


def _divided(grad, param, divisor):
    """A row-sliced table's gradient divided by ``divisor`` (a new object; None stays)."""
    if grad is None or divisor == 1:
        return grad
    if isinstance(grad, RowTensor):
        return RowTensor(grad.indices, Tensor._make(grad.values.data / divisor, grad.device),
                         grad.dense_shape)
    data = gradient_array(grad, param, "DistributedGradReducer")
    return Tensor._make(data / divisor, param.device)
