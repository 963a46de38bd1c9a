"""Devices, array modules, buffer pools, dtypes and copy counters."""
from .device import Device, get_device, host, virtual_gpu_enabled, cupy_or_none, VALID_TARGETS
from .memory import DeviceOutOfMemoryError, parse_size
from .transfer import transfer_stats, reset_transfer_stats
from . import dtypes
from . import threads
try:                    # the thread policy (threads.py); never a reason for import to fail
    threads.ensure_applied()
except Exception:       # noqa: BLE001
    pass
