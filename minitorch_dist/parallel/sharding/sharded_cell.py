"""``ShardedCell``: a network run operator-sharded, as a Cell one can hold and wrap.

Under ``SEMI_AUTO_PARALLEL``/``AUTO_PARALLEL`` every call of a network is sharded already
(``parallel/extension.py`` sends it to a ``ShardedCall``); ``ShardedCell`` names that
explicitly, for a group of thread ranks (``group``, as the tests pass from ``run_ranks``) or
for code that wants to hold the sharded network. ``optimizer`` (optional) has its state
sliced with the parameters (every live optimizer holding them follows anyway).
"""
from ...nn.cell import Cell
from ..context import shards_operators
from .sharded_call import ShardedCall, dataset_layouts, split_layout

__all__ = ["ShardedCell", "shards_operators", "dataset_layouts", "split_layout"]


class ShardedCell(Cell):
    """``network`` run operator-sharded (see the module docstring)."""

    _name_scope = False
    _runs_sharded = True        # its own ShardedCall runs it: the call path passes it through

    def __init__(self, network, optimizer=None, group=None):
        super().__init__()
        self.network = network
        object.__setattr__(self, "call", ShardedCall(network, optimizer, group))

    @property
    def program(self):
        """The sharded program of the last call (None before the first)."""
        return self.call.program

    def construct(self, *inputs):
        return self.call(*inputs)
