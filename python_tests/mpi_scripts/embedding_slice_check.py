"""Row-sliced embedding tables on real MPI ranks must equal one process.

``train``: in data-parallel mode (gradients_mean, parameter_broadcast) every rank trains a
small net (an 11-row host table, uneven over the ranks, and a dense head) on its share of
each global batch, with FTRL and with LazyAdam on the host (``target="CPU"``), the table
row-sliced and batch-sliced; each rank then trains the same net alone on the whole batches
and compares. Prints ``rank R: table rows A of B, bytes X`` per rank and, on rank 0,
``EMB_SLICE_CHECK OK world=N max_rel=E``. With ``--ckpt-dir`` each rank saves its
checkpoint, rank 0 merges them and a one-process net loads the result:
``EMB_SLICE_CKPT OK max_rel=E``.

``bad_ids``: rank 1 looks up an id past the vocabulary; every rank must print the same
``rank R ERROR IndexError: ...`` line and exit 3 (nobody is left waiting).
"""
import argparse
import os
import sys

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication, nn, ops
from minitorch_dist.parallel.embedding.checkpoint import (merge_row_sliced_checkpoints,
                                                          row_sliced_names)

V, D, F, PER_RANK, STEPS = 11, 4, 3, 4, 4
ROW, BATCH = "table_row_slice", "batch_slice"

parser = argparse.ArgumentParser()
parser.add_argument("mode", choices=["train", "bad_ids"])
parser.add_argument("--ckpt-dir")
args = parser.parse_args()

ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                             parameter_broadcast=True)
communication.init()
rank, world = communication.get_rank(), communication.get_group_size()


class Net(nn.Cell):
    def __init__(self, slice_mode):
        super().__init__()
        ms.set_seed(5)                   # every rank, and the reference, start alike
        self.emb = nn.EmbeddingLookup(V, D, target="CPU", slice_mode=slice_mode)
        self.head = nn.Dense(F * D, 1)
        self.reshape = ops.Reshape()

    def construct(self, ids):
        return self.head(self.reshape(self.emb(ids), (ids.shape[0], F * D)))


OPTIMIZERS = {"ftrl": lambda ps: nn.FTRL(ps, learning_rate=0.1),
              "lazy_adam": lambda ps: nn.LazyAdam(ps, learning_rate=0.05)}


def batches():
    """Global batches with duplicate ids; in step 1 every id belongs to rank 0's rows."""
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        ids = rng.integers(0, V, (world * PER_RANK, F))
        if step == 1:
            ids %= -(-V // world)
        yield ids.astype(np.int32), rng.standard_normal((world * PER_RANK, 1)).astype(np.float32)


def train(slice_mode, optimizer, whole_batch=False):
    net = Net(slice_mode)
    opt = OPTIMIZERS[optimizer](net.trainable_params())
    opt.target = "CPU"
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    for ids, y in batches():
        if not whole_batch:
            mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
            ids, y = ids[mine], y[mine]
        step(ms.Tensor(ids), ms.Tensor(y))
    return step, net


def relative(got, want):
    return float(np.abs(got - want).max()) / max(float(np.abs(want).max()), 1e-30)


def gathered_table(net):
    """The whole table of a row-sliced net, gathered from every rank (on every rank)."""
    comm = communication.get_communicator()
    table = net.emb.embedding_table.asnumpy()
    pad = np.zeros((-(-V // world), D), table.dtype)
    pad[:table.shape[0]] = table
    return comm.allgather(pad).reshape(-1, D)[:V]


def run_training():
    worst = 0.0
    trained = {}
    for optimizer in OPTIMIZERS:
        for mode in (ROW, BATCH):
            trained[mode, optimizer] = train(mode, optimizer)
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.STAND_ALONE)
    for optimizer in OPTIMIZERS:
        reference = train(BATCH, optimizer, whole_batch=True)[1]
        for mode in (ROW, BATCH):
            net = trained[mode, optimizer][1]
            table = gathered_table(net) if mode == ROW else net.emb.embedding_table.asnumpy()
            worst = max(worst, relative(table, reference.emb.embedding_table.asnumpy()),
                        relative(net.head.weight.asnumpy(), reference.head.weight.asnumpy()))
    table = trained[ROW, "ftrl"][1].emb.embedding_table
    start = table.row_slice.offset
    print(f"rank {rank}: table rows {start}-{start + table.shape[0]} of {V}, bytes {table.nbytes}",
          flush=True)
    comm = communication.get_communicator()
    worst = float(comm.allreduce(np.array([worst]), "max")[0])
    if rank == 0:
        print(f"EMB_SLICE_CHECK OK world={world} max_rel={worst:.3e}", flush=True)
    if args.ckpt_dir:
        check_checkpoint(trained[ROW, "ftrl"][0], comm)


def check_checkpoint(step, comm):
    files = [os.path.join(args.ckpt_dir, f"rank{r}.ckpt") for r in range(world)]
    ms.save_checkpoint(step, files[rank])
    names = row_sliced_names(step)
    comm.barrier()
    if rank == 0:
        merged = os.path.join(args.ckpt_dir, "full.ckpt")
        merge_row_sliced_checkpoints(files, merged, names)
        reference, _ = train(BATCH, "ftrl", whole_batch=True)
        fresh, _ = train(BATCH, "ftrl", whole_batch=True)
        for p in fresh.get_parameters():      # forget the training: only the file counts
            p.data[...] = 0
        not_loaded, _ = ms.load_param_into_net(fresh, ms.load_checkpoint(merged))
        assert not not_loaded, not_loaded
        worst = max(relative(got.asnumpy().astype(np.float64), want.asnumpy().astype(np.float64))
                    for got, want in zip(fresh.get_parameters(), reference.get_parameters()))
        print(f"EMB_SLICE_CKPT OK names={','.join(names)} max_rel={worst:.3e}", flush=True)
    comm.barrier()


def run_bad_ids():
    emb = nn.EmbeddingLookup(V, D, target="CPU", slice_mode=ROW)
    ids = np.array([[1, V + 3]]) if rank == 1 else np.array([[0, 2]])
    try:
        emb(ms.Tensor(ids))
    except IndexError as err:
        print(f"rank {rank} ERROR IndexError: {err}", flush=True)
        communication.get_communicator().barrier()   # all have printed before any exits
        sys.exit(3)
    print(f"rank {rank} NO ERROR", flush=True)


if args.mode == "train":
    run_training()
else:
    run_bad_ids()
communication.release()
