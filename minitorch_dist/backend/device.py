"""Devices: where arrays live and which array module (``xp``) computes on them.

* ``CPU``: NumPy arrays in host memory.
* ``GPU:i``: CuPy arrays on CUDA device ``i`` when CuPy and a GPU are present.
* the virtual GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``): NumPy arrays that the framework treats
  as living on a separate device, so every host/device copy is made for real and counted.
  It lets placement and heterogeneous-training code run and be tested on a laptop.
  ``MINITORCH_DIST_VIRTUAL_GPU_MEMORY=512MiB`` gives it a capacity (see ``memory.py``).
"""
import os
import re
import threading
from contextlib import contextmanager

import numpy as np

from . import transfer
from .memory import (GPU_ENV, VIRTUAL_ENV, MemoryBudget, DeviceOutOfMemoryError, describe,
                     out_of_memory, parse_size)
from .pool import BufferPool

_scratch = threading.local()     # .pools: {id(device): BufferPool} of this thread's scratch_pool

VALID_TARGETS = ("CPU", "GPU")
_ALIASES = {"CPU": "CPU", "HOST": "CPU", "GPU": "GPU", "CUDA": "GPU", "DEVICE": "GPU"}
_cache = {}
# Where ``get_device(None)`` learns the default device: ``minitorch_dist.context`` registers
# a reader of its ``device_target``/``device_id`` (the backend does not import the context).
_default_source = [None]


def set_default_device_source(source):
    """Make ``source()`` (a spec such as "CPU" or "GPU:1") the device ``get_device(None)``
    resolves; None: the device that is there (``present_target``)."""
    _default_source[0] = source


def present_target():
    """"GPU" when CuPy sees a GPU or the virtual GPU is on, else "CPU".

    >>> present_target() in ("CPU", "GPU")
    True
    """
    return "GPU" if virtual_gpu_enabled() or cupy_or_none() is not None else "CPU"


def virtual_gpu_enabled():
    return os.environ.get("MINITORCH_DIST_VIRTUAL_GPU", "") not in ("", "0")


def cupy_or_none():
    """The CuPy module if it imports and sees at least one GPU, else None."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # ImportError, or CUDA driver errors on machines without a GPU
        pass
    return None


class Device:
    """One place where arrays live; ``xp`` is its array module."""

    def __init__(self, kind, index=0, virtual=False, capacity=None):
        self.kind = kind
        self.index = index
        self.virtual = virtual
        # ``memory``: the byte budget of a virtual GPU with a capacity, else None (no counting)
        self.memory = None
        if kind == "CPU" or virtual:
            self.xp = np
        else:
            self.xp = cupy_or_none()
        if virtual and capacity is not None:
            self.memory = MemoryBudget(self, parse_size(capacity, VIRTUAL_ENV),
                                       f"set by {VIRTUAL_ENV}={capacity}")
        elif self.xp is not np and capacity is not None:
            with self.xp.cuda.Device(index):
                self.xp.get_default_memory_pool().set_limit(size=parse_size(capacity, GPU_ENV))
        self._capacity_spec = capacity
        self.pool = BufferPool(self.xp)

    @property
    def pool(self):
        """The device's buffer pool, or this thread's scratch pool inside ``scratch_pool``."""
        pools = getattr(_scratch, "pools", None)
        if pools:
            scratch = pools.get(id(self))
            if scratch is not None:
                return scratch
        return self._pool

    @pool.setter
    def pool(self, value):
        self._pool = value

    @contextmanager
    def scratch_pool(self):
        """Inside, this thread's pooled buffers on this device come from a fresh pool dropped
        after; other threads (thread ranks share devices) keep using the device's own."""
        pools = getattr(_scratch, "pools", None)
        if pools is None:
            pools = _scratch.pools = {}
        previous = pools.get(id(self))
        pools[id(self)] = BufferPool(self.xp)
        try:
            yield
        finally:
            if previous is None:
                del pools[id(self)]
            else:
                pools[id(self)] = previous

    @property
    def is_host(self):
        return self.kind == "CPU"

    @property
    def name(self):
        return "CPU" if self.is_host else f"GPU:{self.index}"

    def id(self):
        """SINGA's ``Device.id()`` (SINGA scripts call ``t.device.id()``): the GPU ordinal,
        or -1 for the host."""
        return -1 if self.is_host else self.index

    def __repr__(self):
        suffix = " (virtual)" if self.virtual else ""
        return f"Device({self.name}{suffix})"

    def __str__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = get_device(other)
            except ValueError:
                return False
        return self is other

    def __hash__(self):
        return hash((self.kind, self.index, self.virtual))

    def memory_stats(self):
        """``{"capacity", "in_use", "peak"}`` in bytes, where this device keeps count; None on
        the host and on a virtual GPU without a capacity.

        >>> get_device("CPU").memory_stats() is None
        True
        """
        if self.memory is not None:
            return self.memory.stats()
        if self.xp is np:
            return None
        pool = self.xp.get_default_memory_pool()
        with self.xp.cuda.Device(self.index):
            return {"capacity": self._capacity()[0], "in_use": pool.used_bytes(),
                    "peak": pool.total_bytes()}

    def _capacity(self):
        """A real GPU's capacity and where it comes from: the CuPy pool limit, else its memory."""
        limit = self.xp.get_default_memory_pool().get_limit()
        if limit:
            return limit, f"the CuPy memory pool limit, set by {GPU_ENV}={self._capacity_spec}" \
                if self._capacity_spec else "the CuPy memory pool limit"
        return self.xp.cuda.runtime.memGetInfo()[1], "the GPU's memory"

    def memory_error(self, err, requested=None, what=""):
        """The DeviceOutOfMemoryError that replaces ``err`` (a MemoryError raised while
        allocating on this device); None where ``err`` should stay as it is."""
        if isinstance(err, DeviceOutOfMemoryError) or self.xp is np:
            return None
        with self.xp.cuda.Device(self.index):
            capacity, source = self._capacity()
            in_use = self.xp.get_default_memory_pool().used_bytes()
        if requested is None:
            requested = getattr(err, "_size", None)
            if requested is None:   # "Out of memory allocating 1,024 bytes (allocated so far: ...)"
                found = re.search(r"allocating ([0-9,]+) bytes", str(err))
                requested = int(found.group(1).replace(",", "")) if found else 0
        return out_of_memory(self, requested, in_use, capacity, f"{source}; CuPy said: {err}", what)

    def host_array(self, array):
        """``array`` (on this device) as a NumPy array, without counting."""
        if self.xp is np:
            return array
        return self.xp.asnumpy(array)

    def copy_from(self, array, src):
        """A copy of ``array`` (living on device ``src``) placed on this device; counted."""
        if src is self:
            return array
        if self.xp is np:
            if self.memory is not None:   # fail before allocating what does not fit
                self.memory.check(array.nbytes, describe(array))
            host = src.host_array(array)
            out = np.empty(host.shape, host.dtype)
            np.copyto(out, host)
            if self.memory is not None:
                self.memory.charge(out)
        else:
            try:
                with self.xp.cuda.Device(self.index):
                    out = self.xp.asarray(src.host_array(array) if src.xp is not self.xp else array)
                    if out is array:
                        out = array.copy()
            except MemoryError as err:
                error = self.memory_error(err, array.nbytes, describe(array))
                if error is None:
                    raise
                raise error from err
        transfer.record(src, self, out.nbytes)
        return out


def get_device(spec=None):
    """Resolve "CPU", "GPU", "GPU:1", a ``Device`` or None (the context default).

    >>> get_device("CPU").name
    'CPU'
    """
    if isinstance(spec, Device):
        return spec
    if spec is None:
        source = _default_source[0]
        spec = present_target() if source is None else source()
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string such as 'CPU' or 'GPU:0', got {type(spec).__name__}")
    head, _, idx = spec.partition(":")
    kind = _ALIASES.get(head.strip().upper())
    if kind is None:
        raise ValueError(f"unknown device target {spec!r}; valid targets are {list(VALID_TARGETS)}"
                         " (optionally with an index, e.g. 'GPU:0')")
    try:
        index = int(idx) if idx else 0
    except ValueError:
        raise ValueError(f"device index in {spec!r} must be an integer") from None
    if kind == "CPU":
        key = ("CPU", 0, False, None)
    elif virtual_gpu_enabled():
        # a capacity makes a different device: tests can give one without disturbing others
        key = ("GPU", index, True, os.environ.get(VIRTUAL_ENV) or None)
    else:
        cupy = cupy_or_none()
        if cupy is None:
            raise ValueError("device target 'GPU' was requested but no GPU is available: CuPy is not "
                             "installed or sees no CUDA device. Use 'CPU', or set "
                             "MINITORCH_DIST_VIRTUAL_GPU=1 to emulate a GPU with host memory.")
        count = cupy.cuda.runtime.getDeviceCount()
        if index >= count:
            raise ValueError(f"GPU index {index} out of range: {count} GPU(s) visible")
        key = ("GPU", index, False, os.environ.get(GPU_ENV) or None)
    if key not in _cache:
        _cache[key] = Device(*key)
    return _cache[key]


def host():
    return get_device("CPU")
