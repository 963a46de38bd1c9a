"""The ``comm_fusion`` option of ``set_auto_parallel_context``: its defaults and its check
(what the options do: ``comm_fusion.py``).

>>> check_comm_fusion({"allreduce": {"mode": "size", "config": 32}})["allreduce"]
{'mode': 'size', 'config': 32}
"""

__all__ = ["DEFAULT_COMM_FUSION", "check_comm_fusion"]

_OPS = ("allreduce", "allgather", "reducescatter")
_MODES = ("auto", "size", "index")
DEFAULT_COMM_FUSION = {"openstate": True, **{op: {"mode": "auto", "config": None} for op in _OPS}}


def _check_positions(op, config):
    if not isinstance(config, (list, tuple)) or not config or not all(
            isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in config) \
            or list(config) != sorted(set(config)):
        raise ValueError(f"comm_fusion: {op} mode 'index' needs config, a strictly increasing "
                         f"list of positive parameter positions such as [20, 35]; got "
                         f"{config!r}")
    return tuple(config)


def _check_op(op, value):
    if not isinstance(value, dict) or set(value) - {"mode", "config"} or "mode" not in value:
        raise ValueError(f"comm_fusion: {op} must be a dict {{'mode': ..., 'config': ...}}, "
                         f"got {value!r}")
    mode, config = value["mode"], value.get("config")
    if mode not in _MODES:
        raise ValueError(f"comm_fusion: {op} mode must be one of {_MODES}, got {mode!r}")
    if mode == "auto":
        if config is not None:
            raise ValueError(f"comm_fusion: {op} mode 'auto' takes no config, got {config!r}")
        return {"mode": mode, "config": None}
    if mode == "size":
        if isinstance(config, bool) or not isinstance(config, (int, float)) or config <= 0:
            raise ValueError(f"comm_fusion: {op} mode 'size' needs config, a positive size in "
                             f"MB, got {config!r}")
        return {"mode": mode, "config": config}
    if op != "allreduce":
        raise ValueError(f"comm_fusion: mode 'index' is for allreduce only (MindSpore's rule); "
                         f"{op} takes 'auto' or 'size'")
    return {"mode": mode, "config": _check_positions(op, config)}


def check_comm_fusion(value):
    """``comm_fusion`` checked and completed with the defaults (a new dict)."""
    if not isinstance(value, dict):
        raise ValueError("comm_fusion must be a dict such as {'allreduce': {'mode': 'size', "
                         f"'config': 32}}}}, got {value!r}")
    unknown = set(value) - set(DEFAULT_COMM_FUSION)
    if unknown:
        raise ValueError(f"comm_fusion: unknown keys {sorted(unknown)}; expected "
                         f"{sorted(DEFAULT_COMM_FUSION)}")
    merged = {key: (dict(v) if isinstance(v, dict) else v)
              for key, v in DEFAULT_COMM_FUSION.items()}
    if "openstate" in value:
        if not isinstance(value["openstate"], bool):
            raise ValueError(f"comm_fusion: openstate must be True or False, got "
                             f"{value['openstate']!r}")
        merged["openstate"] = value["openstate"]
    for op in _OPS:
        if op in value:
            merged[op] = _check_op(op, value[op])
    return merged
