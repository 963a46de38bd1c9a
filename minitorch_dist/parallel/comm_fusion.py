"""Communication fusion: which gradients and parameter slices travel in one collective.

MindSpore's three ways, all honoured here:

* ``Cell.set_comm_fusion(id)`` gives every parameter of a cell the fusion id ``id``
  (``Parameter.comm_fusion``); the parameters of one id travel together;
* ``set_auto_parallel_context(comm_fusion={...})`` with keys ``"openstate"`` (False: no
  fusion, every gradient alone) and ``"allreduce"``, ``"allgather"``, ``"reducescatter"``,
  each ``{"mode": "auto" | "size" | "index", "config": ...}``: ``"auto"`` uses the fusion
  ids where a cell set them, else the default plan (allreduce: the 4 MB buckets of
  ``buckets.py``; all-gather and reduce-scatter: groups of at most 64 MB); ``"size"`` groups
  consecutive parameters up to ``config`` MB; ``"index"`` (allreduce only) splits at the
  parameter positions ``config``, as ``all_reduce_fusion_config`` does;
* ``all_reduce_fusion_config=[i, j]``: split points, the same as allreduce ``"index"``.

Which collective: the data-parallel gradient allreduce (``DistributedGradReducer``, so
``TrainOneStepCell`` and ``Model``), and under optimizer parallel the gradients'
reduce-scatter and the updated slices' all-gather. A semi/auto parallel network's mirrors
reduce each parameter's gradient as backward reaches it, alone; under gradient
accumulation, and inside ``FusedMirrors`` (a differentiation whose forward it spans), they
hand their gradients back unreduced and ``reduce_deferred`` sums them afterwards, one
allreduce per fusion group.
"""
import bisect

from ..communication import hooks
from .comm.collectives import MirrorDeferral
from .comm.final_reduction import FinalReductions
from .comm.rows import gather_rows
from .comm_fusion_options import check_comm_fusion
from .context import get_auto_parallel_context, shards_operators

__all__ = ["check_comm_fusion", "fusion_id", "groups_for", "reduce_deferred", "FusedMirrors"]

_AUTO_MB = 64


def fusion_id(param):
    """The fusion id given to ``param`` (``Cell.set_comm_fusion`` or an assignment to
    ``Parameter.comm_fusion``), or None when none was given (a class default does not count:
    the default plan applies)."""
    return getattr(param, "__dict__", {}).get("comm_fusion")


def _by_size(params, megabytes):
    limit = megabytes * (1 << 20)
    groups, current, used = [], 0, 0
    for p in params:
        nbytes = p.data.size * p.data.itemsize
        if used and used + nbytes > limit:
            current += 1
            used = 0
        groups.append(current)
        used += nbytes
    return tuple(groups)


def groups_for(op, params):
    """How the collective ``op`` groups ``params``: ``("alone", None)`` (every parameter its
    own call), ``("ids", per-parameter group keys)``, ``("index", split positions)`` or
    ``("default", None)`` (the caller's own plan)."""
    config = get_auto_parallel_context("comm_fusion")
    if not config["openstate"]:
        return "alone", None
    mode, value = config[op]["mode"], config[op]["config"]
    if mode == "size":
        return "ids", _by_size(params, value)
    if mode == "index":
        return "index", tuple(i for i in value if i < len(params))
    ids = [fusion_id(p) for p in params]
    if any(i is not None for i in ids):
        return "ids", tuple(1 if i is None else i for i in ids)   # MindSpore's default id: 1
    return "default", (None if op == "allreduce" else _by_size(params, _AUTO_MB))


def _allreduce_keys(params):
    """One allreduce group key per parameter (``groups_for("allreduce", ...)``)."""
    kind, groups = groups_for("allreduce", params)
    if kind == "alone":
        return list(range(len(params)))
    if kind == "ids":
        return list(groups)
    if kind == "index":
        return [bisect.bisect_right(groups, k) for k in range(len(params))]
    return [0] * len(params)


def reduce_deferred(params, sums, deferral):
    """Sum, over its mirror's ranks, the gradient (``sums[k]``, an array) of every parameter
    whose mirror was deferred (semi/auto parallel): one allreduce per fusion group and
    communicator, in place in ``sums``. A sparse (``RowTensor``) gradient has its rows
    gathered alone, as its mirror would have."""
    found = [(k, deferral.comm_of(p.data)) for k, p in enumerate(params) if sums[k] is not None]
    found = [(k, comm) for k, comm in found if comm is not None]
    for k, comm in found:
        if hasattr(sums[k], "indices"):          # a RowTensor
            sums[k] = gather_rows(comm, sums[k])
    found = [(k, comm) for k, comm in found if not hasattr(sums[k], "indices")]
    if not found:
        return
    keys = _allreduce_keys([params[k] for k, _ in found])
    groups = {}
    for key, (k, comm) in zip(keys, found):
        groups.setdefault((id(comm), key, str(sums[k].dtype)), (comm, []))[1].append(k)
    for comm, members in groups.values():
        xp = params[members[0]].device.xp
        flat = xp.concatenate([sums[k].reshape(-1) for k in members])
        flat = comm.allreduce(flat, "sum")
        at = 0
        for k in members:
            n = sums[k].size
            sums[k] = flat[at:at + n].reshape(sums[k].shape)
            at += n


def _has_copies(network):
    """True when ``network`` (the differentiated function or cell) holds a
    ``MicroBatchInterleaved``: each copy's call lets the parameters in through mirrors of its
    own, so deferred, their gradients meet on the parameter and travel once, not once per
    copy."""
    from .micro_batch_interleaved import MicroBatchInterleaved
    target = getattr(network, "__wrapped__", network)
    cells = getattr(target, "cells_and_names", None)
    return cells is not None and any(isinstance(c, MicroBatchInterleaved) for _, c in cells())


class FusedMirrors:
    """Comm fusion for a semi/auto parallel network's gradients. ``with FusedMirrors(weights)
    as fused:`` around the forward of a differentiation, then ``fused.finish(targets, grads)``
    after its backward: where fusion groups are set (``Cell.set_comm_fusion`` ids, or
    ``comm_fusion``'s allreduce "size"/"index" modes), the mirrors inside hand their
    gradients back unreduced and ``finish`` reduces them, one allreduce per group; so do
    they under the launcher's compute slots (``hooks.overlap_allowed()`` False), the default
    group being all of them, and there the network's closing all-reduce (a loss averaged
    over the global batch) waits until after backward as well (``comm/final_reduction.py``),
    so that no rank waits for the others holding its activations; otherwise nothing changes (each mirror reduces its gradient
    alone as backward reaches it).
    ``network`` (the function or cell differentiated): one holding a
    ``MicroBatchInterleaved`` defers too, so the copies' gradients travel once per step."""

    def __init__(self, weights, network=None):
        self.deferral = None
        weights = list(weights or ())
        # only a sharded network has mirrors; a pipeline's runner runs its own backward
        # passes, so its mirrors stay as they are
        if not weights or not shards_operators() \
                or get_auto_parallel_context("pipeline_stages") != 1:
            return
        # under compute slots (not overlap_allowed) a rank must not wait for its peers in
        # the middle of its backward, holding its activations off its slot
        slots = not hooks.overlap_allowed()
        if groups_for("allreduce", weights)[0] in ("ids", "index") or _has_copies(network) \
                or slots:
            self.deferral = MirrorDeferral()
            if slots:
                # and the forward's closing all-reduce (a loss averaged over the global
                # batch) waits until after backward too: comm/final_reduction.py
                self.deferral.final_reductions = FinalReductions()

    def __enter__(self):
        if self.deferral is not None:
            self.deferral.__enter__()
        return self

    def __exit__(self, *exc):
        if self.deferral is not None:
            self.deferral.__exit__(*exc)
        return False

    def finish(self, targets, grads):
        """``grads`` (arrays, RowTensors or None, aligned with ``targets``) with the deferred
        mirrors' reductions done; a new list."""
        grads = list(grads)
        if self.deferral is not None and self.deferral.comms:
            reduce_deferred(list(targets), grads, self.deferral)
        if self.deferral is not None and self.deferral.final_reductions is not None:
            self.deferral.final_reductions.finish()
        return grads
