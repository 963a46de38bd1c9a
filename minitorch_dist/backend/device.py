"""Devices: where arrays live and which array module (``xp``) computes on them.

* ``CPU``: NumPy arrays in host memory.
* ``GPU:i``: CuPy arrays on CUDA device ``i`` when CuPy and a GPU are present.
* the virtual GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``): NumPy arrays that the framework treats
  as living on a separate device, so every host/device copy is made for real and counted.
  It lets placement and heterogeneous-training code run and be tested on a laptop.
"""
import os

import numpy as np

from . import transfer
from .pool import BufferPool

VALID_TARGETS = ("CPU", "GPU")
_ALIASES = {"CPU": "CPU", "HOST": "CPU", "GPU": "GPU", "CUDA": "GPU", "DEVICE": "GPU"}
_cache = {}


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

    def __init__(self, kind, index=0, virtual=False):
        self.kind = kind
        self.index = index
        self.virtual = virtual
        if kind == "CPU" or virtual:
            self.xp = np
        else:
            self.xp = cupy_or_none()
        self.pool = BufferPool(self.xp)

    @property
    def is_host(self):
        return self.kind == "CPU"

    @property
    def name(self):
        return "CPU" if self.is_host else f"GPU:{self.index}"

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
            host = src.host_array(array)
            out = np.empty(host.shape, host.dtype)
            np.copyto(out, host)
        else:
            with self.xp.cuda.Device(self.index):
                out = self.xp.asarray(src.host_array(array) if src.xp is not self.xp else array)
                if out is array:
                    out = array.copy()
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
        from ..context import get_context
        spec = get_context("device_target")
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
        key = ("CPU", 0, False)
    elif virtual_gpu_enabled():
        key = ("GPU", index, True)
    else:
        cupy = cupy_or_none()
        if cupy is None:
            raise ValueError("device target 'GPU' was requested but no GPU is available: CuPy is not "
                             "installed or sees no CUDA device. Use 'CPU', or set "
                             "MINITORCH_DIST_VIRTUAL_GPU=1 to emulate a GPU with host memory.")
        count = cupy.cuda.runtime.getDeviceCount()
        if index >= count:
            raise ValueError(f"GPU index {index} out of range: {count} GPU(s) visible")
        key = ("GPU", index, False)
    if key not in _cache:
        _cache[key] = Device(*key)
    return _cache[key]


def host():
    return get_device("CPU")
