"""What tools above the layers learn from the communicators: new ones, and the current step.

The launcher watches every rank of a job for peers that left early (``launch/watchdog.py``).
It needs two things from the layers below, which must not import it:

* each communicator it should watch, when it is made: ``MPICommunicator`` calls
  ``communicator_created(self)`` at the end of its constructor, which calls every function
  registered with ``on_communicator_created`` (the rank runner and ``spawn`` register the
  watchdog's ``watch`` there);
* the training step a rank is in, named in its messages: ``Model.train`` records it with
  ``set_step``, and the watchdog reads it back with ``current_step``.

The launcher's ``--compute-slots`` (``launch/compute_slots.py``) needs the reverse: to know
when a rank stops computing and waits for others. It installs a guard with
``set_wait_guard``; every blocking communication runs inside ``blocking_wait()``, which
gives the rank's slot back for the wait and takes one again afterwards, and
``quiet_waits()`` tells the MPI backend to wait by polling with sleeps instead of spinning.
``overlap_allowed()`` is False then: a rank that starts communicating in the middle of its
backward (bucketed gradients as they become final) would wait, off its slot, while still
holding its activations; under slots such code should communicate after backward instead.

Without a launcher nothing is registered, and both cost a dictionary look-up.

>>> from minitorch_dist.communication import hooks
>>> seen = []
>>> hooks.on_communicator_created(seen.append)
>>> hooks.communicator_created("comm")
>>> hooks.remove_communicator_hook(seen.append); seen
['comm']
>>> hooks.set_step(3); hooks.current_step()
3
>>> hooks.set_step(None)
>>> with hooks.blocking_wait():    # no guard installed: nothing happens
...     hooks.quiet_waits(), hooks.overlap_allowed()
(False, True)
"""
import contextlib

__all__ = ["on_communicator_created", "remove_communicator_hook", "communicator_created",
           "set_step", "current_step", "set_wait_guard", "blocking_wait", "quiet_waits", "overlap_allowed"]

_created_hooks = []
_state = {"step": None, "guard": None}
_NO_GUARD = contextlib.nullcontext()


def on_communicator_created(fn):
    """Call ``fn(communicator)`` for every communicator made from now on (once per ``fn``:
    registering the same function again changes nothing)."""
    if fn not in _created_hooks:
        _created_hooks.append(fn)


def remove_communicator_hook(fn):
    """Stop calling ``fn`` (registered with ``on_communicator_created``); absent: no-op."""
    if fn in _created_hooks:
        _created_hooks.remove(fn)


def communicator_created(comm):
    """Tell the registered functions that ``comm`` exists (communicators call this)."""
    for fn in list(_created_hooks):
        fn(comm)


def set_step(step):
    """Record the training step this rank is in (None: not in a step)."""
    _state["step"] = None if step is None else int(step)


def current_step():
    """The step last given to ``set_step``, or None."""
    return _state["step"]


def set_wait_guard(guard):
    """Install ``guard`` (None removes it): an object whose ``released()`` is a context
    manager that gives up the rank's compute slot while the block runs."""
    _state["guard"] = guard


def blocking_wait():
    """The context every wait for other ranks runs in (collectives, p2p, request waits)."""
    guard = _state["guard"]
    return _NO_GUARD if guard is None else guard.released()


def quiet_waits():
    """True when waiting ranks must not spin (a guard is installed: slots are on)."""
    return _state["guard"] is not None


def overlap_allowed():
    """False under compute slots: start communication only once the computation that
    produces it is over (its activations freed), not overlapped with it."""
    return _state["guard"] is None
