"""Merge the per-stage checkpoints of a pipelined job into one full checkpoint.

Each rank saves only its stage's parameters (the others are released, and checkpoints skip
them). ``merge_pipeline_checkpoints(files, path)`` takes one file per stage (one replica's
ranks; replicas hold equal values) and writes the union, which a plain, unpipelined network
loads with ``ms.load_checkpoint`` / ``ms.load_param_into_net``. A parameter in several
files (shared by stages, or an optimizer counter) must have the same shape everywhere;
for trained values the copies are equal, which is checked too.
"""
import numpy as np

from ...train.checkpoint_identity import IDENTITY

__all__ = ["merge_pipeline_checkpoints"]


def merge_pipeline_checkpoints(stage_files, output_file, atol=0.0):
    """Write the union of ``stage_files`` to ``output_file``; returns ``{name: Tensor}``."""
    from ...train.checkpoint import load_checkpoint, save_checkpoint
    stage_files = list(stage_files)
    if not stage_files:
        raise ValueError("merge_pipeline_checkpoints: no stage checkpoint files given")
    merged, origin = {}, {}
    for path in stage_files:
        for name, value in load_checkpoint(path).items():
            if name == IDENTITY:
                continue        # a stage file's slice record; the merge checks none
            if name not in merged:
                merged[name], origin[name] = value, path
                continue
            first, again = merged[name].asnumpy(), value.asnumpy()
            if first.shape != again.shape or first.dtype != again.dtype:
                raise ValueError(f"merge_pipeline_checkpoints: {name!r} is {first.dtype}"
                                 f"{list(first.shape)} in {origin[name]} but {again.dtype}"
                                 f"{list(again.shape)} in {path}")
            if first.dtype.kind == "f" and not np.allclose(first, again, rtol=0, atol=atol):
                raise ValueError(f"merge_pipeline_checkpoints: the copies of shared parameter "
                                 f"{name!r} in {origin[name]} and {path} differ")
    save_checkpoint(merged, output_file)
    return merged
