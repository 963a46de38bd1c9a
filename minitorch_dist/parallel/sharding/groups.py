"""Communication groups of a sharded program: one sub-communicator per set of ranks, made once.

A collective over device-matrix axes runs among the ranks that differ only along those axes
(``layout.group_ranks``). ``GroupCache`` turns such a tuple of world ranks into a
``Communicator`` with ``parent.split(ranks)`` the first time it is asked and keeps it.

**Why this cannot deadlock.** ``split`` is collective over the *members* of the new group
(MPI ``Create_group``, the TCP and in-process backends; non-members need not call it). Two
ways to call it safely, both offered here:

* lazily (``get``): a rank creates a group right before its first collective in it. All
  members reach that collective at the same point of the same program, so they create the
  group together; ranks only ever wait for members of a group they are about to use anyway.
* eagerly (``create_all(device_matrix)``): every rank walks all groups of a device matrix in
  one global order (by axis subset, then by ranks) and creates those it belongs to. With a
  single order, the earliest pending group always has all its members waiting for it, so
  every creation completes.

The whole world is the parent itself; nothing is created for it.
"""
import itertools
import math

from .layout import group_ranks

__all__ = ["GroupCache"]


class GroupCache:
    """``ranks -> Communicator`` for rank ``rank`` of a ``world``-rank job.

    ``parent``: the world communicator (default: ``communication.get_communicator()``, looked
    up on first need). Call it as ``cache(ranks)`` or ``cache.get(ranks)``.

    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(4, lambda comm: GroupCache(4, comm.rank, comm).get((0, 2) if comm.rank % 2 == 0
    ...                                                              else (1, 3)).size)
    [2, 2, 2, 2]
    """

    def __init__(self, world, rank, parent=None):
        self.world = int(world)
        self.rank = int(rank)
        self._parent = parent
        self._groups = {}

    @property
    def parent(self):
        if self._parent is None:
            from ...communication import get_communicator
            self._parent = get_communicator()
        return self._parent

    def get(self, ranks):
        """The communicator over ``ranks`` (world ranks, in group order); this rank must be one."""
        ranks = tuple(int(r) for r in ranks)
        if self.rank not in ranks:
            raise ValueError(f"GroupCache: rank {self.rank} asked for the group {ranks}, which "
                             "it is not a member of")
        comm = self._groups.get(ranks)
        if comm is None:
            if ranks == tuple(range(self.world)):
                comm = self.parent
            else:
                comm = self.parent.split(list(ranks))
                if comm is None:
                    raise RuntimeError(f"GroupCache: split({ranks}) returned no communicator on "
                                       f"member rank {self.rank}")
            self._groups[ranks] = comm
        return comm

    __call__ = get

    def create_all(self, device_matrix):
        """Create now every group over every subset of ``device_matrix``'s axes that this rank
        belongs to, in one global order (see the module docstring); returns ``self``."""
        n = len(device_matrix)
        if math.prod(device_matrix) != self.world:
            raise ValueError(f"GroupCache.create_all: device matrix {list(device_matrix)} spans "
                             f"{math.prod(device_matrix)} devices, the job has {self.world}")
        axes = [a for a in range(n) if device_matrix[n - 1 - a] > 1]
        for k in range(1, len(axes) + 1):
            for subset in itertools.combinations(axes, k):
                groups = sorted({group_ranks(device_matrix, subset, r) for r in range(self.world)})
                for ranks in groups:
                    if self.rank in ranks:
                        self.get(ranks)
        return self

    def communicators(self):
        """The distinct communicators handed out so far (the parent included when used): sum
        their ``comm_stats()`` for what this rank sent over all groups."""
        seen = {}
        for comm in self._groups.values():
            seen[id(comm)] = comm
        return list(seen.values())

    def __len__(self):
        return len(self._groups)

    def __repr__(self):
        return f"GroupCache(world={self.world}, rank={self.rank}, groups={len(self._groups)})"
