"""A per-device buffer pool: hands back released arrays instead of allocating new ones.

Small training steps on the host are dominated by allocation: glibc returns large blocks to
the OS on free and page-faults them back in on the next allocation. Kernels whose scratch
buffers have a clear lifetime (im2col workspaces, communication buckets, optimizer
temporaries) take them from here and give them back when done.
"""
from collections import defaultdict


class BufferPool:
    """Free lists of arrays keyed by (shape, dtype).

    >>> import numpy as np
    >>> pool = BufferPool(np)
    >>> a = pool.empty((4, 4), np.float32); pool.release(a)
    >>> pool.empty((4, 4), np.float32) is a
    True
    """

    def __init__(self, xp, max_per_key=8):
        self.xp = xp
        self.max_per_key = max_per_key
        self._free = defaultdict(list)
        self.hits = 0
        self.misses = 0

    def empty(self, shape, dtype):
        key = (tuple(shape), self.xp.dtype(dtype).str)
        free = self._free.get(key)
        if free:
            try:
                array = free.pop()      # thread ranks share a device's pool: another thread
            except IndexError:          # may have taken the last one since the check
                pass
            else:
                self.hits += 1
                return array
        self.misses += 1
        return self.xp.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype):
        out = self.empty(shape, dtype)
        out.fill(0)
        return out

    def release(self, array):
        """Give ``array`` back; the caller must hold no other reference that it still uses."""
        if not array.flags.c_contiguous or array.base is not None:
            return  # views are not ours to recycle
        key = (array.shape, array.dtype.str)
        free = self._free[key]
        if len(free) < self.max_per_key:
            free.append(array)

    def clear(self):
        self._free.clear()

    def stats(self):
        cached = sum(a.nbytes for lst in self._free.values() for a in lst)
        return {"hits": self.hits, "misses": self.misses, "cached_bytes": cached}
