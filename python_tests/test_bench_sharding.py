"""``benchmarks/bench_sharding.py`` run tiny, on thread ranks (no MPI needed).

What does not depend on speed is asserted exactly: model parallel holds 1/N of the split
weights on every rank; the bytes the communicators counted in one step equal the prediction
walked from the layouts and the closed form; every sharded job's losses equal one
process's. The layout walker is also checked on a net whose redistributions need an
AllToAll with a backward, a ReduceScatter (``out_strategy``) and a 2 x 2 reshuffle.
"""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from minitorch_dist.parallel.sharding.traffic import predicted_step_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_sharding.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_sharding", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick(bench):
    lines = []
    result = bench.run(bench.parse_args(["--quick", "--ranks", "2,4,8"]), out=lines.append)
    return result, "\n".join(lines)


def test_closed_form_by_hand(bench):
    B, D, H, O = sizes = (16, 12, 32, 6)
    assert bench.closed_form_bytes(4, 1, sizes) == 4 * (D * H + H + H * O + O) + 8   # data parallel
    assert bench.closed_form_bytes(1, 4, sizes) == 4 * (B * D // 4 + 2 * B * O + O) + 8  # Megatron
    assert bench.closed_form_bytes(2, 2, sizes) == 4 * (B * D // 4 + B * O
                                                        + (D * H + H + H * O) // 2 + O) + 8
    assert bench.parameter_fractions(1, 4, sizes)[0] == 0.25


def test_model_parallel_holds_one_nth_of_the_split_weights(quick):
    result, _ = quick
    for n in (2, 4, 8):
        fig = result["figures"][f"mp@{n}"]
        assert fig["param_fraction_split"] == [1 / n] * n
        assert all(f == pytest.approx(fig["predicted_fraction_model"], abs=0)
                   for f in fig["param_fraction_model"])
        assert 1 / n < fig["param_fraction_model"][0] < 1 / n + 0.02      # b2 is whole
        assert fig["opt_state_fraction"] == fig["param_fraction_model"]
    assert result["figures"]["dp@4"]["param_fraction_model"] == [1.0] * 4
    assert result["figures"]["mixed@8"]["param_fraction_split"] == [0.25] * 8     # 2 x 4


def test_counted_bytes_equal_the_layouts_and_the_closed_form(quick, bench):
    result, _ = quick
    assert result["failed"] == []
    for key, fig in result["figures"].items():
        want = bench.closed_form_bytes(fig["dp"], fig["mp"], tuple(result["sizes"]))
        assert fig["counted_bytes"] == [want] * fig["n"], key
        assert fig["layout_bytes"] == [want] * fig["n"], key
    mp = result["figures"]["mp@4"]["layout_breakdown"]
    B, D, H, O = result["sizes"]
    assert mp["operator_fwd"] == mp["operator_bwd"] == 4 * B * O + 4      # AllReduce + loss
    assert mp["redistribution_fwd"] == 4 * B * D // 4                      # x gathered
    assert mp["mirror"] == 4 * O                                           # b2 only


def test_sharded_losses_equal_one_process(quick, bench):
    result, _ = quick
    for key, fig in result["figures"].items():
        assert fig["loss_max_rel_diff"] <= bench.LOSS_RTOL, key


def _jobs_asked_for(bench, ranks):
    return {f"{name}@{n}" for n in ranks for name in bench.strategies(n)}


def test_the_report_prints_every_ratio(quick, bench):
    result, text = quick
    assert set(result["figures"]) == _jobs_asked_for(bench, (2, 4, 8))
    printed = re.findall(r"step time (\w+) on (\d+) thread ranks / 1 process\s*= ([0-9.]+) "
                         r"\[([0-9.]+), ([0-9.]+)\]", text)
    assert {f"{name}@{n}" for name, n, *_ in printed} == set(result["figures"]), text
    for name, n, median, low, high in printed:
        low, median, high = float(low), float(median), float(high)
        assert math.isfinite(high) and 0 < low <= median <= high
        spread = result["figures"][f"{name}@{n}"]["time_ratio"]    # the printed figures
        assert median == pytest.approx(spread["median"], abs=0.006), (name, n, spread)
    assert "PASS" in text and "FAILED" not in text


def test_layout_walker_on_alltoall_and_reduce_scatter(bench):
    """Counters == ``layout_bytes`` where a gradient flows back through an AllToAll, a
    ReduceScatter (MatMul out_strategy) and a (4,1) -> (2,2) move; losses equal one process."""
    import minitorch_dist as ms
    from minitorch_dist import Tensor, nn, ops
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.nn.parameter import Parameter
    from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell

    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    x, y = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)

    class Net(nn.Cell):
        def __init__(self, shard):
            super().__init__()
            self.w1, self.w2 = Parameter(Tensor(w1.copy()), "w1"), Parameter(Tensor(w2.copy()), "w2")
            self.mm1, self.relu, self.mm2, self.tanh = ops.MatMul(), ops.ReLU(), ops.MatMul(), ops.Tanh()
            if shard:
                self.mm1.shard(((4, 1), (1, 1)))
                self.relu.shard(((1, 4),))
                self.mm2.shard(((1, 4), (4, 1)), ((4, 1),))
                self.tanh.shard(((2, 2),))

        def construct(self, x):
            return self.tanh(self.mm2(self.relu(self.mm1(x, self.w1)), self.w2))

    def train(net, group=None):
        opt = nn.SGD(net.trainable_params(), 0.1)
        cell = nn.WithLossCell(net, nn.MSELoss())
        if group is not None:
            cell = ShardedCell(cell, opt, group=group)
        step = nn.TrainOneStepCell(cell, opt)
        return step, cell

    ms.reset_auto_parallel_context()
    step, _ = train(Net(False))
    reference = [float(step(Tensor(x), Tensor(y)).asnumpy()) for _ in range(2)]
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        step, cell = train(Net(True), group=comm)
        rows = slice(2 * comm.rank, 2 * comm.rank + 2)
        losses = [float(step(Tensor(x[rows]), Tensor(y[rows])).asnumpy())]
        comms = list({id(c): c for c in cell.program.groups.communicators() + [comm]}.values())
        for c in comms:
            c.reset_stats()
        losses.append(float(step(Tensor(x[rows]), Tensor(y[rows])).asnumpy()))
        ops_seen = {op for c in comms for op in c.comm_stats()["by_op"]}
        return losses, sum(c.comm_stats()["bytes_sent"] for c in comms), predicted_step_bytes(cell.program), ops_seen

    try:
        out = run_ranks(4, rank, timeout=60)
    finally:
        ms.reset_auto_parallel_context()
    for losses, counted, predicted, ops_seen in out:
        assert counted == predicted["total"]
        assert predicted["redistribution_bwd"] > 0 and predicted["operator_bwd"] > 0
        assert {"alltoall", "reduce_scatter", "allreduce"} <= ops_seen
        np.testing.assert_allclose(losses, reference, rtol=1e-5)


def test_the_script_runs_from_the_command_line(tmp_path):
    out_json = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("MINITORCH_DIST_VIRTUAL_GPU", None)
    done = subprocess.run([sys.executable, SCRIPT, "--quick", "--json", str(out_json)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model parallel on 4 ranks: W1,b1,W2 bytes held / model = 0.2500" in done.stdout
    report = json.loads(out_json.read_text())
    assert report["failed"] == []
    assert set(report["figures"]) == {"dp@2", "mp@2", "dp@4", "mp@4", "mixed@4"}  # --ranks 2,4


def test_sharding_doc_snippets_run():
    """docs/sharding.md's python blocks that are not marked as fragments (seed 002's program,
    which needs a launcher, is one) run as written, in one process; the thread-rank example
    prints one process's losses."""
    from test_docs_blocks import python_blocks
    doc = os.path.join(ROOT, "docs", "sharding.md")
    blocks = [code for _, code, fragment in python_blocks(open(doc).read()) if not fragment]
    assert len(blocks) >= 4
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("MINITORCH_DIST_VIRTUAL_GPU", None)
    done = subprocess.run([sys.executable, "-c", "\n".join(blocks)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    sharded, alone = eval(lines[0]), eval(lines[1])
    for losses in sharded:
        np.testing.assert_allclose(losses, alone, rtol=1e-5)
    assert "(4, 5, 6, 7)" in done.stdout and "StridedSlice(dim 1, axes=[0], dev=[2,4])" in done.stdout
    assert lines[-2:] == ["128", "112"]
