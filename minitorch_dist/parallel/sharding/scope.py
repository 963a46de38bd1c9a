"""Per-thread state of operator sharding: is a sharded run or a trace under way on this
thread, and which communicator is the world.

Ranks may be threads (``communication.run_ranks``): each thread then names its own world
with ``sharding_world(comm)``; processes use the initialized world communicator.

>>> from minitorch_dist.communication import run_ranks
>>> from minitorch_dist.parallel.sharding.scope import current_world, sharding_world
>>> def rank(comm):
...     with sharding_world(comm):
...         return current_world() is comm
>>> run_ranks(2, rank)
[True, True]
"""
from ... import communication
from ...thread_state import ThreadState

__all__ = ["sharding_world", "current_world", "running", "tracing", "run_scope",
           "trace_scope"]

_state = ThreadState(running=False, tracing=False, world=None)


class sharding_world:
    """``with sharding_world(comm):`` sharded calls on this thread run over ``comm``."""

    def __init__(self, comm):
        self.comm = comm

    def __enter__(self):
        self.previous, _state.world = _state.world, self.comm
        return self.comm

    def __exit__(self, *exc):
        _state.world = self.previous
        return False


def current_world():
    """This thread's world communicator: the one named by ``sharding_world``, else the
    initialized world, else None (one process)."""
    if _state.world is not None:
        return _state.world
    return communication.get_communicator() if communication.GlobalComm.INITED else None


def running():
    """True inside a sharded run on this thread (its primitives go to the executor)."""
    return _state.running


def tracing():
    """True while a network is being traced on this thread."""
    return _state.tracing


class _Flag:
    def __init__(self, key):
        self.key = key

    def __enter__(self):
        self.previous, _state[self.key] = _state[self.key], True
        return self

    def __exit__(self, *exc):
        _state[self.key] = self.previous
        return False


def run_scope():
    """``with run_scope():`` marks a sharded run on this thread."""
    return _Flag("running")


def trace_scope():
    """``with trace_scope():`` marks a trace on this thread."""
    return _Flag("tracing")
