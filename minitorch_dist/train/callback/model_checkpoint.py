"""ModelCheckpoint and CheckpointConfig: save checkpoints during training, keep the last few."""
import os
import re
import time

from ..checkpoint import TRAIN_STATE, save_checkpoint, wait_async_saves
from ..train_state import train_state_json
from ._callback import Callback, step_in_epoch

__all__ = ["CheckpointConfig", "ModelCheckpoint"]

_APPEND_NAMES = ("epoch_num", "step_num")


def _count(owner, name, value, allow_float=False):
    kinds = (int, float) if allow_float else (int,)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < 0:
        raise ValueError(f"{owner}: {name} must be a non-negative {'number' if allow_float else 'int'}, "
                         f"got {value!r}")
    return value


class CheckpointConfig:
    """When ``ModelCheckpoint`` saves and how many files it keeps.

    * ``save_checkpoint_steps``: save every this many steps (0: use seconds instead);
    * ``save_checkpoint_seconds``: save every this many seconds (only when steps is 0);
    * ``keep_checkpoint_max``: keep at most this many files of this prefix, deleting the
      oldest (0: use ``keep_checkpoint_per_n_minutes`` instead);
    * ``keep_checkpoint_per_n_minutes``: keep one file per this many minutes;
    * ``integrated_save``, ``async_save``: passed to ``save_checkpoint``;
    * ``saved_network``: the Cell to save (default: the training network, which holds the
      optimizer state);
    * ``append_info``: a list of ``"epoch_num"``, ``"step_num"`` and at most one dict of
      extra values stored in every file.
    """

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False,
                 saved_network=None, append_info=None):
        owner = "CheckpointConfig"
        steps = _count(owner, "save_checkpoint_steps", save_checkpoint_steps or 0)
        seconds = _count(owner, "save_checkpoint_seconds", save_checkpoint_seconds or 0, True)
        keep_max = _count(owner, "keep_checkpoint_max", keep_checkpoint_max or 0)
        per_minutes = _count(owner, "keep_checkpoint_per_n_minutes",
                             keep_checkpoint_per_n_minutes or 0, True)
        if not steps and not seconds:
            raise ValueError(f"{owner}: save_checkpoint_steps and save_checkpoint_seconds are both 0; "
                             "set one of them to say when to save")
        if not keep_max and not per_minutes:
            raise ValueError(f"{owner}: keep_checkpoint_max and keep_checkpoint_per_n_minutes are "
                             "both 0; set one of them to say which files to keep")
        if saved_network is not None:
            from ...nn.cell import Cell
            if not isinstance(saved_network, Cell):
                raise TypeError(f"{owner}: saved_network must be a Cell, "
                                f"got {type(saved_network).__name__}")
        self._save_checkpoint_steps = steps
        self._save_checkpoint_seconds = 0 if steps else seconds   # steps take priority
        self._keep_checkpoint_max = keep_max
        self._keep_checkpoint_per_n_minutes = 0 if keep_max else per_minutes
        self._integrated_save = bool(integrated_save)
        self._async_save = bool(async_save)
        self._saved_network = saved_network
        self._append_info = _parse_append_info(append_info)

    save_checkpoint_steps = property(lambda self: self._save_checkpoint_steps)
    save_checkpoint_seconds = property(lambda self: self._save_checkpoint_seconds)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_per_n_minutes = property(lambda self: self._keep_checkpoint_per_n_minutes)
    integrated_save = property(lambda self: self._integrated_save)
    async_save = property(lambda self: self._async_save)
    saved_network = property(lambda self: self._saved_network)
    append_info = property(lambda self: self._append_info)

    def get_checkpoint_policy(self):
        """The settings as a dict."""
        return {"save_checkpoint_steps": self.save_checkpoint_steps,
                "save_checkpoint_seconds": self.save_checkpoint_seconds,
                "keep_checkpoint_max": self.keep_checkpoint_max,
                "keep_checkpoint_per_n_minutes": self.keep_checkpoint_per_n_minutes}


def _parse_append_info(append_info):
    if append_info is None:
        return []
    if not isinstance(append_info, (list, tuple)):
        raise TypeError(f"CheckpointConfig: append_info must be a list, got {type(append_info).__name__}")
    out, dicts = [], 0
    for item in append_info:
        if isinstance(item, dict):
            dicts += 1
            if dicts > 1:
                raise ValueError("CheckpointConfig: append_info may hold at most one dict")
        elif item not in _APPEND_NAMES:
            raise ValueError(f"CheckpointConfig: append_info entries must be {list(_APPEND_NAMES)} "
                             f"or one dict, got {item!r}")
        out.append(item)
    return out


class ModelCheckpoint(Callback):
    """Save ``{prefix}-{epoch}_{step}.ckpt`` files in ``directory`` while training.

    ``step`` is the step within the epoch (1-based). The saved Cell is the training
    network (so the optimizer's step counter and moments are included) unless the config
    names another. Every file also carries the training state (``__train_state__``: epoch,
    step, the framework's random state, the dataset's epoch counter) that
    ``restore_train_state`` puts back for an exact resume. A final checkpoint is written at the end of training if the last step
    was not saved. If ``directory`` already holds checkpoints with this prefix, the prefix
    becomes ``{prefix}_1`` (``_2``, ...) so that runs never overwrite each other.
    ``directory`` defaults to the current working directory and is created if needed.
    """

    def __init__(self, prefix="CKP", directory=None, config=None):
        super().__init__()
        if not isinstance(prefix, str) or not prefix or "/" in prefix or os.sep in prefix:
            raise ValueError(f"ModelCheckpoint: prefix must be a non-empty file name prefix without "
                             f"'/', got {prefix!r}")
        if config is None:
            config = CheckpointConfig()
        if not isinstance(config, CheckpointConfig):
            raise TypeError("ModelCheckpoint: config must be a CheckpointConfig, "
                            f"got {type(config).__name__}")
        if directory is None:
            directory = os.getcwd()
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"ModelCheckpoint: directory must be a path, got {type(directory).__name__}")
        self._directory = os.path.abspath(os.fspath(directory))
        os.makedirs(self._directory, exist_ok=True)
        self._config = config
        self._prefix = _free_prefix(self._directory, prefix)
        self._last_triggered_step = 0
        self._last_save_time = time.monotonic()
        self._latest_ckpt_file_name = ""

    @property
    def directory(self):
        return self._directory

    @property
    def prefix(self):
        """The prefix in use (``{prefix}_N`` if the directory already had ``prefix`` files)."""
        return self._prefix

    @property
    def latest_ckpt_file_name(self):
        """The path of the last checkpoint written ("" before the first)."""
        return self._latest_ckpt_file_name

    def on_train_begin(self, run_context):
        self._last_triggered_step = run_context.original_args().get("cur_step_num", 0)
        self._last_save_time = time.monotonic()

    def on_train_step_end(self, run_context):
        self._save_if_due(run_context.original_args(), force=False)

    def on_train_end(self, run_context):
        self._save_if_due(run_context.original_args(), force=True)
        wait_async_saves()

    def __exit__(self, exc_type, exc_value, traceback):
        if self._config.async_save:
            try:
                wait_async_saves()
            except RuntimeError:
                if exc_type is None:   # do not hide the error that ended training
                    raise
        return None

    def _save_if_due(self, cb_params, force):
        step = cb_params.cur_step_num
        if step == self._last_triggered_step:
            return
        config = self._config
        now = time.monotonic()
        if config.save_checkpoint_steps:
            due = step - self._last_triggered_step >= config.save_checkpoint_steps
        else:
            due = now - self._last_save_time >= config.save_checkpoint_seconds
        if not (due or force):
            return
        name = f"{self._prefix}-{cb_params.cur_epoch_num}_{step_in_epoch(cb_params)}.ckpt"
        path = os.path.join(self._directory, name)
        self._make_room(path)
        network = config.saved_network or cb_params.train_network
        extra = self._append_dict(cb_params) or {}
        extra[TRAIN_STATE] = train_state_json(cb_params)     # for an exact resume
        save_checkpoint(network, path, config.integrated_save, config.async_save, extra)
        self._last_triggered_step = step
        self._last_save_time = now
        self._latest_ckpt_file_name = path

    def _append_dict(self, cb_params):
        extra = {}
        for item in self._config.append_info:
            if isinstance(item, dict):
                extra.update(item)
            elif item == "epoch_num":
                extra["epoch_num"] = int(cb_params.cur_epoch_num)
            else:
                extra["step_num"] = int(cb_params.cur_step_num)
        return extra or None

    def _make_room(self, new_path):
        """Delete old files of this prefix so that at most keep_checkpoint_max remain."""
        files = [f for f in _checkpoint_files(self._directory, self._prefix) if f != new_path]
        keep_max = self._config.keep_checkpoint_max
        if keep_max:
            for path in files[:max(0, len(files) - keep_max + 1)]:
                _remove(path)
        elif self._config.keep_checkpoint_per_n_minutes:
            window = self._config.keep_checkpoint_per_n_minutes * 60.0
            recent = [f for f in files if time.time() - os.path.getmtime(f) < window]
            for path in recent[1:]:     # keep the oldest of the current window
                _remove(path)


def _checkpoint_files(directory, prefix):
    """Paths of ``{prefix}-{epoch}_{step}.ckpt`` files in ``directory``, oldest first."""
    pattern = re.compile(re.escape(prefix) + r"-(\d+)_(\d+)\.ckpt$")
    found = []
    for name in os.listdir(directory):
        match = pattern.match(name)
        if match:
            path = os.path.join(directory, name)
            try:
                mtime = os.stat(path).st_mtime_ns
            except FileNotFoundError:
                continue
            found.append((mtime, int(match.group(1)), int(match.group(2)), path))
    return [entry[-1] for entry in sorted(found)]


def _free_prefix(directory, prefix):
    """``prefix``, or ``prefix_N`` with N one above any such prefix already in use."""
    pattern = re.compile(re.escape(prefix) + r"(?:_(\d+))?-\d+_\d+\.ckpt$")
    used = [int(m.group(1) or 0) for m in map(pattern.match, os.listdir(directory)) if m]
    return f"{prefix}_{max(used) + 1}" if used else prefix


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
