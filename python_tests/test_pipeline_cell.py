"""PipelineCell and the stage rules in one process: micro-batching with a summed loss,
the checks that run before any message (stages, cells, micro_size, batch), the stage
plan traced from construct, placeholders, topology, and checkpoint merging."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.parallel.pipeline import (PipelineConfigError, PipelineTopology,
                                              merge_pipeline_checkpoints)
from minitorch_dist.parallel.pipeline.interception import TraceRun, intercepting
from minitorch_dist.parallel.pipeline.placeholder import Placeholder
from minitorch_dist.parallel.pipeline.stage_plan import StagePlan


@pytest.fixture(autouse=True)
def _reset_context():
    yield
    ms.reset_auto_parallel_context()


def _mlp(seed=0):
    ms.set_seed(seed)
    return nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3)])


def _data(n=8):
    rng = np.random.default_rng(1)
    return (ms.Tensor(rng.standard_normal((n, 4)).astype(np.float32)),
            ms.Tensor(rng.integers(0, 3, n).astype(np.int32)))


def _loss():
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


# ---- one stage: micro-batching ------------------------------------------------------------
def test_loss_is_the_sum_of_the_micro_batch_losses():
    net = _mlp()
    x, y = _data()
    pipe = nn.PipelineCell(nn.WithLossCell(net, _loss()), 4)
    want = sum(float(_loss()(net(x[2 * i:2 * i + 2]), y[2 * i:2 * i + 2]).asnumpy())
               for i in range(4))
    assert float(pipe(x, y).asnumpy()) == pytest.approx(want, rel=1e-6)


def test_model_trains_a_one_stage_pipeline_like_the_summed_loss():
    x, y = _data()
    net = _mlp()
    pipe = nn.PipelineCell(nn.WithLossCell(net, _loss()), 2)
    ms.Model(pipe, optimizer=nn.SGD(net.infer_param_pipeline_stage(), 0.1)).train(2, [(x, y)])
    ref = _mlp()
    opt = nn.SGD(ref.trainable_params(), 0.1)
    loss_fn = nn.WithLossCell(ref, _loss())
    step = nn.TrainOneStepCell(
        nn.PipelineCell(loss_fn, 2), opt)
    for _ in range(2):
        step(x, y)
    for a, b in zip(net.trainable_params(), ref.trainable_params()):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("micro", [0, -1, True, 2.0])
def test_micro_size_must_be_a_positive_int(micro):
    with pytest.raises(ValueError, match="micro_size must be a positive int"):
        nn.PipelineCell(nn.WithLossCell(_mlp(), _loss()), micro)


def test_batch_not_divisible_by_micro_size_names_the_input():
    x, y = _data(6)
    pipe = nn.PipelineCell(nn.WithLossCell(_mlp(), _loss()), 4)
    with pytest.raises(ValueError, match=r"input 0 has shape \(6, 4\).*micro_size=4"):
        pipe(x, y)


def test_micro_size_below_stages_is_refused_before_anything_runs():
    ms.set_auto_parallel_context(pipeline_stages=4)
    with pytest.raises(ValueError, match=r"micro_size \(2\) must be at least pipeline_stages \(4\)"):
        nn.PipelineCell(nn.WithLossCell(_mlp(), _loss()), 2)


def test_pipeline_stages_must_divide_the_world():
    ms.set_auto_parallel_context(pipeline_stages=2)
    with pytest.raises(ValueError, match=r"pipeline_stages \(2\) must divide the number of ranks \(1\)"):
        nn.PipelineCell(nn.WithLossCell(_mlp(), _loss()), 2)


# ---- stage attributes and the plan --------------------------------------------------------
def test_stage_must_be_a_non_negative_int():
    cell = nn.Dense(2, 2)
    with pytest.raises(TypeError, match="must be an int, got True"):
        cell.pipeline_stage = True
    with pytest.raises(ValueError, match="non-negative"):
        cell.pipeline_stage = -1
    with pytest.raises(TypeError):
        cell.weight.add_pipeline_stage(False)
    cell.pipeline_stage = 1
    assert cell.pipeline_stage == 1


def _two_stage_net():
    net = _mlp()
    net[0].pipeline_stage = 0
    net[2].pipeline_stage = 1
    return net


def test_plan_rejects_a_parameter_cell_without_stage():
    net = _mlp()
    net[0].pipeline_stage = 0
    with pytest.raises(PipelineConfigError, match=r"holds trainable parameters .* no pipeline_stage"):
        StagePlan(net, 2)


def test_plan_rejects_a_stage_beyond_pipeline_stages_and_nested_conflicts():
    net = _two_stage_net()
    net[2].pipeline_stage = 2
    with pytest.raises(PipelineConfigError, match="pipeline_stage 2, but pipeline_stages is 2"):
        StagePlan(net, 2)
    outer = nn.SequentialCell([_two_stage_net()])
    outer.pipeline_stage = 0
    with pytest.raises(PipelineConfigError, match="inside a cell of stage 0"):
        StagePlan(outer, 2)


def _trace(net, stages, interleave=False):
    plan = StagePlan(net, stages, interleave)
    run = TraceRun(plan)
    with intercepting(run):
        net(_data()[0])
    plan.record_trace(run.calls)
    return plan


def test_trace_records_execution_order_and_rejects_a_decreasing_stage():
    plan = _trace(_two_stage_net(), 2)
    assert plan.call_chunks == [0, 1] and plan.chunks == 1
    net = _mlp()
    net[0].pipeline_stage = 1
    net[2].pipeline_stage = 0
    with pytest.raises(PipelineConfigError, match="out of execution order"):
        _trace(net, 2)


def test_trace_rejects_an_empty_stage_and_counts_interleaved_chunks():
    net = _two_stage_net()
    net[2].pipeline_stage = 0
    with pytest.raises(PipelineConfigError, match="stage 1 has no cell"):
        _trace(net, 2)
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(4, 4) for _ in range(4)])
    for i in range(4):
        net[i].pipeline_stage = i % 2
    plan = _trace(net, 2, interleave=True)
    assert plan.call_chunks == [0, 1, 2, 3] and plan.chunks == 2
    net[3].pipeline_stage = 0
    with pytest.raises(PipelineConfigError, match="must cycle"):
        _trace(net, 2, interleave=True)


def test_trace_runs_no_staged_cell():
    calls = []

    class Spy(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(4, 4)

        def construct(self, x):
            calls.append(1)
            return self.dense(x)

    spy = Spy()
    spy.pipeline_stage = 0
    net = nn.SequentialCell([spy])
    _trace(net, 1)
    assert calls == []


def test_shared_parameter_gets_every_stage_that_uses_it():
    net = _two_stage_net()
    shared = net[0].bias
    net[2].extra = shared            # registered in a stage-1 cell too
    plan = StagePlan(net, 2)
    assert plan.stages_of(shared) == {0, 1}
    assert plan.stages_of(net[2].weight) == {1}


# ---- placeholders and topology ------------------------------------------------------------
def test_placeholders_absorb_construct_code_and_primitives():
    p = Placeholder(1)
    run = TraceRun(StagePlan(_two_stage_net(), 2))
    with intercepting(run):
        assert isinstance(ops.MatMul()(p, ms.Tensor(np.ones((2, 2), np.float32))), Placeholder)
        assert isinstance(ops.Concat(0)((ms.Tensor([1.0]), p)), Placeholder)
    q = p.reshape(p.shape[0], -1) * 2 + 1
    assert isinstance(q, Placeholder) and q.origin == 1
    with pytest.raises(TypeError, match="branches on a value"):
        bool(p)


def test_topology_maps_ranks_to_stages_and_replicas_like_mindspore():
    topologies = [PipelineTopology(r, 8, 4) for r in range(8)]
    assert [t.stage for t in topologies] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [t.replica for t in topologies] == [0, 1] * 4
    assert topologies[3].pipeline_ranks == [1, 3, 5, 7]
    assert topologies[3].data_parallel_ranks == [2, 3]
    with pytest.raises(ValueError, match="pipeline_stages must be a positive int"):
        PipelineTopology(0, 4, 0)


def test_pipeline_config_is_validated():
    with pytest.raises(ValueError, match="pipeline_scheduler must be one of"):
        ms.set_auto_parallel_context(pipeline_config={"pipeline_scheduler": "zb"})
    with pytest.raises(ValueError, match="unknown keys"):
        ms.set_auto_parallel_context(pipeline_config={"scheduler": "1f1b"})
    ms.set_auto_parallel_context(pipeline_config={"pipeline_scheduler": "GPipe"})
    assert ms.get_auto_parallel_context("pipeline_config")["pipeline_scheduler"] == "gpipe"


def test_seed_004_spellings_are_accepted():
    from minitorch_dist import context
    from minitorch_dist.context import ParallelMode
    context.set_auto_parallel_context(parallel_mode=ParallelMode.SEMI_AUTO_PARALLEL, gradients_mean=True)
    context.set_auto_parallel_context(pipeline_stages=1, save_graphs=True)
    assert ms.get_context("save_graphs") is True
    ms.set_context(save_graphs=False)


# ---- checkpoints --------------------------------------------------------------------------
def test_merge_refuses_copies_that_disagree(tmp_path):
    a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    ms.save_checkpoint({"w": ms.Tensor([1.0, 2.0]), "u": ms.Tensor([0.0])}, str(a))
    ms.save_checkpoint({"w": ms.Tensor([1.0, 2.5]), "v": ms.Tensor([3.0])}, str(b))
    with pytest.raises(ValueError, match="copies of shared parameter 'w'"):
        merge_pipeline_checkpoints([str(a), str(b)], str(tmp_path / "m.ckpt"))
    ms.save_checkpoint({"w": ms.Tensor([1.0, 2.0]), "v": ms.Tensor([3.0])}, str(b))
    merged = merge_pipeline_checkpoints([str(a), str(b)], str(tmp_path / "m.ckpt"))
    assert sorted(merged) == ["u", "v", "w"]


def test_released_parameters_are_left_out_of_checkpoints(tmp_path):
    net = nn.Dense(2, 2)
    net.bias.release()
    assert net.bias.released and net.bias.data.strides == (0,)
    path = str(tmp_path / "n.ckpt")
    ms.save_checkpoint(net, path)
    assert sorted(ms.load_checkpoint(path)) == ["weight"]


def test_optimizer_states_of_released_parameters_are_left_out_too(tmp_path):
    """A pipeline rank never updates another stage's parameters, so its optimizer state for
    them is zeros that are nobody's values: saved, they stood beside the owner's moments in
    the stage files; loaded, they were required of the rank's own file."""
    net = nn.Dense(2, 2)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                               nn.Momentum(net.trainable_params(), 0.1, 0.9))
    net.bias.release()
    path = str(tmp_path / "s.ckpt")
    ms.save_checkpoint(step, path)
    saved = ms.load_checkpoint(path)
    assert "moments.weight" in saved and "weight" in saved
    assert not any(name.endswith("bias") for name in saved)
    assert ms.load_param_into_net(step, saved) == ([], [])
