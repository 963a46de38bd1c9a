"""Accumulated gradients kept sliced (MindSpore's ``parallel_optimizer_config=
{"gradient_accumulation_shard": True}``).

Under gradient accumulation with optimizer parallel, each micro-batch's gradient of a sliced
parameter is reduce-scattered at once (one call per fusion group and micro-batch: the extra
communication MindSpore documents) and only this rank's slice of the sum is accumulated. So
the buffer that lives across the ``micro_size`` micro-batches holds ``1 / k`` of those
gradients per rank instead of all of them.

The accumulated slices reach ``DistributedGradReducer`` beside the ordinary gradient path:
the loss hands out, through the tape, a whole-shaped array per parameter that holds this
rank's summed slice in place and zeros elsewhere, and ``ready_piece`` gives the reducer the
slice itself when it receives that very array, so it reduces nothing again. Any other
consumer still gets correct sums from that array: a reduce-scatter of it hands every rank
its own slice back.
"""
from ...nn.optim import state_slicing
from ...runtime import _once
from ..context import ParallelMode, get_auto_parallel_context
from .optimizer_parallel import parallel_optimizer_on, scattered_gradients

__all__ = ["ShardedAccumulation", "ready_piece", "note_if_unused", "refuse_in_pipeline"]

# id(parameter) -> (parameter, the array handed out, its summed slice); keyed by id since a
# Tensor's == is elementwise; one entry per parameter, replaced at the next step
_ready = {}


def _world():
    from ..sharding.scope import current_world
    return current_world()


def _asked():
    return get_auto_parallel_context("parallel_optimizer_config")["gradient_accumulation_shard"]


class ShardedAccumulation:
    """One step's sliced sums. ``for_step()`` returns None unless the option acts."""

    def __init__(self, world, params):
        self.world, self.params = world, params
        self.pieces = {}          # position -> GradientPiece (summed over ranks and micro-batches)

    @classmethod
    def for_step(cls, params):
        if not _asked() or not parallel_optimizer_on():
            return None
        mode = get_auto_parallel_context("parallel_mode")
        if mode != ParallelMode.DATA_PARALLEL or get_auto_parallel_context("pipeline_stages") > 1:
            raise NotImplementedError(
                "parallel_optimizer_config: gradient_accumulation_shard=True acts under "
                f"parallel_mode='data_parallel' without pipeline stages, not {mode!r} with "
                f"pipeline_stages={get_auto_parallel_context('pipeline_stages')}; set it False")
        return cls(_world(), params)

    def add(self, arrays):
        """Reduce-scatter this micro-batch's gradients (``arrays``, aligned with the
        parameters) of the sliced parameters and add this rank's slices to the sums; returns
        ``arrays`` with those positions set to None (the rest the caller sums whole)."""
        pieces = scattered_gradients(self.world, self.params, arrays, 1)
        for pos, piece in pieces.items():
            held = self.pieces.get(pos)
            if held is None:
                self.pieces[pos] = piece
            else:
                held.values = held.values + piece.values
        return [None if pos in pieces else a for pos, a in enumerate(arrays)]

    def held_bytes(self):
        return sum(p.values.nbytes for p in self.pieces.values())

    def hand_over(self, sums):
        """Fill ``sums`` at the sliced positions with whole-shaped arrays (this rank's slice in
        place, zeros elsewhere) and remember which slice each stands for."""
        for pos, piece in self.pieces.items():
            param = self.params[pos]
            xp = param.device.xp
            whole = xp.zeros(param.data.size, piece.values.dtype)
            whole[piece.start:piece.stop] = piece.values
            whole = whole.reshape(param.shape)
            _ready[id(param)] = (param, whole, piece)
            sums[pos] = whole


def refuse_in_pipeline():
    """A pipeline's micro-batch accumulation keeps its sums whole: asked for sliced ones
    (with optimizer parallel on), it is refused by name, alike on every rank."""
    if _asked() and parallel_optimizer_on():
        raise NotImplementedError(
            "parallel_optimizer_config: gradient_accumulation_shard=True acts under "
            "parallel_mode='data_parallel' gradient accumulation; a pipeline's micro-batch "
            "accumulation keeps its sums whole; set it False")


def note_if_unused(found_any):
    """Called by the reducer at a step with optimizer parallel: ``gradient_accumulation_shard``
    acts under gradient accumulation only (as MindSpore documents); a step without one is
    noted once."""
    if not found_any and _asked() and parallel_optimizer_on():
        _once("gradient_accumulation_shard.unused",
              "parallel_optimizer_config: gradient_accumulation_shard=True acts under gradient "
              "accumulation (parallel.nn.GradAccumulation, grad_accumulation_step); this "
              "training step accumulates nothing, so there is nothing to keep sliced")


def ready_piece(param, array):
    """The summed slice (``GradientPiece``) behind ``array`` when it is the one gradient
    accumulation handed out for ``param`` (taken once), else None."""
    entry = _ready.get(id(param))
    if entry is None or entry[0] is not param or entry[1] is not array:
        return None
    del _ready[id(param)]
    piece = entry[2]
    return state_slicing.GradientPiece(piece.values, piece.start, piece.stop, piece.shape,
                                       piece.device)
