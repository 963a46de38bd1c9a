"""Allreduce through buffers that the MPI ranks of one machine all map.

Why: a data-parallel step ends with a sum-allreduce of its gradient bucket (1.7 MB for
SINGA's MNIST CNN). Open MPI moves it through its own shared segment: the bucket is copied
in, summed there and copied out on every rank. When the bucket itself lives in memory every
rank maps, the copies go: each rank sums its own chunk of the bucket over all ranks' buffers
and writes that sum into every rank's buffer. Each rank reads and writes the bucket once.
Between 2 ranks on a 2-core machine DistOpt's exchange of that bucket took 0.51 ms where
MPI's in-place ``Allreduce`` took 0.81 ms, and a training step was 3% shorter
(``docs/performance.md``).

How:
- ``SharedBuffers.empty`` gives a NumPy array backed by a file in ``/dev/shm`` that only its
  owner maps at first. Communicators hand such arrays out through ``allreduce_buffer``;
  ``BucketedAllreduce`` keeps its buckets in them.
- Every sum (or mean) allreduce of a float32 or float64 array of at least 64 KiB starts
  with an allgather of a small header from each rank: is the array, reduced in place, one
  of these buffers, whose file, how many bytes. The decision is taken from the gathered
  headers, so it is the same on every rank: unless all ranks pass a shared buffer of the
  same size, the ordinary MPI call runs instead.
- A peer's file is mapped at its first reduction. The ranks then confirm, in one small
  allreduce, that every one of them mapped every file, and each owner removes its file
  (the mappings stay). A job that dies leaves at most the files of buffers never reduced.
- A rank unmaps its peers' buffers once its own buffer that was reduced with them is
  dropped. Ranks drop their buffers alike (each DistOpt its own buckets), so the memory of a
  dropped bucket goes back to the machine instead of staying mapped until the job ends.
- Chunk ``c`` is summed by rank ``c`` only, in a fixed order (its own values, then the
  other ranks' in rank order), and copied to every rank: all ranks get the same bits. With
  2 ranks that is ``a + b``, the bits ``Allreduce`` gives.
- A barrier ends the reduction: after it, no rank reads or writes another's buffer until
  the next reduction's header exchange, so backward may refill the bucket at once.

``MINITORCH_DIST_SHARED_ALLREDUCE=0`` turns it off (buffers are then plain arrays).
"""
import itertools
import mmap
import os
import weakref

import numpy as np

__all__ = ["SharedBuffers", "enabled", "worth_sharing", "SHARED_DIR"]

SHARED_DIR = "/dev/shm"
# Below this a reduction is latency, not bandwidth: the header exchange would cost more
# than the copies it saves.
MIN_BYTES = 64 * 1024
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_tokens = itertools.count(1)


def enabled():
    """Whether shared reductions are on (``MINITORCH_DIST_SHARED_ALLREDUCE``, default on)."""
    value = os.environ.get("MINITORCH_DIST_SHARED_ALLREDUCE", "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on", ""):
        return True
    raise ValueError(f"MINITORCH_DIST_SHARED_ALLREDUCE must be 0 or 1, got {value!r}")


def worth_sharing(array):
    """Whether an allreduce of ``array`` tries the shared path: its dtype and size, which
    every rank's call has alike."""
    return array.dtype in _DTYPES and array.nbytes >= MIN_BYTES


def _path(pid, token):
    return os.path.join(SHARED_DIR, f"minitorch_dist-{pid}-{token}")


def _map(path, nbytes):
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)


class SharedBuffers:
    """The shared buffers of one communicator (``rank`` of ``size``, all on one machine) and
    their reduction (``allreduce``)."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self._owned = {}        # data address -> (token, nbytes, path or None once removed)
        self._peers = {}        # (pid, token) -> the peer's buffer, mapped here
        self._users = {}        # (pid, token) of a peer -> tokens of ours reduced with it
        self._confirmed = set()     # tuples of every rank's (pid, token): mapped everywhere
        self.reductions = 0     # reductions done through shared memory (tests read it)

    def empty(self, count, dtype):
        """A 1-D array of ``count`` items in a file of its own under ``/dev/shm``, or a plain
        array where that cannot be made (no such directory, not enough room: the space is
        reserved up front, so a full ``/dev/shm`` fails here and not on a later write)."""
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        if dtype not in _DTYPES or nbytes < MIN_BYTES or not os.path.isdir(SHARED_DIR):
            return np.empty(count, dtype)
        token = next(_tokens)
        path = _path(os.getpid(), token)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError:
            return np.empty(count, dtype)
        try:
            os.posix_fallocate(fd, 0, nbytes)
            mapping = mmap.mmap(fd, nbytes)
        except OSError:
            os.close(fd)
            os.unlink(path)
            return np.empty(count, dtype)
        os.close(fd)
        array = np.frombuffer(mapping, dtype, count)
        self._owned[array.ctypes.data] = (token, nbytes, path)
        # dropped: forget it (its address may be reused) and remove a file never released
        weakref.finalize(array, self._forget, array.ctypes.data)
        return array

    def _forget(self, address):
        token, _, path = self._owned.pop(address, (None, None, None))
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
        if token is not None:
            self._unmap_peers_of(token)

    def _unmap_peers_of(self, token):
        """Our buffer ``token`` is gone: drop the peers' buffers no other of ours was reduced
        with (the last reference to a mapping closes it)."""
        for peer in [peer for peer, users in self._users.items() if token in users]:
            users = self._users[peer]
            users.discard(token)
            if not users:
                del self._users[peer]
                self._peers.pop(peer, None)
        me = (os.getpid(), token)
        self._confirmed = {key for key in self._confirmed if me not in key}

    def header(self, array):
        """``[shared?, pid, token, nbytes]`` of ``array`` (None: not reduced in place) for the
        other ranks."""
        entry = None if array is None or array.ndim != 1 else self._owned.get(array.ctypes.data)
        if entry is None or entry[1] != array.nbytes:
            return np.array([0, os.getpid(), 0, -1 if array is None else array.nbytes],
                            np.int64)
        return np.array([1, os.getpid(), entry[0], array.nbytes], np.int64)

    def allreduce(self, array, allgather, confirm, barrier):
        """Sum ``array`` in place over the ranks through the shared buffers; False (nothing
        done, on every rank alike) where some rank's array is not one of them (``array``
        None: this rank's call is not in place).

        ``allgather(int64 vector)`` stacks every rank's, ``confirm(ok)`` is True only if
        every rank's ``ok`` is, ``barrier()`` waits for all ranks: the communicator's own
        calls, so that waiting follows its rules (quiet waits under compute slots)."""
        headers = allgather(self.header(array))
        if not (headers[:, 0].all() and (headers[:, 3] == headers[0, 3]).all()):
            return False
        key = tuple((int(pid), int(token)) for _, pid, token, _ in headers)
        if key not in self._confirmed:
            if not confirm(self._map_peers(key, array)):
                raise RuntimeError("allreduce: a rank could not map another rank's shared "
                                   f"buffer under {SHARED_DIR} (set "
                                   "MINITORCH_DIST_SHARED_ALLREDUCE=0 to reduce through MPI)")
            self._confirmed.add(key)
            token = key[self.rank][1]
            for r, peer in enumerate(key):
                if r != self.rank:
                    self._users.setdefault(peer, set()).add(token)
            self._release(array)
        buffers = [array if r == self.rank else self._peers[key[r]] for r in range(self.size)]
        lo, hi = (len(array) * self.rank) // self.size, (len(array) * (self.rank + 1)) // self.size
        mine = array[lo:hi]
        for r in range(self.size):
            if r != self.rank:
                np.add(mine, buffers[r][lo:hi], out=mine)
        for r in range(self.size):
            if r != self.rank:
                buffers[r][lo:hi] = mine
        barrier()
        self.reductions += 1
        return True

    def _map_peers(self, key, array):
        """Map every other rank's buffer named in ``key``; True if all of them were."""
        try:
            for r, (pid, token) in enumerate(key):
                if r != self.rank and (pid, token) not in self._peers:
                    mapping = _map(_path(pid, token), array.nbytes)
                    self._peers[(pid, token)] = np.frombuffer(mapping, array.dtype, len(array))
        except OSError:
            return False
        return True

    def _release(self, array):
        """Every rank mapped this buffer: its file is no longer needed (the mappings stay)."""
        token, nbytes, path = self._owned[array.ctypes.data]
        if path is not None:
            os.unlink(path)
            self._owned[array.ctypes.data] = (token, nbytes, None)
