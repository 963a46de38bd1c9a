"""Which batches each rank of a pipelined job trains on.

The ranks of one pipeline replica (one rank per stage) must see the same batches: stage 0
needs the inputs, the last stage the labels of the same samples. Replicas of a stage
(``world = stages * d``) see different batches, as in data parallelism. ``Model.train``
takes the dataset as the program built it:

* unsharded: replica ``j`` trains on the batches ``j, j + d, j + 2d, ...`` (a trailing group
  of fewer than ``d`` batches is dropped, so that every replica takes the same number of
  steps); with ``full_batch=True`` (MindSpore's "every rank loads the whole batch") each
  batch is cut into ``d`` equal parts along axis 0 and replica ``j`` trains on part ``j``;
* sharded by replica: ``num_shards, shard_id = ms.parallel.pipeline_data_shard()``;
* sharded by rank (``num_shards=get_group_size(), shard_id=get_rank()``), as MindSpore's
  samples do: MindSpore feeds each rank its own shard, so the last stage's labels would
  belong to other samples than stage 0's images. Here such a dataset is re-sharded once,
  with a note: by replica (``num_shards=d, shard_id=j``, the union of the shards the
  replica's ranks were given), or, with ``full_batch=True``, not at all (every rank reads
  every sample, and replica ``j`` trains on its part of each batch).

Before the first batch every rank tells the others its shard and its number of batches;
if the stages of a replica disagree, every rank raises the same ``ValueError`` naming them.
"""
import numpy as np

from ...runtime import _once
from ..context import get_auto_parallel_context

__all__ = ["replica_batches", "dataset_shards"]


def dataset_shards(dataset):
    """``(num_shards, shard_id)`` of the source of a dataset pipeline, or None."""
    for node in _sources(dataset):
        if node.shards is not None:
            return tuple(node.shards)
    return None


def _sources(dataset):
    """The nodes of a dataset pipeline that read with ``num_shards``/``shard_id``."""
    found, stack = [], [dataset]
    while stack:
        node = stack.pop()
        if hasattr(node, "shards"):
            found.append(node)
        stack.extend(reversed(getattr(node, "children", ())))
    return found


def replica_batches(source, pipeline, dataset):
    """``source`` (Model's batch source) restricted to this rank's replica."""
    topology = pipeline.topology
    if topology is None:
        return source
    full_batch = bool(get_auto_parallel_context("full_batch"))
    if topology.stages > 1 and _reshard_by_replica(dataset, topology, full_batch):
        _refresh_size(source, dataset)
    check_stages_agree(topology, dataset_shards(dataset), source.size)
    if topology.replicas == 1 or dataset_shards(dataset) is not None:
        return source
    if full_batch:
        return _ReplicaSlices(source, topology.replicas, topology.replica)
    return _ReplicaSource(source, topology.replicas, topology.replica)


def _reshard_by_replica(dataset, topology, full_batch):
    """Re-shard sources sharded by rank (see the module docstring); True if any was."""
    by_rank = (topology.world, topology.rank)
    sources = [node for node in _sources(dataset)
               if node.shards is not None and tuple(node.shards) == by_rank]
    if not sources or topology.world == topology.replicas:
        return False
    new = None if full_batch else (topology.replicas, topology.replica)
    for node in sources:
        node.shards = new
    how = ("every rank reads every sample and replica j trains on part j of each batch "
           "(full_batch=True)" if full_batch else
           f"replica j reads shard j of {topology.replicas} (num_shards={topology.replicas}), "
           "the samples its ranks' shards held together")
    _once("pipeline.rank_shards",
          "Model.train: the dataset is sharded by rank (num_shards=%d, shard_id=rank), but the "
          "%d stages of a pipeline replica must read the same samples (MindSpore would pair "
          "stage 0's images with other samples' labels); re-sharded by replica: %s. "
          "ms.parallel.pipeline_data_shard() gives the replica's shard directly",
          topology.world, topology.stages, how)
    return True


def _refresh_size(source, dataset):
    size = dataset.get_dataset_size() if hasattr(dataset, "get_dataset_size") else None
    source.size = int(size) if isinstance(size, (int, np.integer)) and size > 0 else None


def check_stages_agree(topology, shards, size):
    """Every rank: raise the same ``ValueError`` if two stages of a replica read different
    shards or a different number of batches (their images and labels would not match)."""
    if topology.stages == 1 or topology.communicator is None:
        return
    mine = np.array([-1, -1, -1] if shards is None else [shards[0], shards[1], -1], np.int64)
    mine[2] = -1 if size is None else size
    every = np.asarray(topology.communicator.allgather(mine)).reshape(topology.world, 3)
    for replica in range(topology.replicas):
        ranks = [topology.rank_of_stage(s, replica) for s in range(topology.stages)]
        for stage, rank in enumerate(ranks[1:], start=1):
            if not np.array_equal(every[rank], every[ranks[0]]):
                raise ValueError(
                    f"Model.train: pipeline stages 0 and {stage} of replica {replica} disagree "
                    f"about the data: stage 0 (rank {ranks[0]}) reads {_describe(every[ranks[0]])}, "
                    f"stage {stage} (rank {rank}) reads {_describe(every[rank])}; the stages of "
                    "a replica must read the same batches (shard with "
                    "ms.parallel.pipeline_data_shard(), or not at all)")


def _describe(row):
    shard = "every sample" if row[0] < 0 else f"shard {row[1]} of {row[0]}"
    size = ("an unknown number of batches" if row[2] < 0
            else f"{row[2]} batch{'' if row[2] == 1 else 'es'}")
    return f"{shard}, {size}"


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
        hint = self._source.empty_hint()
        if hint or (self._source.size is not None and self._source.size == 0):
            return hint
        d = self.replicas
        return (f": the {d} data-parallel replicas of each pipeline stage take the batches of "
                f"an unsharded dataset in turn (replica j: batches j, j + {d}, ...; this is "
                f"replica {self.replica}), and it has fewer than {d} batches "
                f"({self._source.size if self._source.size is not None else 'an unknown number'}"
                "); give it more samples or a smaller batch size")


class _ReplicaSlices:
    """Part ``replica`` of ``replicas`` equal parts (axis 0) of every batch of ``source``."""

    def __init__(self, source, replicas, replica):
        self._source = source
        self.replicas, self.replica = replicas, replica
        self.what = source.what
        self.size = source.size

    def epoch(self):
        for batch in self._source.epoch():
            rows = len(batch[0])
            if rows % self.replicas:
                raise ValueError(f"Model.train: with full_batch=True the {self.replicas} replicas "
                                 f"of a stage split each batch, but a batch has {rows} rows; use "
                                 f"a batch size divisible by {self.replicas} (drop_remainder=True)")
            part = rows // self.replicas
            lo = part * self.replica
            yield tuple(column[lo:lo + part] for column in batch)

    def empty_hint(self):
        return self._source.empty_hint()
