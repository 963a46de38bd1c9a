"""MindSpore-style data parallel on real MPI ranks: ``Model.train`` with the reduction built in
equals one process on the full batch, and seed 000's whole script (``init()``, sharded
MNIST, ``nn.DistributedGradReducer``) runs under 2 and 8 ranks with the replicas in step.
Every job runs under the launcher's timeout and a subprocess timeout."""
import os
import re

import pytest

from mpi_jobs import REPO, SCRIPTS, launch, needs_mpi

pytestmark = [pytest.mark.mpi, needs_mpi]


@pytest.mark.parametrize("world", [2, 4])
def test_model_train_in_data_parallel_mode_equals_one_process(world):
    done, _ = launch(world, os.path.join(SCRIPTS, "dp_model_check.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(rf"DP_MODEL_CHECK OK world={world} max_diff=(\S+)", done.stdout)
    assert match and float(match.group(1)) <= 1e-5, done.stdout


@pytest.mark.parametrize("world", [2, 8])
def test_seed_000_data_parallel_script_runs_and_keeps_replicas_identical(world):
    pytest.importorskip("sklearn", reason="the example trains on scikit-learn's digits")
    done, _ = launch(world, os.path.join(REPO, "examples", "host_device_mlp.py"), "--epochs", "2",
                     env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    checksums = re.findall(rf"rank (\d+)/{world}: parameter checksum (\S+)", done.stdout)
    assert sorted(int(r) for r, _ in checksums) == list(range(world)), out
    assert len({c for _, c in checksums}) == 1, f"replicas diverged: {checksums}"
    losses = {e: [float(v) for v in re.findall(rf"epoch: {e}, step: 0, loss is (\S+)", out)]
              for e in (0, 1)}
    assert len(losses[0]) == len(losses[1]) == world
    assert sum(losses[1]) < sum(losses[0])       # the mean loss over the ranks falls
    assert re.search(r"layer1\.matmul \(MatMul\)\s+CPU", done.stdout)  # rank 0's placement report
