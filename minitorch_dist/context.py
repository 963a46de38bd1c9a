"""Global execution context: run mode, the default device for new tensors, the log level."""
import logging
import os

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_context = {
    "mode": PYNATIVE_MODE,
    "device_target": "CPU",
    "save_graphs": False,
    "save_graphs_path": ".",
    "log_level": None,
    "num_threads": None,
}
_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
           "ERROR": logging.ERROR}
_GLOG_LEVELS = {"0": "DEBUG", "1": "INFO", "2": "WARNING", "3": "ERROR"}   # MindSpore's GLOG_v
_handler = []   # the stderr handler set_context(log_level=...) installed, if any


def set_context(**kwargs):
    """Set context options, MindSpore style.

    ``mode`` is ``GRAPH_MODE`` or ``PYNATIVE_MODE`` (execution stays eager either way);
    ``device_target`` is "CPU" or "GPU" and is where new tensors and parameters are created.
    ``log_level`` ("DEBUG", "INFO", "WARNING", "ERROR", or None to leave logging alone) sets
    the level of the ``"minitorch_dist"`` logger and prints its records on stderr; at "INFO"
    a primitive placed off ``device_target`` says so on its first call, as MindSpore does with
    ``GLOG_v=1`` (which sets "INFO" here too). ``num_threads`` (a positive int, or None for
    the default policy: one per physical core, one per rank under a launcher) is how many
    threads the BLAS and the C++ host kernels use (``backend/threads.py``).

    >>> import minitorch_dist as ms
    >>> ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    """
    for key, value in kwargs.items():
        if key not in _context:
            raise ValueError(f"unknown context option {key!r}; expected one of {sorted(_context)}")
        if key == "mode" and value not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"mode must be ms.GRAPH_MODE or ms.PYNATIVE_MODE, got {value!r}")
        if key == "device_target":
            from .backend import get_device
            get_device(value)  # validates, and fails now if "GPU" is not available
        if key == "log_level":
            kwargs[key] = _check_level(value)
        if key == "num_threads":
            from .backend import threads
            threads.set_num_threads(value)    # validates and applies
    _context.update(kwargs)
    if "log_level" in kwargs:
        _apply_log_level(kwargs["log_level"])


def _check_level(value):
    if value is None:
        return None
    name = value.upper() if isinstance(value, str) else logging.getLevelName(value)
    if name not in _LEVELS:
        raise ValueError(f"log_level must be one of {list(_LEVELS)} or None, got {value!r}")
    return name


def _apply_log_level(name):
    logger = logging.getLogger("minitorch_dist")
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


def get_context(key):
    if key not in _context:
        raise ValueError(f"unknown context option {key!r}; expected one of {sorted(_context)}")
    return _context[key]


def __getattr__(name):
    # ``from mindspore.context import ParallelMode`` and ``context.set_auto_parallel_context``
    # (MindSpore 1.x spellings, used by seed 004) reach the parallel layer's context.
    if name in ("ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
                "reset_auto_parallel_context"):
        from .parallel import context as parallel_context
        return getattr(parallel_context, name)
    raise AttributeError(f"module 'minitorch_dist.context' has no attribute {name!r}")


if os.environ.get("GLOG_v", "").strip() in _GLOG_LEVELS:   # MindSpore's switch: GLOG_v=1 is INFO
    set_context(log_level=_GLOG_LEVELS[os.environ["GLOG_v"].strip()])
