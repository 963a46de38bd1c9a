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
reduce each parameter's gradient as backward reaches it: fusion ids do not group those.
"""
from .comm_fusion_options import check_comm_fusion
from .context import get_auto_parallel_context

__all__ = ["check_comm_fusion", "fusion_id", "groups_for"]

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
