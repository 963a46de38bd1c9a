"""glibc's allocator, tuned when minitorch_dist is imported.

A training step frees and allocates the same multi-megabyte arrays (activations, gradients,
rows copied between host and device) every step. With glibc's defaults, blocks above a
dynamic threshold go back to the system when freed and come back as fresh pages, which
costs a page fault per 4 KiB on every reuse (measured: a third of a pipeline rank's step,
and host-device Wide&Deep at 0.58 of all-CPU instead of 0.9). The launcher sets
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` for its ranks; a plain
``python script.py`` gets the same through ``mallopt`` here. ``MINITORCH_DIST_SYSTEM_MALLOC=1``
keeps glibc's defaults, and variables already set in the environment win.
"""
import ctypes
import os
import sys

__all__ = ["tune_malloc", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

MMAP_THRESHOLD = 256 << 20      # blocks up to this size are kept for reuse
TRIM_THRESHOLD = 1 << 30        # free memory kept at the heap's top before trimming
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # glibc's mallopt parameter numbers


def tune_malloc(environ=None):
    """Apply the thresholds with ``mallopt``; True when glibc accepted them."""
    environ = os.environ if environ is None else environ
    if environ.get("MINITORCH_DIST_SYSTEM_MALLOC") == "1" or not sys.platform.startswith("linux"):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in environ or "MALLOC_TRIM_THRESHOLD_" in environ:
        return False             # chosen by the user or the launcher: glibc read them already
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False             # not glibc (musl, ...): nothing to tune
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
