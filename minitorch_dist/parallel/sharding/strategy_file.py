"""Strategy files: the parameters' layouts as JSON, written after a plan is made and checked
against a later plan (MindSpore's ``strategy_ckpt_save_file``/``strategy_ckpt_load_file``
and ``AutoParallel.save_param_strategy_file``/``load_param_strategy_file``).

The file maps each sliced parameter's name to its layout (device matrix, tensor map, full
shape). A check finds every parameter that the current plan lays out differently and raises
``ShardingError`` naming them: the strategies changed since the file was saved, and slices
saved under the old plan would not fit. The file does not set strategies.
"""
import json
import os

from .checkpoint import layout_from_json, layout_json
from .parameters import sliced_parameters
from .rules import ShardingError

__all__ = ["write_strategy_file", "check_strategy_file"]


def _current():
    return {name: layout_json(p) for name, p in sliced_parameters().items()}


def write_strategy_file(path):
    """Write the layouts of the parameters sliced so far to ``path``, making its folder
    if needed (as MindSpore does: model-zoo scripts name a per-rank folder not yet there)."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump(_current(), f, indent=1, sort_keys=True)


def check_strategy_file(path, owner="strategy_ckpt_load_file"):
    """Raise ``ShardingError`` if a parameter in ``path`` is laid out differently now."""
    try:
        with open(path) as f:
            wanted = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"{owner}: cannot read the strategy file {path!r}: {err}") from None
    now = _current()
    wrong = sorted(name for name, spec in wanted.items()
                   if name in now and layout_from_json(now[name])[0] != layout_from_json(spec)[0])
    if wrong:
        raise ShardingError(f"{owner}: the plan lays out {wrong} differently from {path}: their "
                            "strategies changed since it was saved")
