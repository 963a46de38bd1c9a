"""Strategy files: the parameters' layouts as JSON, written after a plan is made and checked
against a later plan (MindSpore's ``strategy_ckpt_save_file``/``strategy_ckpt_load_file``
and ``AutoParallel.save_param_strategy_file``/``load_param_strategy_file``).

The file maps each sliced parameter's name to its layout (device matrix, tensor map, full
shape). A check finds every parameter that the current plan lays out differently, or that
has another full shape, and raises ``ShardingError`` naming them: the strategies changed
since the file was saved, and slices saved under the old plan would not fit. A file none of
whose names this network slices belongs to another network and is refused too; a file that
is not ``{name: layout}`` JSON is a ``ValueError`` naming it. The file does not set
strategies.
"""
import gc
import json
import os

from .checkpoint import layout_from_json, layout_json
from .parameters import sliced_parameters
from .rules import ShardingError

__all__ = ["write_strategy_file", "write_layouts", "check_strategy_file", "read_strategy_file"]


def _current(only_trainable=False):
    """The layouts of the live sliced parameters (networks gone but not yet collected would
    still count: collect them first)."""
    gc.collect()
    return {name: layout_json(p) for name, p in sliced_parameters().items()
            if p.requires_grad or not only_trainable}


def write_strategy_file(path, only_trainable=False):
    """Write the layouts of the parameters sliced so far to ``path`` (only the trainable ones
    with ``only_trainable``, MindSpore's ``only_trainable_params``), making its folder if
    needed (as MindSpore does: model-zoo scripts name a per-rank folder not yet there)."""
    write_layouts(path, _current(only_trainable))


def write_layouts(path, layouts):
    """Write ``{name: layout dict}`` to ``path`` through a temporary file (ranks holding the
    same layouts may write the same path), making its folder if needed."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{id(layouts)}.tmp"
    with open(tmp, "w") as f:
        json.dump(layouts, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def check_strategy_file(path, owner="strategy_ckpt_load_file"):
    """Raise ``ShardingError`` if the layouts in ``path`` do not fit the parameters sliced
    now: a parameter laid out differently or of another full shape, or a file of another
    network (none of its names is sliced here). A file that is not a strategy file at
    all (not JSON, or not ``{name: layout}``) is a ``ValueError`` naming it."""
    wanted = read_strategy_file(path, owner)
    now = _current()
    if wanted and not set(wanted) & set(now):
        raise ShardingError(
            f"{owner}: the strategy file {path} lays out {sorted(wanted)}, but this network "
            f"slices {sorted(now) if now else 'no parameter'}: it is the strategy file of "
            "another network (or of other strategies); save it from this network "
            "(strategy_ckpt_save_file / AutoParallel.save_param_strategy_file)")
    shapes = sorted(f"{name} {tuple(spec['shape'])} in the file, "
                    f"{tuple(now[name]['shape'])} here" for name, spec in wanted.items()
                    if name in now and list(spec["shape"]) != list(now[name]["shape"]))
    if shapes:
        raise ShardingError(f"{owner}: the parameters of the strategy file {path} have other "
                            f"shapes than this network's: {'; '.join(shapes)}")
    wrong = sorted(name for name, spec in wanted.items()
                   if name in now and layout_from_json(now[name])[0] != layout_from_json(spec)[0])
    if wrong:
        raise ShardingError(f"{owner}: the plan lays out {wrong} differently from {path}: their "
                            "strategies changed since it was saved")


def read_strategy_file(path, owner="strategy_ckpt_load_file"):
    """``{name: layout dict}`` from a strategy file, each entry checked; anything else is a
    ``ValueError`` naming the file and the entry."""
    try:
        with open(path, "rb") as f:
            wanted = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{owner}: cannot read the strategy file {path!r}: {err}") from None
    if not isinstance(wanted, dict):
        raise ValueError(f"{owner}: the strategy file {path!r} must hold a JSON object mapping "
                         f"parameter names to layouts, got a {type(wanted).__name__}")
    for name, spec in wanted.items():
        problem = _layout_problem(spec)
        if problem is not None:
            raise ValueError(f"{owner}: the strategy file {path!r} has a bad layout for "
                             f"{name!r}: {problem} (expected {{\"device_matrix\": [...], "
                             f"\"tensor_map\": [...], \"shape\": [...]}}, got {spec!r})")
    return wanted


def _ints(value, low):
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= low for v in value)


def _layout_problem(spec):
    if not isinstance(spec, dict):
        return "not a JSON object"
    if not _ints(spec.get("device_matrix"), 1) or not spec["device_matrix"]:
        return "'device_matrix' must be a non-empty list of positive integers"
    if not _ints(spec.get("shape"), 0):
        return "'shape' must be a list of non-negative integers"
    tensor_map = spec.get("tensor_map")
    if not isinstance(tensor_map, list) or len(tensor_map) != len(spec["shape"]) or not all(
            (isinstance(m, int) and not isinstance(m, bool) and m >= -1) or _ints(m, 0)
            for m in tensor_map):
        return "'tensor_map' must hold one device axis (or -1, or a list of axes) per dimension"
    if not _ints(spec.get("row_blocks", []), 0):
        return "'row_blocks' must be a list of non-negative integers"
    try:
        layout_from_json(dict(spec, rank=spec.get("rank", 0)))
    except (TypeError, ValueError) as err:
        return str(err)
    return None
