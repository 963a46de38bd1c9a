"""Pipeline stage replicas start equal without ``ms.set_seed`` (issue 24, items 4 and 5).

4 MPI ranks, 2 stages of 2 data-parallel replicas; every process draws its own initial
weights. ``pipeline_replicas_check.py`` trains a few steps and prints a digest of each rank's
stage parameters: the replicas of a stage must end bit-identical (their gradients are
averaged, so they stay equal only if they start equal), and the stages hold different
parameters. The ``model`` form is ``Model(AutoParallel(Pipeline(...)).pipeline(2))`` with an
SGD over every parameter, which used to crash on another stage's read-only parameter.
"""
import os
import re

import pytest

from mpi_jobs import SCRIPTS, launch, needs_mpi

pytestmark = [pytest.mark.mpi, needs_mpi]

CHECK = os.path.join(SCRIPTS, "pipeline_replicas_check.py")
LINE = re.compile(r"REPLICA rank=(\d) stage=(\d) initial=(\S+) final=(\S+) params=(\S+) "
                  r"losses=(\S+)")


def _run(*args):
    done, _ = launch(4, CHECK, *args)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    ranks = {int(m[0]): m[1:] for m in LINE.findall(done.stdout)}
    assert sorted(ranks) == [0, 1, 2, 3], out
    return ranks, out


def _stage(ranks, stage):
    return [ranks[r] for r in sorted(ranks) if int(ranks[r][0]) == stage]


@pytest.mark.parametrize("args", [
    ["--form", "cell"],
    ["--form", "cell", "--seed-per-rank"],
    ["--form", "v26"],
    ["--form", "model"],
    ["--form", "cell", "--deferred"],
    ["--form", "model", "--deferred"],
], ids=["PipelineCell", "PipelineCell-seed-per-rank", "Pipeline-stage_config-AutoParallel",
        "Model-AutoParallel-SGD", "PipelineCell-no_init_parameters",
        "Model-AutoParallel-no_init_parameters"])
def test_replicas_of_a_stage_end_bit_identical(args):
    ranks, out = _run(*args)
    finals = []
    for stage in (0, 1):
        replicas = _stage(ranks, stage)
        assert len(replicas) == 2, out
        (_, init_a, final_a, params_a, _), (_, init_b, final_b, params_b, _) = replicas
        if init_a != "None":         # the processes really drew different weights
            assert init_a != init_b, out
        assert params_a == params_b, out
        assert final_a == final_b, f"stage {stage} replicas differ\n{out}"
        finals.append((final_a, params_a))
    assert finals[0] != finals[1] and finals[0][1] != finals[1][1], out


def test_model_over_auto_parallel_pipeline_trains_with_sgd_over_every_parameter():
    ranks, out = _run("--form", "model", "--steps", "8")
    for _, _, _, _, losses in ranks.values():
        values = [float(v) for v in losses.split(",")]
        assert len(values) == 8 and values[-1] < values[0], out


@pytest.mark.parametrize("form", ["model", "v26"])
def test_auto_parallel_pipeline_saves_one_strategy_file_per_stage_that_merge(form, tmp_path):
    """``AutoParallel(...).save_param_strategy_file`` in a pipelined job writes the rank's
    stage file (it used to write a plain file that ``merge_pipeline_strategys`` refused);
    the merged file lays out every parameter of both stages."""
    import json

    import minitorch_dist as ms
    _run("--form", form, "--strategy-dir", str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [f"strategy{r}.ckpt" for r in range(4)]
    merged = tmp_path / "merged.ckpt"
    ms.merge_pipeline_strategys(str(tmp_path), str(merged))
    names = set(json.loads(merged.read_text()))
    for layer in ("fc1", "fc2", "fc3", "fc4"):
        assert any(layer in name for name in names), (layer, sorted(names))
