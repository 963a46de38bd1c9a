"""Byte counters for every copy between the host and a device."""

_stats = {"host_to_device": 0, "device_to_host": 0, "device_to_device": 0, "copies": 0}


def record(src, dst, nbytes):
    """Count one copy of ``nbytes`` from device ``src`` to device ``dst``."""
    if src.is_host and not dst.is_host:
        _stats["host_to_device"] += nbytes
    elif dst.is_host and not src.is_host:
        _stats["device_to_host"] += nbytes
    else:
        _stats["device_to_device"] += nbytes
    _stats["copies"] += 1


def transfer_stats():
    """Bytes copied host→device and device→host since start or the last reset.

    >>> import minitorch_dist as ms
    >>> sorted(ms.transfer_stats())
    ['copies', 'device_to_device', 'device_to_host', 'host_to_device']
    """
    return dict(_stats)


def reset_transfer_stats():
    for key in _stats:
        _stats[key] = 0
