"""``mindspore.runtime``: device-runtime settings MindSpore 2.6 scripts make first.

Each call checks its arguments and says, once, what it does here:

* ``set_memory(init_size=..., increase_size=..., max_size=..., optimize_level=...)``:
  ``max_size`` caps the virtual GPU's memory (``MINITORCH_DIST_VIRTUAL_GPU_MEMORY``, a clear
  ``DeviceOutOfMemoryError`` past it) or, with CuPy, its memory pool; the others shape
  Ascend's allocator and do not apply.
* ``set_cpu_affinity(enable_affinity, affinity_cpu_list=None, module_to_cpu_dict=None)``: pins
  this process to the listed CPUs with ``os.sched_setaffinity`` where the system has it;
  ``module_to_cpu_dict`` (CPUs per MindSpore thread group) is checked and noted once: those
  threads are all the calling thread here.
* ``launch_blocking()``: operators already run synchronously here; nothing to change.

>>> import minitorch_dist.runtime as rt
>>> rt.launch_blocking()
"""
import os
import re

from .log import logger

__all__ = ["set_memory", "set_cpu_affinity", "launch_blocking"]

_said = set()
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(GB|MB)$")


def _once(key, message, *args):
    if key not in _said:
        _said.add(key)
        logger.warning("minitorch_dist: note: " + message, *args)


def _bytes(name, text):
    if not isinstance(text, str) or not _SIZE.match(text.strip()):
        raise ValueError(f"runtime.set_memory: {name} must be a size such as '28GB' or '512MB', "
                         f"got {text!r}")
    number, unit = _SIZE.match(text.strip()).groups()
    return int(float(number) * (1 << (30 if unit == "GB" else 20)))


def set_memory(init_size="2GB", increase_size="2GB", max_size="1024GB", optimize_level="O0",
               huge_page_reserve_size="0GB"):
    """Device memory settings (see the module docstring)."""
    for name, value in (("init_size", init_size), ("increase_size", increase_size),
                        ("huge_page_reserve_size", huge_page_reserve_size)):
        _bytes(name, value)
    if optimize_level not in ("O0", "O1"):
        raise ValueError(f"runtime.set_memory: optimize_level must be 'O0' or 'O1', got "
                         f"{optimize_level!r}")
    applied = _cap_device(_bytes("max_size", max_size), max_size)
    _once("set_memory", "runtime.set_memory: max_size=%s %s; init_size, increase_size and "
          "optimize_level shape Ascend's allocator and do not apply here", max_size,
          "caps the device's memory" if applied else "has no device to cap (host arrays only)")


def _cap_device(limit, text):
    """Cap the GPU's (or the virtual GPU's) memory; False when there is no device."""
    from .backend import get_device
    from .backend.memory import MemoryBudget
    try:
        device = get_device("GPU")
    except (RuntimeError, ValueError):
        return False
    if device.is_host:
        return False
    if device.virtual:
        device.memory = MemoryBudget(device, limit, f"set by runtime.set_memory(max_size={text!r})")
    else:
        device.xp.get_default_memory_pool().set_limit(size=limit)
    return True


def set_cpu_affinity(enable_affinity, affinity_cpu_list=None, module_to_cpu_dict=None):
    """Pin this process to CPUs (see the module docstring)."""
    if not isinstance(enable_affinity, bool):
        raise TypeError(f"runtime.set_cpu_affinity: enable_affinity must be True or False, got "
                        f"{enable_affinity!r}")
    if not enable_affinity:
        return
    _check_modules(module_to_cpu_dict)
    cpus = None
    if affinity_cpu_list is not None:
        if not isinstance(affinity_cpu_list, (list, tuple)) or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in affinity_cpu_list):
            raise TypeError("runtime.set_cpu_affinity: affinity_cpu_list must be a list of CPU "
                            f"numbers, got {affinity_cpu_list!r}")
        cpus = set(affinity_cpu_list)
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    else:
        _once("affinity", "runtime.set_cpu_affinity: no CPU list given (or no affinity call on "
              "this system); the process keeps the CPUs it has")


_MODULES = ("main", "runtime", "pynative", "minddata")


def _check_modules(module_to_cpu_dict):
    """MindSpore pins its runtime, PyNative and data threads to their own CPUs; here they are
    all the calling thread, so the split is checked and noted, and the process keeps its
    ``affinity_cpu_list`` (or its CPUs)."""
    if module_to_cpu_dict is None:
        return
    if not isinstance(module_to_cpu_dict, dict) or not all(
            key in _MODULES and isinstance(cpus, (list, tuple))
            and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)
            for key, cpus in module_to_cpu_dict.items()):
        raise TypeError("runtime.set_cpu_affinity: module_to_cpu_dict must map module names "
                        f"{list(_MODULES)} to lists of CPU numbers, got {module_to_cpu_dict!r}")
    _once("affinity_modules", "runtime.set_cpu_affinity: module_to_cpu_dict changes nothing: "
          "MindSpore's runtime, PyNative and data threads are all the calling thread here; the "
          "process keeps affinity_cpu_list (or the CPUs it has)")


def launch_blocking():
    """Operators run synchronously already (see the module docstring)."""
    _once("blocking", "runtime.launch_blocking: operators already run synchronously here")
