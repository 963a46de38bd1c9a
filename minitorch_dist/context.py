"""Global execution context: run mode and the default device for new tensors."""

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_context = {
    "mode": PYNATIVE_MODE,
    "device_target": "CPU",
    "save_graphs": False,
    "save_graphs_path": ".",
}


def set_context(**kwargs):
    """Set context options, MindSpore style.

    ``mode`` is ``GRAPH_MODE`` or ``PYNATIVE_MODE`` (execution stays eager either way);
    ``device_target`` is "CPU" or "GPU" and is where new tensors and parameters are created.

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
    _context.update(kwargs)


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
