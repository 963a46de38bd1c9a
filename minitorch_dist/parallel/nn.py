"""``mindspore.parallel.nn``: the pipeline cells under MindSpore 2.6's names.

* ``Pipeline(network, micro_size=1, stage_config=None)``: ``nn.PipelineCell`` whose cells'
  stages may be given by name, ``{"_backbone.layer1": 0, ...}`` (names as
  ``network.cells_and_names()`` gives them, wrappers' attribute names included, as in
  MindSpore); an unknown name is an error listing the known ones.
* ``PipelineGradReducer(parameters, scale_sense=1.0, opt_shard=None)``.
* ``GradAccumulation(network, micro_size)``: gradients of ``micro_size`` micro-batches summed
  before one reduction and one optimizer step (``grad_accumulation.py``).
* ``MicroBatchInterleaved(network, interleave_num=2)``: MindSpore's multiple copy
  (``micro_batch_interleaved.py``).
"""
from ..nn.cell import Cell
from .grad_accumulation import GradAccumulation
from .micro_batch_interleaved import MicroBatchInterleaved
from .pipeline import PipelineCell, PipelineGradReducer

__all__ = ["Pipeline", "PipelineGradReducer", "GradAccumulation", "MicroBatchInterleaved"]


def _named_cells(network):
    """Every sub-cell under its attribute path, wrappers' names included."""
    found = {}

    def walk(cell, prefix):
        for name, child in cell._cells.items():
            path = f"{prefix}.{name}" if prefix else name
            if path not in found:
                found[path] = child
                walk(child, path)

    walk(network, "")
    return found


def Pipeline(network, micro_size=1, stage_config=None):   # noqa: N802 (MindSpore's name)
    """``PipelineCell(network, micro_size)`` after setting ``pipeline_stage`` on the cells
    named in ``stage_config``."""
    if not isinstance(network, Cell):
        raise TypeError(f"Pipeline: network must be a Cell, got {type(network).__name__}")
    if stage_config is not None:
        if not isinstance(stage_config, dict):
            raise TypeError(f"Pipeline: stage_config must be a dict {{cell name: stage}}, got "
                            f"{type(stage_config).__name__}")
        cells = _named_cells(network)
        for name, stage in stage_config.items():
            if name not in cells:
                raise ValueError(f"Pipeline: stage_config names {name!r}, which is not a cell of "
                                 f"the network; its cells are {sorted(cells)}")
            cells[name].pipeline_stage = stage
    return PipelineCell(network, micro_size)
