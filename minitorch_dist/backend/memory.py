"""Device memory capacity: a clear out-of-memory error instead of a silent overcommit.

The virtual GPU keeps its arrays in host memory, so by itself it never runs out. Give it a
capacity with ``MINITORCH_DIST_VIRTUAL_GPU_MEMORY`` (``512MiB``, ``2GB``, ``1.5GiB`` or a
number of bytes) and it counts the bytes of every array that a copy or a primitive's
forward places on it, frees them when the array is garbage collected, and raises
:class:`DeviceOutOfMemoryError` when an allocation would pass the capacity. The same error,
with the same advice, replaces CuPy's own out-of-memory error on a real GPU, whose capacity
is the CuPy pool limit (``MINITORCH_DIST_GPU_MEMORY``, applied with ``set_limit``) or else
the device's memory.

Gradients that ``backward`` computes on the device are not counted on the virtual GPU: the
capacity is about what stays resident (parameters, tables, activations), which is what
decides whether a model fits.
"""
import re
import weakref

import numpy as np

VIRTUAL_ENV = "MINITORCH_DIST_VIRTUAL_GPU_MEMORY"
GPU_ENV = "MINITORCH_DIST_GPU_MEMORY"

_UNITS = {"": 1, "B": 1, "K": 1000, "KB": 1000, "M": 1000 ** 2, "MB": 1000 ** 2,
          "G": 1000 ** 3, "GB": 1000 ** 3, "T": 1000 ** 4, "TB": 1000 ** 4,
          "KIB": 1024, "MIB": 1024 ** 2, "GIB": 1024 ** 3, "TIB": 1024 ** 4}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text, what=VIRTUAL_ENV):
    """Bytes in a size such as ``"512MiB"``, ``"2GB"``, ``"1.5GiB"`` or ``"4096"``.

    KB/MB/GB are powers of 1000, KiB/MiB/GiB powers of 1024.

    >>> parse_size("512MiB"), parse_size("2GB"), parse_size("4096")
    (536870912, 2000000000, 4096)
    """
    match = _SIZE.match(str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"{what}={text!r} is not a memory size; expected a number of bytes with an "
                         "optional unit, e.g. '512MiB', '2GB', '1.5GiB' or '1048576'")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ValueError(f"{what}={text!r}: the capacity must be positive")
    return size


def format_bytes(n):
    """``n`` bytes in the largest binary unit that keeps the number at least 1.

    >>> format_bytes(536870912), format_bytes(1536), format_bytes(12)
    ('512.0 MiB', '1.5 KiB', '12 B')
    """
    for unit, size in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class DeviceOutOfMemoryError(MemoryError):
    """An allocation on a device would pass its memory capacity.

    Attributes: ``device`` (its name), ``requested``, ``in_use`` and ``capacity`` (bytes).
    """

    def __init__(self, message, device=None, requested=0, in_use=0, capacity=0):
        super().__init__(message)
        self.device = device
        self.requested = requested
        self.in_use = in_use
        self.capacity = capacity


def out_of_memory(device, requested, in_use, capacity, source, what=""):
    """The :class:`DeviceOutOfMemoryError` for ``device``: what was asked, what is in use,
    the capacity and where it came from, and what to do."""
    what = f" ({what})" if what else ""
    where = device.name + (" (virtual)" if device.virtual else "")
    message = (f"{where} is out of memory: the allocation{what} needs {format_bytes(requested)} "
               f"({requested} bytes), {format_bytes(in_use)} are in use and the capacity is "
               f"{format_bytes(capacity)} ({source}). Keep large tables on the host: "
               "nn.EmbeddingLookup(vocab_size, embedding_size, target=\"CPU\") stores the table in "
               "host memory and sends only the looked-up rows to the device; run a primitive on the "
               "host with prim.set_device(\"CPU\"); or use a smaller batch or a larger capacity.")
    return DeviceOutOfMemoryError(message, device.name, requested, in_use, capacity)


def describe(array):
    """``float32 array of shape (3, 4)``: what an allocation is, for error messages."""
    return f"{array.dtype} array of shape {tuple(array.shape)}"


class MemoryBudget:
    """Bytes held on one virtual device, against a capacity.

    ``charge(array)`` counts the memory block under ``array`` (its base, so views are free)
    once, until the block is garbage collected; ``check(nbytes)`` raises before an
    allocation that would not fit.

    >>> import numpy as np
    >>> from minitorch_dist.backend import get_device
    >>> budget = MemoryBudget(get_device("CPU"), 1024, "a test capacity")
    >>> a = np.zeros(100, np.float32); budget.charge(a); budget.charge(a[10:])
    >>> budget.used
    400
    >>> del a; budget.used
    0
    >>> budget.charge(np.zeros(300, np.float32))
    Traceback (most recent call last):
    ...
    minitorch_dist.backend.memory.DeviceOutOfMemoryError: CPU is out of memory: the allocation (float32 array of shape (300,)) needs 1.2 KiB (1200 bytes), 0 B are in use and the capacity is 1.0 KiB (a test capacity). Keep large tables on the host: nn.EmbeddingLookup(vocab_size, embedding_size, target="CPU") stores the table in host memory and sends only the looked-up rows to the device; run a primitive on the host with prim.set_device("CPU"); or use a smaller batch or a larger capacity.
    """

    def __init__(self, device, capacity, source):
        self.device = device
        self.capacity = capacity
        self.source = source
        self.used = 0
        self.peak = 0
        self._live = {}   # id(block) -> (nbytes, weakref to the block)

    def check(self, nbytes, what=""):
        """Raise DeviceOutOfMemoryError if ``nbytes`` more would not fit."""
        if self.used + nbytes > self.capacity:
            raise out_of_memory(self.device, nbytes, self.used, self.capacity, self.source, what)

    def charge(self, array):
        """Count the block under ``array`` (once), or raise if it does not fit."""
        block = array
        while isinstance(block.base, np.ndarray):
            block = block.base
        key = id(block)
        if key in self._live:
            return
        nbytes = block.nbytes
        self.check(nbytes, describe(array))
        self._live[key] = (nbytes, weakref.ref(block, lambda _ref, key=key: self._release(key)))
        self.used += nbytes
        if self.used > self.peak:
            self.peak = self.used

    def _release(self, key):
        entry = self._live.pop(key, None)
        if entry is not None:
            self.used -= entry[0]

    def stats(self):
        return {"capacity": self.capacity, "in_use": self.used, "peak": self.peak}
