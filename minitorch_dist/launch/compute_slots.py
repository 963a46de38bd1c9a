"""``--compute-slots K``: at most K ranks of a job compute at the same time.

A job of N ranks on fewer cores (or less memory) than N ranks need at once still runs when
the ranks take turns: a rank holds one of K slots while it computes and gives it back
whenever it waits for other ranks (every blocking collective, send/receive, barrier, the
``wait()`` of a nonblocking request: ``communication.hooks.blocking_wait``), taking a slot
again when the wait returns. At most K ranks then hold live activations at once, so the
job's peak memory is about K x (one rank's activations) + N x (its parameters, gradients
and optimizer state); the math is the same, only the order in which ranks run changes, so
the results are the same bits as without slots. That bound needs the ranks to communicate
after their backward (``hooks.overlap_allowed()`` tells code that can wait so; an
operator-sharded network's closing allreduce, a loss averaged over the global batch, waits
until after backward too: ``parallel/comm/final_reduction.py``). A forward that waits for
the others in its middle (a model-parallel layer's allreduce) leaves every rank holding the
activations made so far at that wait.

No deadlock: a rank never waits for other ranks while it holds a slot. The slots are K
lock files in the job directory (``compute_slot.<i>.lock``), taken with ``fcntl.flock``:
the kernel releases a dying rank's lock, so a crash never strands a slot. ``MPI_Init``
(which waits for every rank) runs off the slot: ``install`` hooks the import of
``mpi4py.MPI`` as ``shim_release`` does, so the program's ``mpi4py.rc`` settings still
count; the rank gives its slot back when its program ends, before ``MPI_Finalize``.

The launcher passes K in ``MINITORCH_DIST_COMPUTE_SLOTS``; the rank runner calls
``install()``. ``MINITORCH_DIST_SLOT_TRACE=1`` makes each rank append its slot holds,
``start end`` in ``time.monotonic()`` seconds, to ``compute_slot.trace.<rank>`` in the job
directory (for tests and for seeing the schedule).
"""
import contextlib
import fcntl
import importlib.abc
import importlib.util
import os
import sys
import threading
import time

from ..communication import hooks

__all__ = ["SLOTS_VARIABLE", "TRACE_VARIABLE", "check_compute_slots", "slot_threads",
           "ComputeSlots", "install", "uninstall"]

SLOTS_VARIABLE = "MINITORCH_DIST_COMPUTE_SLOTS"
TRACE_VARIABLE = "MINITORCH_DIST_SLOT_TRACE"
_LAST_POLL_SECONDS = 2e-3       # waiting for one of several slots: poll up to this pause
_state = {"slots": None}


def check_compute_slots(value, n):
    """``value`` (text or int) as a slot count for ``n`` ranks: an int in [1, n]; anything
    else is a ValueError naming ``--compute-slots``.

    >>> check_compute_slots("2", 8)
    2
    >>> check_compute_slots("9", 8)
    Traceback (most recent call last):
    ...
    ValueError: --compute-slots must be at most the number of ranks (-n 8), got 9
    """
    try:
        count = int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        count = None
    if count is None or str(value).strip() not in (str(count), f"+{count}"):
        raise ValueError(f"--compute-slots must be a whole number of ranks that may compute at "
                         f"once (1 to -n), got {value!r}")
    if count < 1:
        raise ValueError(f"--compute-slots must be at least 1 (leave it out to let every rank "
                         f"compute at once), got {value!r}")
    if count > n:
        raise ValueError(f"--compute-slots must be at most the number of ranks (-n {n}), "
                         f"got {count}")
    return count


def slot_threads(cores, slots):
    """BLAS/OpenMP threads for each computing rank: the cores shared by the ``slots`` ranks
    that compute at once (at least 1).

    >>> slot_threads(16, 4), slot_threads(2, 1), slot_threads(2, 4)
    (4, 2, 1)
    """
    return max(1, int(cores) // int(slots))


class ComputeSlots:
    """This rank's hold on one of ``count`` slots (lock files in ``folder``)."""

    def __init__(self, folder, count, rank=0, trace=False):
        self.count, self.rank = int(count), int(rank)
        self._files = [os.open(os.path.join(folder, f"compute_slot.{i}.lock"),
                               os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                       for i in range(self.count)]
        self._held = None            # the index of the slot held, or None
        self._waiting = 0            # threads of this process inside blocking_wait
        self._lock = threading.Lock()
        self._trace = open(os.path.join(folder, f"compute_slot.trace.{self.rank}"), "a") \
            if trace else None
        self._since = None

    @property
    def held(self):
        return self._held is not None

    def acquire(self):
        """Block (without spinning) until this rank holds a slot."""
        if self._held is not None:
            return
        if self.count == 1:
            fcntl.flock(self._files[0], fcntl.LOCK_EX)     # the kernel wakes us at release
            self._took(0)
            return
        pause, first = 50e-6, self.rank % self.count
        while True:
            for step in range(self.count):
                index = (first + step) % self.count
                try:
                    fcntl.flock(self._files[index], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                self._took(index)
                return
            time.sleep(pause)
            pause = min(2 * pause, _LAST_POLL_SECONDS)

    def _took(self, index):
        self._held, self._since = index, time.monotonic()

    def release(self):
        """Give the slot back (no-op when none is held)."""
        if self._held is None:
            return
        index, self._held = self._held, None
        if self._trace is not None:
            self._trace.write(f"{self._since:.6f} {time.monotonic():.6f}\n")
            self._trace.flush()
        fcntl.flock(self._files[index], fcntl.LOCK_UN)

    @contextlib.contextmanager
    def released(self):
        """Off the slot for the block (the first of nested or concurrent waits gives it
        back, the last takes one again); an exception still takes a slot again, since the
        program may catch it and compute on."""
        with self._lock:
            self._waiting += 1
            if self._waiting == 1:
                self.release()
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1
                if self._waiting == 0:
                    self.acquire()

    def close(self):
        self.release()
        for fd in self._files:
            os.close(fd)
        self._files = []
        if self._trace is not None:
            self._trace.close()


class _OffSlotLoader(importlib.abc.Loader):
    """``mpi4py.MPI``'s own loader, run off the slot (``MPI_Init`` waits for every rank)."""

    def __init__(self, inner, slots):
        self.inner, self.slots = inner, slots

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        with self.slots.released():
            self.inner.exec_module(module)


class _MPIImportHook(importlib.abc.MetaPathFinder):
    """Finds ``mpi4py.MPI`` once, the usual way, and wraps its loader."""

    def __init__(self, slots):
        self.slots = slots

    def find_spec(self, name, path, target=None):
        if name != "mpi4py.MPI":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _OffSlotLoader(spec.loader, self.slots)
        return spec


def install(environ=None):
    """In a rank: read K and the job directory from the environment, take a slot, and make
    every blocking communication give it back while it waits. Returns the ``ComputeSlots``,
    or None when slots are off (no K, or no job directory)."""
    environ = os.environ if environ is None else environ
    value, folder = environ.get(SLOTS_VARIABLE), environ.get("MINITORCH_DIST_JOB_DIR")
    if not value or not folder or _state["slots"] is not None:
        return _state["slots"]
    count = int(value)
    rank = int(environ.get("OMPI_COMM_WORLD_RANK") or environ.get("PMI_RANK") or 0)
    slots = ComputeSlots(folder, count, rank, trace=environ.get(TRACE_VARIABLE) == "1")
    _state["slots"] = slots
    hooks.set_wait_guard(slots)
    if "mpi4py.MPI" not in sys.modules:
        sys.meta_path.insert(0, _MPIImportHook(slots))
    slots.acquire()
    return slots


def uninstall():
    """Give the slot back for good (the program ended: ``MPI_Finalize`` waits for others)."""
    slots, _state["slots"] = _state["slots"], None
    if slots is None:
        return
    hooks.set_wait_guard(None)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _MPIImportHook)]
    slots.close()
