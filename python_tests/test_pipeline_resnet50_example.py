"""``examples/pipeline_resnet50_cifar.py`` (issue 24, item 6): ResNet-50's depth at 32x32,
narrow, on synthetic CIFAR-10 in the real binary format, sharded by rank as MindSpore's
sample does, with full_batch=True.

8 ranks = 2 stages x 4 data-parallel replicas, two steps of a global batch of 32 (each
replica 8 rows in 2 micro-batches). Checked against one process accumulating the same
micro-batches (``--reference 4``): the losses of both steps and the parameters after the
first step to <= 1e-5 relative; the 4 replicas of each stage hold bit-identical parameters
after every step. (On 2 ranks, one replica, the example equals the one process bit for
bit: ``--save DIR`` then ``--reference 1 --save DIR``; not run here, to keep the suite short.)
"""
import os
import re

import numpy as np
import pytest

from mpi_jobs import REPO, launch, needs_mpi, run_process

pytestmark = [pytest.mark.mpi, pytest.mark.slow, needs_mpi]

EXAMPLE = os.path.join(REPO, "examples", "pipeline_resnet50_cifar.py")
RANK_LINE = re.compile(r"PIPELINE_RESNET50 rank=(\d) world=\d stage=(\d) replica=(\d) "
                       r"params=(\d+) losses=(\S+)")
REFERENCE_LINE = re.compile(r"REFERENCE replicas=\d params=(\d+) losses=(\S+)")
SMALL = ["--epochs", "1", "--samples", "64", "--width", "4"]


def _max_rel(got, want):
    return max(float(np.abs(got[k] - want[k]).max() / (np.abs(want[k]).max() + 1e-12))
               for k in got.files)


def _run(world, folder):
    done, _ = launch(world, EXAMPLE, *SMALL, "--save", str(folder), launcher_timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    ranks = {int(m[0]): m[1:] for m in RANK_LINE.findall(done.stdout)}
    assert sorted(ranks) == list(range(world)), out
    ref, _ = run_process(["python", EXAMPLE, *SMALL, "--reference", str(world // 2),
                          "--save", str(folder)], timeout=300)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    (params, losses), = REFERENCE_LINE.findall(ref.stdout)
    return ranks, out, int(params), [float(v) for v in losses.split(",")]


def test_8_rank_pipeline_times_data_parallel_equals_one_process(tmp_path):
    ranks, out, total_params, ref_losses = _run(8, tmp_path)
    stage_params = {int(s): int(n) for _, (s, _, n, _) in ranks.items()}
    assert sum(stage_params.values()) == total_params, out     # the stages split the network
    for rank, (stage, replica, _, losses) in ranks.items():
        losses = [float(v) for v in losses.split(",")]
        # step t of replica j is the reference's (t * 4 + j)-th replica loss
        want = [ref_losses[t * 4 + int(replica)] for t in range(2)]
        np.testing.assert_allclose(losses, want, rtol=1e-5, err_msg=out)
    reference = np.load(tmp_path / "reference_step1.npz")
    for rank in range(8):
        got = np.load(tmp_path / f"rank{rank}_step1.npz")
        assert _max_rel(got, reference) <= 1e-5, rank
        for step in (1, 2):
            first = np.load(tmp_path / f"rank{(rank // 4) * 4}_step{step}.npz")
            mine = np.load(tmp_path / f"rank{rank}_step{step}.npz")
            assert all(np.array_equal(mine[k], first[k]) for k in first.files), (rank, step)
    stage0 = set(np.load(tmp_path / "rank0_step2.npz").files)
    stage1 = set(np.load(tmp_path / "rank4_step2.npz").files)
    assert stage0 and stage1 and not stage0 & stage1          # the stages hold different layers
    assert "sharded by rank (num_shards=8, shard_id=rank)" in out

