"""Optimizer state kept for one slice of a parameter (MindSpore's optimizer parallel, ZeRO).

When the ranks of a data-parallel group all take the same optimizer step on the same
parameter, each can update a different part of it and keep the optimizer state (momentum,
Adam's moments) for that part only; the updated parts are then gathered into the whole
parameter on every rank. Which part a rank owns, and how the parts are gathered, is decided
by a higher layer (the parallel layer installs a planner with ``set_state_slice_planner``);
this module holds only the vocabulary the optimizer understands, so ``nn`` imports nothing
from ``parallel``:

* ``StateSlice(start, stop, finish, read=None)``: this rank updates the flat elements
  ``[start, stop)`` of the parameter; ``finish(param, piece)`` is called after the update
  with the updated flat piece and writes the whole parameter (an all-gather) or keeps the
  piece alone (weights sliced between steps, whose ``read(param)`` gives the piece);
* ``GradientPiece(values, start, stop, shape)``: a gradient that arrives already cut to the
  rank's slice (a reduce-scatter made it), standing in for the whole gradient of ``shape``.

>>> import numpy as np
>>> piece = GradientPiece(np.ones(2, np.float32), 2, 4, (2, 3))
>>> piece.shape, piece.values.tolist()
((2, 3), [1.0, 1.0])
"""

__all__ = ["StateSlice", "GradientPiece", "SlicePlan", "set_state_slice_planner", "slice_plan"]


class StateSlice:
    """This rank's flat range ``[start, stop)`` of one parameter; ``finish(param, piece)``
    rebuilds the whole parameter from every rank's updated piece. ``read(param)``, when
    given, returns the slice's current values (a parameter whose weight is kept sliced
    between steps has no whole values to cut them from)."""

    __slots__ = ("start", "stop", "finish", "read")

    def __init__(self, start, stop, finish, read=None):
        self.start, self.stop, self.finish = int(start), int(stop), finish
        self.read = read

    @property
    def size(self):
        return self.stop - self.start

    def __repr__(self):
        return f"StateSlice({self.start}, {self.stop})"


class GradientPiece:
    """A gradient already cut to this rank's slice: ``values`` (a 1-D array of
    ``stop - start`` elements, on ``device``) of a gradient whose whole shape is ``shape``."""

    __slots__ = ("values", "start", "stop", "shape", "device")

    def __init__(self, values, start, stop, shape, device=None):
        self.values, self.start, self.stop = values, int(start), int(stop)
        self.shape, self.device = tuple(shape), device

    def __repr__(self):
        return f"GradientPiece([{self.start}:{self.stop}] of {self.shape})"


class SlicePlan(list):
    """One ``StateSlice`` or None per parameter of an optimizer. ``flush()`` runs once the
    step's updates are done (the optimizer calls it): a planner that gathers several slices
    in one collective does it there."""

    def flush(self):
        """Finish the step's pending gathers (none by default)."""


_planner = [None]


def set_state_slice_planner(planner):
    """Install ``planner(optimizer) -> None | SlicePlan`` (one ``StateSlice`` or None per
    parameter of the optimizer); returns the previous planner. None removes it."""
    previous = _planner[0]
    _planner[0] = planner
    return previous


def slice_plan(optimizer):
    """The installed planner's answer for ``optimizer`` (None: every parameter whole)."""
    planner = _planner[0]
    return None if planner is None else planner(optimizer)
