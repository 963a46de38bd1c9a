"""Pipeline parallelism on real MPI ranks (every job under the launcher's timeout).

``pipeline_check.py`` trains a small conv net pipelined and compares each rank's stage
parameters with one process training the unpipelined net on the summed micro-batch loss
(also: the reported loss, released foreign weights, a parameter shared by the first and
last stage, evaluation/prediction, merged checkpoints). ``pipeline_bad_input.py`` makes one
mistake per run; every rank must report it clearly and the job must end, never hang.
"""
import os
import re

import pytest

from mpi_jobs import SCRIPTS, launch, needs_mpi

pytestmark = [pytest.mark.mpi, needs_mpi]

CHECK = os.path.join(SCRIPTS, "pipeline_check.py")
BAD = os.path.join(SCRIPTS, "pipeline_bad_input.py")


@pytest.mark.parametrize("world, args", [
    (2, ["--scheduler", "1f1b"]),
    (2, ["--scheduler", "gpipe"]),
    (4, ["--stages", "4", "--scheduler", "1f1b"]),
    (4, ["--stages", "4", "--scheduler", "gpipe", "--micro", "8"]),
    (2, ["--interleave", "--micro", "2"]),
    (2, ["--loop"]),
    (2, ["--loop", "--all-params"]),
    (4, ["--v26"]),
    (4, ["--stages", "2", "--loop"]),
    (2, ["--stages", "1"]),
], ids=["2-stages-1f1b", "2-stages-gpipe", "4-stages-1f1b", "4-stages-gpipe",
        "2-stages-interleaved", "2-stages-value_and_grad", "2-stages-all-params-optimizer",
        "2x2-mindspore-2.6-form",
        "2x2-value_and_grad",
        "1-stage-2-replicas"])
def test_pipelined_training_equals_one_process(world, args):
    done, _ = launch(world, CHECK, *args)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    match = re.search(rf"PIPELINE_CHECK OK world={world} .* max_rel=(\S+)", done.stdout)
    assert match and float(match.group(1)) <= 1e-5, out
    stages = int(args[args.index("--stages") + 1]) if "--stages" in args else 2
    if stages == world:          # one replica: every rank reports the same loss
        assert len(set(re.findall(r"loss (\S+)$", done.stdout, re.M))) == 1, out


def test_activations_cross_between_virtual_gpu_stages():
    """device_target GPU on the virtual GPU: device arrays go to the communicator as they are."""
    done, _ = launch(2, CHECK, "--gpu", env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert len(re.findall(r"rank \d: stage \d on GPU:0 params", done.stdout)) == 2, out
    match = re.search(r"PIPELINE_CHECK OK world=2 .* max_rel=(\S+)", done.stdout)
    assert match and float(match.group(1)) <= 1e-5, out


def test_two_stages_times_two_replicas_with_merged_checkpoint(tmp_path):
    done, _ = launch(4, CHECK, "--stages", "2", "--ckpt-dir", str(tmp_path))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "PIPELINE_CKPT OK" in done.stdout, out
    match = re.search(r"PIPELINE_CHECK OK world=4 stages=2 max_rel=(\S+)", done.stdout)
    assert match and float(match.group(1)) <= 1e-5, out
    # stage 0 holds only its share of the parameters
    held = re.findall(r"rank \d: stage (\d) .* held (\d+)/(\d+)", done.stdout)
    assert {s for s, _, _ in held} == {"0", "1"}
    assert all(int(h) < int(t) for _, h, t in held)


@pytest.mark.parametrize("mode, world, expected", [
    ("micro_lt_stages", 2, "micro_size (1) must be at least pipeline_stages (2)"),
    ("batch_not_divisible", 2, "divisible by micro_size=3"),
    ("unstaged_param_cell", 2, "has no pipeline_stage"),
    ("out_of_order", 2, "out of execution order"),
    ("stages_not_dividing_world", 3, "pipeline_stages (2) must divide the number of ranks (3)"),
    ("negative_stage", 2, "non-negative"),
    ("bool_stage", 2, "must be an int, got True"),
    ("stage_too_large", 2, "pipeline_stage 2, but pipeline_stages is 2"),
    ("stages_read_different_shards", 2, "pipeline stages 0 and 1 of replica 0 disagree about the data"),
])
def test_bad_input_is_a_clear_error_on_every_rank(mode, world, expected):
    done, _ = launch(world, BAD, mode)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    lines = [line for line in done.stdout.splitlines() if " ERROR " in line]
    assert sorted(int(line.split()[1]) for line in lines) == list(range(world)), out
    assert all(expected in line for line in lines), out


def test_a_rank_that_raises_ends_the_job_non_zero():
    done, seconds = launch(2, BAD, "raise_on_last_stage", launcher_timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode not in (0, 124), out      # 124 would be the launcher's timeout
    assert "deliberate failure on the last stage" in out
    assert seconds < 50


def test_pipeline_times_operator_sharding_times_data_parallel_equals_one_process():
    """2 stages x (2 x 2 operator sharding) on 8 ranks: each rank's slices and the losses
    equal one process (sharded_pipeline_check.py)."""
    done, _ = launch(8, os.path.join(SCRIPTS, "sharded_pipeline_check.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SHARDED_PIPELINE OK world=8 stages=2" in done.stdout
