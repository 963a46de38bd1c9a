"""The training state a ``ModelCheckpoint`` file carries, for an exact resume.

``train_state_json(cb_params)`` is the ``__train_state__`` entry (epoch, step, the random
state, the dataset's epoch counter); ``restore_from_entries(entries, dataset)`` puts it back
from a loaded checkpoint (``checkpoint.restore_train_state`` loads the file first: this
module does not import ``checkpoint.py``). ``docs/failures.md`` shows a resume.
"""
import json
import warnings

from .. import random as framework_random

__all__ = ["train_state_json", "restore_from_entries", "TRAIN_STATE"]

TRAIN_STATE = "__train_state__"     # the checkpoint entry that carries it


def train_state_json(cb_params):
    """The ``__train_state__`` entry ``ModelCheckpoint`` writes: a JSON string with the epoch,
    the global step, the step within the epoch and the epoch's size, the framework's random
    state and the training dataset's epoch counter (which seeds its shuffles)."""
    dataset = getattr(cb_params, "train_dataset", None)
    epoch_of_dataset = dataset.get_epoch() if hasattr(dataset, "get_epoch") else None
    state = {"version": 1, "epoch": int(cb_params.cur_epoch_num),
             "step": int(cb_params.cur_step_num),
             "step_in_epoch": int(getattr(cb_params, "cur_step_in_epoch", 0) or 0),
             "batch_num": int(getattr(cb_params, "batch_num", 0) or 0),
             "dataset_epoch": epoch_of_dataset,
             "rng": framework_random.get_rng_state()}
    return json.dumps(state)


def restore_from_entries(checkpoint, dataset=None, where="the checkpoint"):
    """``checkpoint.restore_train_state`` of ``checkpoint``, the dict ``load_checkpoint``
    returned (``where`` names it in errors); see there."""
    if not isinstance(checkpoint, dict):
        raise TypeError("restore_train_state: checkpoint must be a path or the dict "
                        f"load_checkpoint returned, got {type(checkpoint).__name__}")
    raw = checkpoint.get(TRAIN_STATE)
    if not isinstance(raw, str):
        raise ValueError(f"restore_train_state: {where} has no {TRAIN_STATE} entry (it was not "
                         "written by ModelCheckpoint, or by a version before exact resume)")
    try:
        state = json.loads(raw)
        framework_random.set_rng_state(state["rng"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"restore_train_state: the {TRAIN_STATE} entry of {where} is corrupt: "
                         f"{err}") from None
    step_in_epoch, batch_num = int(state.get("step_in_epoch", 0)), int(state.get("batch_num", 0))
    complete = batch_num in (0, step_in_epoch)
    epoch = int(state["epoch"])
    if dataset is not None and state.get("dataset_epoch") is not None:
        if complete:
            dataset.set_epoch(int(state["dataset_epoch"]))
        else:                    # redo the interrupted epoch from the next batch on
            dataset.set_epoch(int(state["dataset_epoch"]) - 1, skip=step_in_epoch)
    if not complete:
        epoch -= 1
        if dataset is None:
            warnings.warn(f"restore_train_state: {where} was written at step {step_in_epoch} "
                          f"of {batch_num} of epoch {state['epoch']}; pass the dataset so that "
                          "training resumes at the next batch of that epoch (otherwise the "
                          "interrupted epoch starts over and the run is not bit-identical)",
                          UserWarning, stacklevel=3)   # the caller of restore_train_state
    return {"epoch": epoch, "step": int(state["step"]), "step_in_epoch": step_in_epoch,
            "batch_num": batch_num, "complete_epoch": bool(complete)}
