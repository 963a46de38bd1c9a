"""Which rank runs which stage, and the process groups a pipeline needs.

MindSpore's rule: with ``world`` ranks and ``pipeline_stages = p`` stages, each stage gets
``d = world // p`` consecutive ranks and rank ``r`` runs stage ``r // d``. The ``d`` ranks of
a stage are data-parallel replicas of each other; rank ``r`` belongs to replica ``r % d``.

* the **pipeline group** of replica ``j``: ``[j, d + j, 2d + j, ...]`` (one rank per stage;
  activations travel between neighbours, the loss is broadcast from its last member);
* the **data-parallel group** of stage ``s``: ``[s*d, ..., s*d + d - 1]`` (gradients are
  averaged there when ``d > 1``);
* a **shared-parameter group** per set of stages that share a parameter, per replica
  (gradients of that parameter are summed there).

>>> t = PipelineTopology(rank=5, world=8, stages=2)
>>> t.stage, t.replica, t.replicas, t.pipeline_ranks, t.data_parallel_ranks
(1, 1, 4, [1, 5], [4, 5, 6, 7])
"""

__all__ = ["PipelineTopology", "stage_of_rank", "pipeline_data_shard"]


def _check_count(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")


def stage_of_rank(rank, world, stages):
    """MindSpore's mapping: ``rank // (world // stages)``."""
    return rank // (world // stages)


class PipelineTopology:
    """Stage, replica and peers of one rank; ``group(ranks)`` makes sub-communicators."""

    def __init__(self, rank, world, stages, communicator=None):
        _check_count(world, "the number of ranks")
        _check_count(stages, "pipeline_stages")
        if world % stages:
            raise ValueError(f"pipeline_stages ({stages}) must divide the number of ranks "
                             f"({world}): every stage needs the same number of ranks")
        self.rank, self.world, self.stages = rank, world, stages
        self.replicas = world // stages
        self.stage = stage_of_rank(rank, world, stages)
        self.replica = rank % self.replicas
        self.communicator = communicator
        self._groups = {}

    # ---- ranks --------------------------------------------------------------------------
    def rank_of_stage(self, stage, replica=None):
        """World rank of ``stage`` in ``replica`` (default: this rank's replica)."""
        return stage * self.replicas + (self.replica if replica is None else replica)

    @property
    def pipeline_ranks(self):
        return [self.rank_of_stage(s) for s in range(self.stages)]

    @property
    def data_parallel_ranks(self):
        return [self.stage * self.replicas + j for j in range(self.replicas)]

    @property
    def is_last_stage(self):
        return self.stage == self.stages - 1

    # ---- groups -------------------------------------------------------------------------
    def group(self, ranks):
        """The communicator over world ``ranks`` (made once; collective over its members).

        Every member must ask for the same groups in the same order, which holds because
        every rank builds the same network and walks it in the same order.
        """
        ranks = tuple(sorted(ranks))
        if ranks not in self._groups:
            if len(ranks) == self.world:
                self._groups[ranks] = self.communicator
            else:
                self._groups[ranks] = self.communicator.split(list(ranks))
        return self._groups[ranks]

    def pipeline_group(self):
        return self.group(self.pipeline_ranks)

    def data_parallel_group(self):
        return self.group(self.data_parallel_ranks)

    def shared_group(self, stages):
        """The group summing gradients of a parameter used by ``stages`` (this replica)."""
        return self.group([self.rank_of_stage(s) for s in sorted(stages)])

    def __repr__(self):
        return (f"PipelineTopology(rank={self.rank}, world={self.world}, stages={self.stages}, "
                f"stage={self.stage}, replica={self.replica}/{self.replicas})")


def pipeline_data_shard():
    """``(num_shards, shard_id)`` for this rank's dataset in a pipelined job: the ranks of one
    pipeline replica must read the same batches, so shard by replica, not by rank.

    >>> import minitorch_dist as ms
    >>> ms.parallel.pipeline_data_shard()     # a single process: one shard
    (1, 0)
    """
    from ... import communication
    from ..context import check_job_size, get_auto_parallel_context
    if not communication.GlobalComm.INITED:
        communication.init()
    world = communication.get_group_size()
    check_job_size(world, communication.get_rank(), "pipeline_data_shard")
    stages = get_auto_parallel_context("pipeline_stages")
    topology = PipelineTopology(communication.get_rank(), world, stages)
    return topology.replicas, topology.replica
