"""Rank-sharded data under a pipeline (issue 24, item 3).

MindSpore's samples shard the dataset by global rank (``num_shards=get_group_size(),
shard_id=get_rank()``) also in pipeline programs; MindSpore feeds every rank its own shard,
so the last stage's labels would belong to other samples than stage 0's images. Here such a
dataset is re-sharded by replica (noted once) and the pairs match. Stages that disagree
about the data are one clear error on every rank. 4 ranks: 2 stages x 2 replicas; every
sample's input and label are its id, and the network passes the ids through unchanged.
"""
import os
import re

import pytest

from mpi_jobs import SCRIPTS, launch, needs_mpi

pytestmark = [pytest.mark.mpi, needs_mpi]

CHECK = os.path.join(SCRIPTS, "pipeline_data_shards_check.py")
PAIRS = re.compile(r"PAIRS rank=(\d) replica=(\d) ok=(\w+) ids=(\S+)")
STEPS = re.compile(r"STEPS rank=(\d) n=(\d+)")


def _run(*args):
    done, _ = launch(4, CHECK, *args)
    return done, done.stdout + done.stderr


@pytest.mark.parametrize("args, steps", [
    (["--shard", "rank"], 4),                     # 32 samples, 2 replicas, batches of 4
    (["--shard", "rank", "--full-batch"], 8),     # every rank reads all 32; 2 rows a replica
    (["--shard", "replica"], 4),
    (["--shard", "none"], 4),
    (["--shard", "none", "--full-batch"], 8),
], ids=["by-rank", "by-rank-full_batch", "by-replica", "unsharded", "unsharded-full_batch"])
def test_last_stage_labels_belong_to_stage_0_inputs(args, steps):
    done, out = _run(*args)
    assert done.returncode == 0, out
    assert sorted(STEPS.findall(done.stdout)) == [(str(r), str(steps)) for r in range(4)], out
    pairs = PAIRS.findall(done.stdout)
    assert sorted(p[0] for p in pairs) == ["2", "3"], out       # the last stage's ranks
    assert all(ok == "True" for _, _, ok, _ in pairs), out
    replica_ids = [set(map(int, ids.split(","))) for _, _, _, ids in pairs]
    assert not replica_ids[0] & replica_ids[1], out             # replicas read different samples
    assert replica_ids[0] | replica_ids[1] == set(range(32)), out   # and all of them
    noted = "sharded by rank (num_shards=4, shard_id=rank)" in out
    assert noted == (args[1] == "rank"), out


def test_stages_reading_different_shards_is_an_error_naming_them_on_every_rank():
    done, out = _run("--shard", "stage")
    assert done.returncode != 0, out
    lines = [line for line in done.stdout.splitlines() if " ERROR " in line]
    assert sorted(int(line.split()[1]) for line in lines) == [0, 1, 2, 3], out
    assert all("pipeline stages 0 and 1 of replica 0 disagree about the data: stage 0 (rank 0) "
               "reads shard 0 of 2" in line and "stage 1 (rank 2) reads shard 1 of 2" in line
               for line in lines), out


def test_an_unsharded_dataset_with_fewer_batches_than_replicas_says_why_it_is_empty():
    """4 samples = 1 batch of 4 for 2 replicas: replica 1 gets no batch, and the error says that
    the replicas take the batches in turn (it said only 'yielded no batches')."""
    done, out = _run("--shard", "none", "--samples", "4")
    assert done.returncode != 0, out
    assert "replicas of each pipeline stage take the batches of an unsharded dataset in turn " \
           "(replica j: batches j, j + 2, ...; this is replica 1)" in out, out
    assert "fewer than 2 batches (1)" in out, out
