"""Weights kept sliced between steps (MindSpore's ``optimizer_level="level3"``; ZeRO-3).

With optimizer parallel at level 3, a sliced parameter keeps only this rank's flat slice
between optimizer steps. Its whole values come back by an all-gather over its slicing group
when something first reads it: every primitive calls ``Tensor.prepare_use`` before reading a
tensor, and a parameter whose ``deferred_init`` is set draws its values there (the hook
``no_init_parameters`` uses). ``SlicedWeight`` is that ``deferred_init``: its ``draw`` is
the all-gather. The whole weight then lives until the end of the optimizer step (the
backward reads it from the tape anyway), and ``release`` drops it again, keeping the
updated slice only. ``asnumpy``, ``save_checkpoint`` and ``set_data`` go through the same
hook, so they see (or write) whole values; like any collective, every rank of the group
must make the same reads in the same order (a data-parallel job does).
"""
import math

from ..comm.collectives import communicator_for

__all__ = ["SlicedWeight", "release", "current_slice", "resident_bytes", "is_sliced"]


class SlicedWeight:
    """This rank's flat slice ``values`` (elements ``[start, stop)``) of a weight of
    ``shape``; ``draw()`` all-gathers every rank's slice of ``comm`` into the whole."""

    def __init__(self, comm, values, start, stop, shape, device):
        self.comm, self.values = comm, values
        self.start, self.stop = int(start), int(stop)
        self.shape, self.device = tuple(shape), device

    @property
    def size(self):
        return math.prod(self.shape)

    def draw(self, index=None):
        if index is not None:
            raise NotImplementedError(
                "optimizer_level='level3': a weight sliced by optimizer parallel is gathered "
                "whole, not by block; operator-sharded parameters cannot use level3")
        chunk = math.ceil(self.size / self.comm.size)
        xp = self.device.xp
        row = xp.zeros(chunk, self.values.dtype)
        row[:self.values.shape[0]] = self.values
        gathered = communicator_for(self.comm, self.device).allgather(row)   # (ranks, chunk)
        return gathered.reshape(-1)[:self.size].reshape(self.shape)

    def stream_words(self):
        raise RuntimeError(
            "optimizer_level='level3': this parameter's weight is already sliced over the "
            "data-parallel ranks (trained); create the DistributedGradReducer before training")

    def __repr__(self):
        return f"SlicedWeight([{self.start}:{self.stop}] of {self.shape})"


def is_sliced(param):
    """True while ``param`` holds only its slice (no whole values on this rank)."""
    return isinstance(getattr(param, "deferred_init", None), SlicedWeight)


def release(param, comm, start, stop, values):
    """Keep only ``values`` (this rank's flat ``[start, stop)``, copied) of ``param``: its
    whole data becomes a zero-stride view (no memory) until the next use gathers it."""
    xp = param.device.xp
    kept = xp.array(values, copy=True)
    param.deferred_init = SlicedWeight(comm, kept, start, stop, param.shape, param.device)
    param.data = xp.broadcast_to(xp.zeros((), param.data.dtype), param.shape)


def current_slice(param, start, stop):
    """The values of ``param``'s flat ``[start, stop)``: its kept slice while sliced, else
    cut (copied) from its whole data."""
    deferred = getattr(param, "deferred_init", None)
    if isinstance(deferred, SlicedWeight):
        return deferred.values
    return param.data.reshape(-1)[start:stop].copy()


def resident_bytes(param):
    """Bytes ``param`` holds on this rank: its slice while sliced, else its whole data."""
    deferred = getattr(param, "deferred_init", None)
    if isinstance(deferred, SlicedWeight):
        return deferred.values.nbytes
    return param.data.nbytes
