"""MindDataset and TFRecordDataset sharded over real MPI ranks: every rank reads the same number
of rows, the shards together read every row, and each epoch reshuffles identically on all ranks.

The files are written by the test before the launch (folder given as the argument). Rank 0 prints
``DATASET_SHARDS OK world=N`` when all checks pass; any failure raises (the job exits non-zero).
"""
import sys

import numpy as np

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication

folder, rows = sys.argv[1], int(sys.argv[2])
communication.init()
comm = communication.get_communicator()
rank, world = comm.rank, comm.size
ms.set_seed(7)

mind = ds.MindDataset(f"{folder}/train.mindrecord0", num_shards=world, shard_id=rank, shuffle=True)
schema = ds.Schema()
schema.add_column("id", de_type=ms.int64)
tf = ds.TFRecordDataset(f"{folder}/train_*.tfrecord", schema=schema, shuffle=True, num_shards=world,
                        shard_id=rank, shard_equal_rows=True)
for name, data in (("MindDataset", mind), ("TFRecordDataset", tf)):
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=2)
    for epoch in range(2):
        ids = np.array([int(np.ravel(row[0])[0]) for row in it], np.int64)
        sizes = comm.allgather(np.array([len(ids)], np.int64))
        everything = comm.allgather(ids)
        sizes = np.concatenate(sizes) if isinstance(sizes, list) else np.ravel(sizes)
        everything = np.concatenate(everything) if isinstance(everything, list) else np.ravel(everything)
        assert len(set(sizes.tolist())) == 1, f"{name}: shard sizes differ: {sizes.tolist()}"
        assert sizes[0] == data.get_dataset_size(), f"{name}: get_dataset_size() != rows read"
        assert set(everything.tolist()) == set(range(rows)), f"{name} epoch {epoch}: rows missing"
        print(f"rank {rank}: {name} epoch {epoch}: {len(ids)} rows, first {ids[:3].tolist()}", flush=True)
if rank == 0:
    print(f"DATASET_SHARDS OK world={world}", flush=True)
