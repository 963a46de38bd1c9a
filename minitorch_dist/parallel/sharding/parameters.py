"""Giving a parameter its slice: each rank keeps only its block, and optimizer state follows.

Every configuration must start from the weights one process would have drawn:

* a parameter with values (made the usual way) takes its block of rank 0's values, which
  are broadcast first, since processes that did not call ``set_seed`` alike drew different
  weights;
* a parameter made under ``nn.utils.no_init_parameters`` has no values yet: it draws only
  its block, from the random stream the full tensor would have used (rank 0's stream state
  is broadcast first), so no rank ever holds a full-size copy.

The parameter then carries ``sharding_layout`` (its ``TensorLayout``, full shape included),
``sharding_rank`` and ``sharding_comm`` (the ranks that share it); checkpoints record the
first two (``checkpoint.layout_entries``) or gather the whole tensor over the third
(``checkpoint.integrated_entries``). Every live
optimizer holding the parameter slices its state the same way.
"""
import threading
import weakref

from ...nn.optim.optimizer import optimizers_holding
from ..comm.initial_values import broadcast_initial_values

__all__ = ["slice_parameter", "sliced_parameters"]

# name -> weak references to the parameters given a slice under that name, newest last:
# ranks run as threads slice one parameter each, and one rank's network may be gone while
# another still writes its strategy file
_sliced = {}
_sliced_lock = threading.Lock()


def sliced_parameters():
    """``{name: parameter}`` of the live parameters given a slice in this process (of
    several under one name, the one sliced last)."""
    found = {}
    with _sliced_lock:
        for name, refs in list(_sliced.items()):
            refs[:] = [r for r in refs if r() is not None]
            if refs:
                found[name] = refs[-1]()
            else:
                del _sliced[name]
    return {name: param for name, param in found.items() if param is not None}


def _register(param):
    with _sliced_lock:
        refs = _sliced.setdefault(param.name, [])
        refs[:] = [r for r in refs if r() is not None] + [weakref.ref(param)]


def slice_parameter(param, layout, rank, comm, optimizer=None):
    """Cut ``param`` (full-size, or deferred) to ``layout``'s block for ``rank``; a
    parameter sliced already keeps its layout (the executor redistributes from it)."""
    if getattr(param, "sharding_layout", None) is not None:
        return
    index = layout.slice_for(rank)
    broadcast_initial_values(param, comm)
    if getattr(param, "deferred_init", None) is not None:
        param.init_data(index)
    else:
        param.data = param.data[index].copy()   # a new shape: set_data keeps shapes
    param.sharding_layout, param.sharding_rank, param.sharding_comm = layout, rank, comm
    _register(param)
    holders = list(optimizers_holding(param))
    # ``optimizer`` follows the parameters it updates only: a sliced buffer (BatchNorm's
    # moving mean) or a frozen weight is none of its business
    if optimizer is not None and optimizer not in holders \
            and id(param) in getattr(optimizer, "_index_of", {}):
        holders.append(optimizer)
    for opt in holders:
        for state in opt.states_of(param):
            if tuple(state.shape) == layout.shape:
                state.data = state.data[index].copy()
                state.sharding_layout, state.sharding_rank = layout, rank
                state.sharding_comm = comm
