"""The memory-offload switch and configuration: ``set_context(memory_offload=...)`` and
MindSpore's ``set_offload_context(offload_config={...})`` (what they do: ``offload.py``).

>>> set_offload_context(offload_config={"offload_param": "cpu", "auto_offload": False})
>>> get_offload_context()["auto_offload"]
False
>>> set_offload_context(offload_config={"offload_param": "disk"})
Traceback (most recent call last):
...
NotImplementedError: set_offload_context: offload_param='disk' (offload to files) is not implemented; use 'cpu'
>>> reset_offload_context()
"""
from .backend.memory import parse_size
from .log import logger

__all__ = ["set_offload_context", "get_offload_context", "reset_offload_context",
           "switch", "offload_on", "OffloadState"]

_DEFAULTS = {"offload_param": "cpu", "offload_path": "./offload/", "auto_offload": True,
             "offload_cpu_size": None, "offload_disk_size": None}
_NOTED_KEYS = {"enable_aio": bool, "aio_block_size": str, "aio_queue_depth": int,
               "enable_pinned_mem": bool, "host_mem_block_size": str, "offload_checkpoint": str}


class OffloadState:
    """The offload switch (``set_context(memory_offload=...)``) and its configuration."""

    switched_on = False
    config = dict(_DEFAULTS)
    noted = set()


def _note(key, message):
    if key not in OffloadState.noted:
        OffloadState.noted.add(key)
        logger.warning(message)


def _check_config(config):
    if not isinstance(config, dict):
        raise TypeError(f"set_offload_context: offload_config must be a dict, got "
                        f"{type(config).__name__}")
    merged = dict(OffloadState.config)
    for key, value in config.items():
        if key in _NOTED_KEYS:
            if not isinstance(value, _NOTED_KEYS[key]) or isinstance(value, bool) != \
                    (_NOTED_KEYS[key] is bool):
                raise TypeError(f"set_offload_context: {key} must be a "
                                f"{_NOTED_KEYS[key].__name__}, got {value!r}")
            _note(key, f"set_offload_context: {key} tunes Ascend's offload runtime and is "
                       "noted only: copies here are plain host/device copies")
            continue
        if key not in _DEFAULTS:
            raise ValueError(f"set_offload_context: unknown key {key!r}; expected one of "
                             f"{sorted(set(_DEFAULTS) | set(_NOTED_KEYS))}")
        merged[key] = value
    if merged["offload_param"] == "disk":
        raise NotImplementedError("set_offload_context: offload_param='disk' (offload to files) "
                                  "is not implemented; use 'cpu'")
    if merged["offload_param"] != "cpu":
        raise ValueError(f"set_offload_context: offload_param must be 'cpu' or 'disk', got "
                         f"{merged['offload_param']!r}")
    if not isinstance(merged["auto_offload"], bool):
        raise TypeError(f"set_offload_context: auto_offload must be True or False, got "
                        f"{merged['auto_offload']!r}")
    if not isinstance(merged["offload_path"], str):
        raise TypeError(f"set_offload_context: offload_path must be a str, got "
                        f"{merged['offload_path']!r}")
    for key in ("offload_cpu_size", "offload_disk_size"):
        if merged[key] is not None:
            parse_size(merged[key], f"set_offload_context: {key}")
    return merged


def set_offload_context(offload_config=None):
    """MindSpore's ``ms.set_offload_context(offload_config={...})``; see the module
    docstring. The keys given are checked, then merged over the current configuration."""
    OffloadState.config = _check_config({} if offload_config is None else offload_config)


def get_offload_context():
    """The offload configuration (a copy), with ``memory_offload`` ("ON" or "OFF")."""
    return dict(OffloadState.config, memory_offload="ON" if OffloadState.switched_on else "OFF")


def reset_offload_context():
    OffloadState.config = dict(_DEFAULTS)
    OffloadState.switched_on = False


def switch(on):
    """``set_context(memory_offload="ON" | "OFF")``."""
    OffloadState.switched_on = bool(on)


def offload_on(what="activations"):
    """True when offload is on for ``what``: "activations" (``auto_offload``) or "states"."""
    if not OffloadState.switched_on:
        return False
    return what == "states" or OffloadState.config["auto_offload"]
