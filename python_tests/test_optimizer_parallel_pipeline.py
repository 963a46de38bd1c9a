"""Optimizer parallel together with pipeline stages, on 4 MPI ranks (2 stages x 2 replicas):
each stage slices its optimizer states over its own replicas, and the trained parameters equal
those of the same job without optimizer parallel."""
import re
import sys
import textwrap

import pytest

from mpi_jobs import launch, needs_mpi

_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import minitorch_dist as ms
    import minitorch_dist.dataset as ds
    from minitorch_dist import communication, nn
    from minitorch_dist.train import Model

    communication.init()
    rank = communication.get_rank()
    ms.set_seed(3)
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                 gradients_mean=True, pipeline_stages=2,
                                 enable_parallel_optimizer=sys.argv[1] == "on",
                                 parallel_optimizer_config={"parallel_optimizer_threshold": 0})

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Dense(6, 16), nn.Dense(16, 3)
            self.relu = nn.ReLU()

        def construct(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int32)
    data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8)
    net = Net()
    net.fc1.pipeline_stage, net.fc2.pipeline_stage = 0, 1
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    pipe = nn.PipelineCell(nn.WithLossCell(net, loss_fn), 2)
    opt = nn.Adam(net.infer_param_pipeline_stage(), 0.05)
    Model(pipe, optimizer=opt).train(1, data, dataset_sink_mode=False)
    own = [p for p in net.trainable_params() if not p.released]
    states = [tuple(s.shape) for p in opt.parameters for s in opt.states_of(p)]
    values = ",".join(f"{float(np.abs(p.asnumpy()).sum()):.6f}" for p in own)
    print(f"RANK {rank} states={states} values={values}", flush=True)
    communication.release()
""")


def _run(tmp_path, switch):
    script = tmp_path / "pipeline_optimizer_parallel.py"
    script.write_text(_SCRIPT)
    done, _ = launch(4, str(script), switch)
    assert done.returncode == 0, done.stdout + done.stderr
    found = dict(re.findall(r"RANK (\d) (states=.*)", done.stdout))
    assert sorted(found) == ["0", "1", "2", "3"], done.stdout
    return {int(r): line for r, line in found.items()}


@needs_mpi
@pytest.mark.skipif(sys.platform == "win32", reason="MPI jobs run on POSIX")
def test_each_stage_slices_over_its_replicas_and_training_is_unchanged(tmp_path):
    whole, sliced = _run(tmp_path, "off"), _run(tmp_path, "on")
    for rank in range(4):
        values_whole = whole[rank].split(" values=")[1]
        values_sliced = sliced[rank].split(" values=")[1]
        for a, b in zip(values_whole.split(","), values_sliced.split(",")):
            assert float(a) == pytest.approx(float(b), rel=1e-5)
    # stage 0 (ranks 0, 1): fc1 (16 x 6 weight, 16 bias) sliced in two; Adam's two moments
    assert sliced[0].startswith("states=[(48,), (48,), (8,), (8,)]")
    assert whole[0].startswith("states=[(16, 6), (16, 6), (16,), (16,)]")
    # stage 1 (ranks 2, 3): fc2 (3 x 16, 3): halves of 24, and the bias cut 2 + 1
    assert sliced[2].startswith("states=[(24,), (24,), (2,), (2,)]")
    assert sliced[3].startswith("states=[(24,), (24,), (1,), (1,)]")
