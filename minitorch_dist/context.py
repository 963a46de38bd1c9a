"""Global execution context: run mode, the default device for new tensors, the log level.

The backend resolves "the default device" through a reader registered here
(``backend.device.set_default_device_source``), so it never imports this module; the
parallel layer lends this module its MindSpore 1.x names (``lend``).
"""
import logging
import os

from .backend.device import present_target, set_default_device_source
from .log import logger

GRAPH_MODE = 0
PYNATIVE_MODE = 1
# MindSpore's jit_syntax_level values: how much Python its static-graph compiler accepts.
STRICT = 0
COMPATIBLE = 1
LAX = 2
_SYNTAX_LEVELS = {STRICT: "STRICT", COMPATIBLE: "COMPATIBLE", LAX: "LAX"}

_context = {
    "mode": PYNATIVE_MODE,
    "device_target": None,          # None: the device that is there (see default_device_target)
    "save_graphs": False,
    "save_graphs_path": ".",
    "log_level": None,
    "num_threads": None,
    "device_id": 0,
    "max_device_memory": None,
    "memory_offload": "OFF",
}
# MindSpore options that shape its graph compiler, Ascend or its runtime: accepted (type
# checked) with a one-time note that they do not apply here. Each maps to the type it takes.
_NO_EFFECT = {
    "enable_graph_kernel": bool, "graph_kernel_flags": str, "pynative_synchronize": bool,
    "deterministic": str, "jit_config": dict, "max_call_depth": int,
    "enable_compile_cache": bool, "compile_cache_path": str, "memory_optimize_level": str,
    "op_timeout": int, "print_file_path": str, "enable_reduce_precision": bool,
    "variable_memory_max_size": str, "mempool_block_size": str, "ascend_config": dict,
    "gpu_config": dict, "save_dump_path": str, "enable_dump": bool, "env_config_path": str,
    "precompile_only": bool, "reserve_class_name_in_scope": bool, "check_bprop": bool,
    "grad_for_scalar": bool, "disable_format_transform": bool, "support_binary": bool,
    "aoe_tune_mode": str, "aoe_config": dict, "inter_op_parallel_num": int,
    "exec_order": str,
}
_noted = set()
_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
           "ERROR": logging.ERROR}
_GLOG_LEVELS = {"0": "DEBUG", "1": "INFO", "2": "WARNING", "3": "ERROR"}   # MindSpore's GLOG_v
_handler = []   # the stderr handler set_context(log_level=...) installed, if any


def set_context(**kwargs):
    """Set context options, MindSpore style.

    ``mode`` is ``GRAPH_MODE`` or ``PYNATIVE_MODE`` (execution stays eager either way);
    ``device_target`` is "CPU" or "GPU" and is where new tensors and parameters are created
    and where primitives without ``set_device`` run; unset, it is the device that is there
    (``default_device_target``: "GPU" with CuPy and a GPU, or the virtual GPU, else "CPU").
    ``log_level`` ("DEBUG", "INFO", "WARNING", "ERROR", or None to leave logging alone) sets
    the level of the ``"minitorch_dist"`` logger and prints its records on stderr; at "INFO"
    a primitive placed off ``device_target`` says so on its first call, as MindSpore does with
    ``GLOG_v=1`` (which sets "INFO" here too). ``num_threads`` (a positive int, or None for
    the default policy: one per physical core, one per rank under a launcher) is how many
    threads the BLAS and the C++ host kernels use (``backend/threads.py``).

    MindSpore's other options: ``device_id`` (an int >= 0) picks the GPU of
    ``device_target="GPU"``; ``max_device_memory`` ("28GB") caps the device's memory, as
    ``runtime.set_memory(max_size=...)`` does; ``memory_offload`` ("ON" or "OFF") moves saved
    activations and optimizer states to the host until needed (``offload.py``);
    ``runtime_num_threads`` is ``num_threads``;
    ``device_target="Ascend"`` is an error saying what to use; the options of MindSpore's
    graph compiler and of Ascend (``enable_graph_kernel``, ``op_timeout``, ...) are accepted,
    type-checked, with a one-time note that they do not apply here. Unknown names are errors.

    >>> import minitorch_dist as ms
    >>> ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    """
    kwargs = _translate(kwargs)
    for key, value in kwargs.items():
        if key not in _context:
            raise ValueError(f"unknown context option {key!r}; expected one of "
                             f"{sorted(set(_context) | set(_NO_EFFECT) | {'runtime_num_threads'})}")
        if key == "mode" and value not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"mode must be ms.GRAPH_MODE or ms.PYNATIVE_MODE, got {value!r}")
        if key == "device_target":
            if isinstance(value, str) and value.strip().upper() == "ASCEND":
                raise ValueError("unknown device target 'Ascend': there is no Ascend backend here; "
                                 "valid targets are ['CPU', 'GPU'] (GPU: CuPy on an NVIDIA GPU, "
                                 "or the virtual GPU with MINITORCH_DIST_VIRTUAL_GPU=1)")
            from .backend import get_device
            get_device(value)  # validates, and fails now if "GPU" is not available
        if key == "device_id" and (isinstance(value, bool) or not isinstance(value, int)
                                   or value < 0):
            raise ValueError(f"device_id must be a non-negative int, got {value!r}")
        if key == "max_device_memory" and value is not None:
            from . import runtime
            runtime.set_memory(max_size=value)     # validates the size and applies it
        if key == "log_level":
            kwargs[key] = _check_level(value)
        if key == "num_threads":
            from .backend import threads
            threads.set_num_threads(value)    # validates and applies
    _context.update(kwargs)
    if "log_level" in kwargs:
        _apply_log_level(kwargs["log_level"])


def _translate(kwargs):
    """MindSpore's aliases, and the options without effect here (checked, noted, dropped)."""
    out = {}
    for key, value in kwargs.items():
        if key == "runtime_num_threads":
            key = "num_threads"
        if key == "memory_offload":
            _check_memory_offload(value)
        if key == "jit_syntax_level":
            _note_syntax_level(value)
            continue
        if key in _NO_EFFECT:
            kind = _NO_EFFECT[key]
            if kind is not object and not isinstance(value, kind):
                raise ValueError(f"set_context: {key} must be a {kind.__name__}, got {value!r}")
            if key not in _noted:
                _noted.add(key)
                logger.warning(
                    "set_context(%s=...) is accepted and ignored: it configures MindSpore's graph "
                    "compiler, Ascend or its runtime, which do not exist here", key)
            continue
        out[key] = value
    return out


def _note_syntax_level(value):
    """``jit_syntax_level``: execution is eager here, so every level runs all of Python (as
    MindSpore's LAX does); the level is checked and noted once, never enforced."""
    if isinstance(value, bool) or value not in _SYNTAX_LEVELS:
        raise ValueError("set_context: jit_syntax_level must be ms.STRICT, ms.COMPATIBLE or ms.LAX, "
                         f"got {value!r}")
    if "jit_syntax_level" not in _noted:
        _noted.add("jit_syntax_level")
        logger.warning("set_context(jit_syntax_level=ms.%s) is accepted: programs run eagerly "
                       "here, so every Python construct is allowed, as with ms.LAX",
                       _SYNTAX_LEVELS[value])


def _check_memory_offload(value):
    """MindSpore's ``memory_offload``: "ON" moves saved activations and optimizer states of a
    device job to host memory until they are needed (``offload.py``); "OFF" keeps them."""
    if value not in ("ON", "OFF"):
        raise ValueError(f"set_context: memory_offload must be 'ON' or 'OFF', got {value!r}")
    from . import offload_config
    offload_config.switch(value == "ON")


def _check_level(value):
    if value is None:
        return None
    name = value.upper() if isinstance(value, str) else logging.getLevelName(value)
    if name not in _LEVELS:
        raise ValueError(f"log_level must be one of {list(_LEVELS)} or None, got {value!r}")
    return name


def _apply_log_level(name):
    if name is None:
        logger.setLevel(logging.NOTSET)
        while _handler:
            logger.removeHandler(_handler.pop())
        return
    logger.setLevel(_LEVELS[name])
    if not _handler:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
        logger.addHandler(handler)
        _handler.append(handler)


def default_device_target():
    """MindSpore picks ``device_target`` from the package installed; here, from the device
    that is there: "GPU" when CuPy sees a GPU or the virtual GPU is on
    (``MINITORCH_DIST_VIRTUAL_GPU=1``), else "CPU". ``set_context(device_target="CPU")``
    keeps a job on the host."""
    return present_target()


def get_context(key):
    if key not in _context:
        raise ValueError(f"unknown context option {key!r}; expected one of {sorted(_context)}")
    if key == "device_target" and _context[key] is None:
        return default_device_target()
    return _context[key]


def _default_device_spec():
    """What ``get_device(None)`` resolves: ``device_target``, indexed by ``device_id``."""
    spec = get_context("device_target")
    if spec.strip().upper() == "GPU" and get_context("device_id"):
        spec = f"GPU:{get_context('device_id')}"      # set_context(device_id=k)
    return spec


set_default_device_source(_default_device_spec)

_lent = {}      # name -> object, lent by a higher layer (``lend``)


def lend(**names):
    """Make ``names`` readable as attributes of this module. The parallel layer lends its
    ``ParallelMode`` and ``*_auto_parallel_context`` functions, so that MindSpore 1.x's
    ``from mindspore.context import ParallelMode`` works without this module importing it.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.context import ParallelMode
    >>> ParallelMode is ms.ParallelMode
    True
    """
    _lent.update(names)


def __getattr__(name):
    if name in _lent:
        return _lent[name]
    raise AttributeError(f"module 'minitorch_dist.context' has no attribute {name!r}")


if os.environ.get("GLOG_v", "").strip() in _GLOG_LEVELS:   # MindSpore's switch: GLOG_v=1 is INFO
    set_context(log_level=_GLOG_LEVELS[os.environ["GLOG_v"].strip()])
