"""Which parameters this process trains in a pipelined job (``infer_param_pipeline_stage``)."""
from ... import communication
from ..context import get_auto_parallel_context
from .stage_plan import StagePlan
from .topology import PipelineTopology

__all__ = ["this_rank_topology", "stage_parameters"]


def this_rank_topology():
    """The ``PipelineTopology`` of this process (initialising communication if needed)."""
    if not communication.GlobalComm.INITED:
        communication.init()
    world = communication.get_communicator()
    return PipelineTopology(world.rank, world.size, get_auto_parallel_context("pipeline_stages"),
                            world)


def stage_parameters(net):
    """The trainable parameters of ``net`` that this rank's stage uses (see
    ``Cell.infer_param_pipeline_stage``)."""
    stages = get_auto_parallel_context("pipeline_stages")
    if stages == 1:
        return net.trainable_params()
    plan = StagePlan(net, stages)
    stage = this_rank_topology().stage
    mine = []
    for param in net.trainable_params():
        used_by = plan.stages_of(param)
        if not used_by:
            raise RuntimeError(f"parameter {param.name!r} belongs to no pipeline stage; set "
                               "pipeline_stage on the cell that holds it")
        param.pipeline_stages.update(used_by)
        if stage in used_by:
            mine.append(param)
    return mine
