"""Which batches each rank of a pipelined job trains on.

The ranks of one pipeline replica (one rank per stage) must see the same batches: stage 0
needs the inputs, the last stage the labels of the same samples. Replicas of a stage
(``world = stages * d``) see different batches, as in data parallelism. Two ways:

* build the dataset unsharded: ``Model.train`` gives replica ``j`` the batches
  ``j, j + d, j + 2d, ...`` (a trailing group of fewer than ``d`` batches is dropped, so that
  every replica takes the same number of steps);
* shard it yourself by replica: ``num_shards, shard_id = ms.parallel.pipeline_data_shard()``.

Sharding by rank (``num_shards=get_group_size(), shard_id=get_rank()``) would give the stages
of one replica different samples: ``Model.train`` refuses it with an error saying so.
"""

__all__ = ["replica_batches", "dataset_shards"]


def dataset_shards(dataset):
    """``(num_shards, shard_id)`` of the source of a dataset pipeline, or None."""
    stack = [dataset]
    while stack:
        node = stack.pop()
        shards = getattr(node, "shards", None)
        if shards is not None:
            return tuple(shards)
        stack.extend(getattr(node, "children", ()))
    return None


def replica_batches(source, pipeline, dataset):
    """``source`` (Model's batch source) restricted to this rank's replica."""
    topology = pipeline.topology
    if topology is None:
        return source
    shards = dataset_shards(dataset)
    if shards is not None:
        if shards[0] == topology.world and topology.world != topology.replicas:
            raise ValueError(
                f"Model.train: the dataset is sharded by rank (num_shards={shards[0]}), but the "
                f"{topology.stages} pipeline stages of a replica must read the same batches; "
                "shard by replica with num_shards, shard_id = ms.parallel.pipeline_data_shard()")
        return source
    if topology.replicas == 1:
        return source
    return _ReplicaSource(source, topology.replicas, topology.replica)


class _ReplicaSource:
    """Every ``replicas``-th batch of ``source``, starting at batch ``replica``."""

    def __init__(self, source, replicas, replica):
        self._source = source
        self.replicas, self.replica = replicas, replica
        self.what = source.what
        self.size = None if source.size is None else source.size // replicas

    def epoch(self):
        group = []
        for batch in self._source.epoch():
            group.append(batch)
            if len(group) == self.replicas:
                yield group[self.replica]
                group = []

    def empty_hint(self):
        return self._source.empty_hint()
