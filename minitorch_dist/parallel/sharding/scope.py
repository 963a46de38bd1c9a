"""Per-thread state of operator sharding: is a sharded run or a trace under way on this
thread (and has the trace reached a training step), and which communicator is the world.

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
           "trace_scope", "note_training_step", "TraceStopped"]

_state = ThreadState(running=False, tracing=False, world=None, training_step=None)


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


class _TraceFlag(_Flag):
    """A trace on this thread; ``training_step`` is, after the block, what the trace reached
    that makes the traced call a training step (None: it is a network)."""

    def __init__(self):
        super().__init__("tracing")
        self.training_step = None

    def __enter__(self):
        self.outer_step, _state.training_step = _state.training_step, None
        return super().__enter__()

    def __exit__(self, *exc):
        self.training_step, _state.training_step = _state.training_step, self.outer_step
        return super().__exit__(*exc)


def trace_scope():
    """``with trace_scope() as scope:`` marks a trace on this thread; ``scope.training_step``
    tells afterwards whether it reached a training step (``note_training_step``).

    >>> with trace_scope() as scope:
    ...     try:
    ...         note_training_step("value_and_grad")
    ...     except TraceStopped:
    ...         pass
    >>> scope.training_step, tracing()
    ('value_and_grad', False)
    """
    return _TraceFlag()


class TraceStopped(BaseException):
    """Ends a trace at the first gradient computation or optimizer call. Only ``graph.trace``
    catches it, and returns the graph with ``training_step`` set: its callers decide on that
    value. The user's code after that point must not run in a trace, because a trace computes
    with the real parameters: a hand-written update (``p.set_data(p * 0.9 - lr * g)``), a
    print or a counter would act once more than the user asked. A BaseException, so that a
    user's ``except Exception`` around the step does not swallow it."""


def note_training_step(what):
    """Inside a trace: record that the traced call reached ``what`` (a gradient computation,
    an optimizer), which makes it a training step, and stop the trace there (``TraceStopped``;
    its caller runs the step as written). Outside a trace it does nothing."""
    if _state.tracing:
        _state.training_step = what
        raise TraceStopped(what)
