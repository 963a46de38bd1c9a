"""MindSpore's collective primitives (``ops.AllReduce``, ``ops.AllGather``, ...) with its
signatures, over the differentiable collectives of ``collectives.py``.

MindSpore writes ``ops.AllGather(group)`` and ``ops.ReduceScatter(op, group)`` (always along
axis 0), ``ops.AlltoAll(split_count, split_dim, concat_dim, group)`` and
``ops.Broadcast(root_rank, group)`` (a tuple of tensors in, a tuple out). ``group`` is a name
from ``communication.create_group`` (default: the world). It is resolved at the first call,
so a network may build the primitive on every rank; calling it on a rank outside the group
raises a ValueError naming the group and the rank. Backward is MindSpore's: AllReduce(sum)
-> AllReduce(sum), AllGather -> ReduceScatter(sum), ReduceScatter -> AllGather, AlltoAll ->
the reverse AlltoAll, Broadcast -> the gradients summed on the root. They work in every
training style (``value_and_grad``, ``TrainOneStepCell``, ``Model``) because they are
ordinary primitives on the tape. ``Send``, ``Receive`` and ``NeighborExchange`` are in
``p2p_ops.py``.
"""
from . import collectives as _c
from .p2p_ops import NeighborExchange, Receive, Send

__all__ = ["ReduceOp", "AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Broadcast",
           "Send", "Receive", "NeighborExchange"]


class ReduceOp:
    """MindSpore's reduction names (``PROD`` is refused by the primitives here)."""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


def _op(owner, op, allowed):
    if op not in allowed:
        raise ValueError(f"{owner}: op must be one of {allowed} (ReduceOp.SUM, ...), got {op!r}")
    return op


class _Lazy:
    """Resolves ``group`` (a name, None or a Communicator) at the first call."""

    def _resolve(self):
        if self.communicator is None:
            self.communicator = _c.resolve_communicator(self.group, type(self).__name__)
        return self.communicator


class AllReduce(_Lazy, _c.AllReduce):
    """``ops.AllReduce(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)``."""

    def __init__(self, op=ReduceOp.SUM, group=None):
        self.op = _op("AllReduce", op, _c._ALLREDUCE_OPS)
        self.group, self.communicator = group, None

    def __call__(self, x):
        self._resolve()
        return _c.AllReduce.__call__(self, x)


class AllGather(_Lazy, _c.AllGather):
    """``ops.AllGather(group)``: the ranks' tensors concatenated along axis 0."""

    def __init__(self, group=None):
        self.axis, self.group, self.communicator = 0, group, None

    def __call__(self, x):
        self._resolve()
        return _c.AllGather.__call__(self, x)


class ReduceScatter(_Lazy, _c.ReduceScatter):
    """``ops.ReduceScatter(op=ReduceOp.SUM, group)``: the sum, cut along axis 0."""

    def __init__(self, op=ReduceOp.SUM, group=None):
        self.op = _op("ReduceScatter", op, _c._REDUCE_SCATTER_OPS)
        self.axis, self.group, self.communicator = 0, group, None

    def __call__(self, x):
        self._resolve()
        return _c.ReduceScatter.__call__(self, x)


class AlltoAll(_Lazy, _c.AllToAll):
    """``ops.AlltoAll(split_count, split_dim, concat_dim, group)``; ``split_count`` must be
    the group's size."""

    def __init__(self, split_count, split_dim, concat_dim, group=None):
        for name, value in (("split_count", split_count), ("split_dim", split_dim),
                            ("concat_dim", concat_dim)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"AlltoAll: {name} must be an int, got {value!r}")
        self.split_count = split_count
        self.split_axis, self.concat_axis = split_dim, concat_dim
        self.group, self.communicator = group, None

    def __call__(self, x):
        comm = self._resolve()
        if self.split_count != comm.size:
            raise ValueError(f"AlltoAll: split_count {self.split_count} must equal the size "
                             f"{comm.size} of group {self.group!r}")
        return _c.AllToAll.__call__(self, x)


class Broadcast(_Lazy, _c.Broadcast):
    """``ops.Broadcast(root_rank, group)``: takes and returns a tuple of tensors."""

    def __init__(self, root_rank, group=None):
        self.root = _c._check_int("Broadcast", "root_rank", root_rank)
        self.group, self.communicator = group, None

    def __call__(self, inputs):
        comm = self._resolve()
        _c._check_root("Broadcast", self.root, comm.size)
        if not isinstance(inputs, (tuple, list)):
            raise TypeError(f"Broadcast: MindSpore's Broadcast takes a tuple of tensors, got "
                            f"{type(inputs).__name__}")
        return tuple(_c.Broadcast.__call__(self, x) for x in inputs)
