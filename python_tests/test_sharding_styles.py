"""Operator sharding in every training style MindSpore users write, on 8 thread ranks.

For each style (Model, TrainOneStepCell, a GradOperation cell, a value_and_grad loop, a
function under jit, AutoParallel on a function and on a cell) the operator-parallel
network of MindSpore's tutorial trains sharded: each rank's weights have their slice
shapes, the bytes the communicators count equal the layouts' prediction, and the merged
parameters after the steps equal one process's."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.auto_parallel import AutoParallel
from minitorch_dist.parallel.sharding import assemble_array
from minitorch_dist.parallel.sharding.rules import ShardingError
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.parallel.sharding.sharded_call import ShardedCall
from minitorch_dist.parallel.sharding.traffic import predicted_step_bytes

WORLD, ROWS, STEPS, LR = 8, 2, 3, 0.05
DIMS = (784, 512, 512, 10)


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


class OperatorParallelNet(nn.Cell):
    """The tutorial's network: 784-512-512-10 MatMuls, the first two sharded."""

    def __init__(self, weights, sharded=True):
        super().__init__()
        self.flatten = ops.Flatten()
        self.fc1_weight = ms.Parameter(ms.Tensor(weights[0].copy()), "fc1_weight")
        self.fc2_weight = ms.Parameter(ms.Tensor(weights[1].copy()), "fc2_weight")
        self.fc3_weight = ms.Parameter(ms.Tensor(weights[2].copy()), "fc3_weight")
        self.matmul1 = ops.MatMul()
        self.relu1 = ops.ReLU()
        self.matmul2 = ops.MatMul()
        self.relu2 = ops.ReLU()
        self.matmul3 = ops.MatMul()
        if sharded:
            self.matmul1.shard(((2, 4), (4, 1)))
            self.relu1.shard(((4, 1),))
            self.matmul2.shard(((1, 8), (8, 1)))
            self.relu2.shard(((8, 1),))

    def construct(self, x):
        x = self.relu1(self.matmul1(self.flatten(x), self.fc1_weight))
        x = self.relu2(self.matmul2(x, self.fc2_weight))
        return self.matmul3(x, self.fc3_weight)


LOCAL_SHAPES = {"fc1_weight": (196, 512), "fc2_weight": (64, 512), "fc3_weight": (512, 10)}


class Dense(nn.Cell):
    """The sharding-propagation tutorial's Dense: MatMul then Add."""

    def __init__(self, weight, bias):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(weight.copy()))
        self.bias = ms.Parameter(ms.Tensor(bias.copy()))
        self.matmul = ops.MatMul()
        self.add = ops.Add()

    def construct(self, x):
        return self.add(self.matmul(x, self.weight), self.bias)


class PropagationNet(nn.Cell):
    """The sharding-propagation tutorial's FFN: only dense1's MatMul is sharded."""

    def __init__(self, weights, sharded=True):
        super().__init__()
        self.flatten = ops.Flatten()
        self.dense1 = Dense(weights[0][:, :64], weights[1][0, :64])
        self.relu = ops.ReLU()
        self.dense2 = Dense(weights[1][:64, :10], weights[2][0, :10])
        if sharded:
            self.dense1.matmul.shard(((2, 1), (1, 4)))

    def construct(self, x):
        return self.dense2(self.relu(self.dense1(self.flatten(x))))


# the tutorial's propagation: dense1's weight split 4 ways by columns, the ReLU and dense2's
# MatMul follow ((2, 4)), so dense2's weight is split 4 ways by rows
PROPAGATED_SHAPES = {"dense1.weight": (784, 16), "dense1.bias": (16,),
                     "dense2.weight": (16, 10), "dense2.bias": (10,)}
NETWORKS = {"operator_parallel": (OperatorParallelNet, "semi_auto_parallel", LOCAL_SHAPES),
            "sharding_propagation": (PropagationNet, "auto_parallel", PROPAGATED_SHAPES)}


def _data():
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((a, b)).astype(np.float32) * 0.05
               for a, b in zip(DIMS[:-1], DIMS[1:])]
    x = rng.random((STEPS, WORLD * ROWS, 1, 28, 28), np.float32)
    y = rng.integers(0, 10, (STEPS, WORLD * ROWS)).astype(np.int32)
    return weights, x, y


def _one_process(weights, x, y, network=OperatorParallelNet):
    net = network(weights, sharded=False)
    opt = nn.SGD(net.trainable_params(), LR)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)
    losses = [float(step(ms.Tensor(x[s]), ms.Tensor(y[s])).asnumpy()) for s in range(STEPS)]
    return losses, {p.name: p.asnumpy() for p in net.trainable_params()}


# ---- the styles: each returns step(x, y) -> loss, given the network ----------------------
def _model_style(net, opt, loss_fn):
    model = ms.Model(net, loss_fn, opt)
    return lambda x, y: float(model.train_network(x, y).asnumpy())


def _train_one_step_style(net, opt, loss_fn):
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    return lambda x, y: float(step(x, y).asnumpy())


class _GradOperationStep(nn.Cell):
    """A user's training cell, Wide&Deep's way: a forward for the loss, then GradOperation
    with a sensitivity."""

    def __init__(self, network, optimizer):
        super().__init__()
        self.network = network
        self.weights = optimizer.parameters
        self.optimizer = optimizer
        self.grad = ops.GradOperation(get_by_list=True, sens_param=True)

    def construct(self, x, y):
        loss = self.network(x, y)
        grads = self.grad(self.network, self.weights)(x, y, ms.Tensor(np.float32(1.0)))
        self.optimizer(grads)
        return loss


def _grad_operation_style(net, opt, loss_fn):
    step = _GradOperationStep(nn.WithLossCell(net, loss_fn), opt)
    return lambda x, y: float(step(x, y).asnumpy())


def _forward_fn(net, loss_fn):
    def forward_fn(data, target):
        logits = net(data)
        return loss_fn(logits, target), logits
    return forward_fn


def _value_and_grad_style(net, opt, loss_fn):
    grad_fn = ms.value_and_grad(_forward_fn(net, loss_fn), None, net.trainable_params(),
                                has_aux=True)

    def step(x, y):
        (loss, _), grads = grad_fn(x, y)
        opt(grads)
        return float(loss.asnumpy())
    return step


def _train_step(net, opt, loss_fn):
    grad_fn = ops.value_and_grad(_forward_fn(net, loss_fn), None, net.trainable_params(),
                                 has_aux=True)

    def train_step(inputs, targets):
        (loss, _), grads = grad_fn(inputs, targets)
        opt(grads)
        return loss
    return train_step


def _jit_style(net, opt, loss_fn):
    step = ms.jit(_train_step(net, opt, loss_fn))
    return lambda x, y: float(step(x, y).asnumpy())


def _auto_parallel_function_style(net, opt, loss_fn):
    step = AutoParallel(_train_step(net, opt, loss_fn), parallel_mode="semi_auto")
    return lambda x, y: float(step(x, y).asnumpy())


def _auto_parallel_cell_style(net, opt, loss_fn):
    model = ms.Model(AutoParallel(net, parallel_mode="semi_auto"), loss_fn, opt)
    return lambda x, y: (model.train(1, [(x, y)]), float("nan"))[1]


STYLES = {"model": _model_style, "train_one_step": _train_one_step_style,
          "grad_operation": _grad_operation_style, "value_and_grad": _value_and_grad_style,
          "jit": _jit_style, "auto_parallel_function": _auto_parallel_function_style,
          "auto_parallel_cell": _auto_parallel_cell_style}
GLOBAL_MODE = {"auto_parallel_function": False, "auto_parallel_cell": False}


def _programs(net):
    """The sharded programs that ran the network's parameters (any style)."""
    ids = {id(p) for p in net.trainable_params()}
    return [call.program for call in ShardedCall.instances() if call.program is not None
            and any(id(p) in ids for p in call.program.graph.params.values())]


@pytest.mark.parametrize("network", sorted(NETWORKS))
@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_shards_the_tutorial_networks(style, network):
    weights, x, y = _data()
    build, mode, shapes = NETWORKS[network]
    ref_losses, ref_params = _one_process(weights, x, y, build)
    if GLOBAL_MODE.get(style, True):
        ms.set_auto_parallel_context(parallel_mode=mode)
    elif mode == "auto_parallel":
        return      # AutoParallel's "sharding_propagation" mode: covered below

    def rank(comm):
        with sharding_world(comm):
            net = build(weights)
            opt = nn.SGD(net.trainable_params(), LR)
            step = STYLES[style](net, opt, nn.CrossEntropyLoss())
            rows = slice(comm.rank * ROWS, (comm.rank + 1) * ROWS)
            losses, counted, predicted = [], None, None
            for s in range(STEPS):
                if s == 1:
                    program = [p for p in _programs(net) if p.rank == comm.rank][-1]
                    comms = list({id(c): c for c in program.groups.communicators() + [comm]}.values())
                    for c in comms:
                        c.reset_stats()
                losses.append(step(ms.Tensor(x[s][rows]), ms.Tensor(y[s][rows])))
                if s == 1:
                    counted = sum(c.comm_stats()["bytes_sent"] for c in comms)
                    bytes_ = predicted_step_bytes(program)
                    predicted = bytes_["total"]
                    if style == "grad_operation":    # its step runs the forward twice
                        predicted += bytes_["redistribution_fwd"] + bytes_["operator_fwd"]
            return losses, counted, predicted, {
                p.name.removeprefix("network."): (p.asnumpy(), p.sharding_layout)
                for p in net.trainable_params()}

    results = run_ranks(WORLD, rank, timeout=120)
    for losses, counted, predicted, params in results:
        assert {n: v.shape for n, (v, _) in params.items()} == shapes
        assert counted == predicted and counted > 0
        if not np.isnan(losses[0]):
            np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for name, want in ref_params.items():
        layout = results[0][3][name][1]
        merged = assemble_array([r[3][name][0] for r in results], layout)
        np.testing.assert_allclose(merged, want, rtol=1e-5, atol=1e-6)


def test_auto_parallel_sharding_propagation_mode_on_a_function():
    weights, x, y = _data()
    ref_losses, ref_params = _one_process(weights, x, y, PropagationNet)

    def rank(comm):
        with sharding_world(comm):
            net = PropagationNet(weights)
            opt = nn.SGD(net.trainable_params(), LR)
            step = AutoParallel(_train_step(net, opt, nn.CrossEntropyLoss()),
                                parallel_mode="sharding_propagation")
            rows = slice(comm.rank * ROWS, (comm.rank + 1) * ROWS)
            losses = [float(step(ms.Tensor(x[s][rows]), ms.Tensor(y[s][rows])).asnumpy())
                      for s in range(STEPS)]
            return losses, {p.name: p.shape for p in net.trainable_params()}

    for losses, shapes in run_ranks(WORLD, rank, timeout=120):
        assert shapes == PROPAGATED_SHAPES
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)


def test_data_parallel_keeps_working_in_the_functional_style():
    """DATA_PARALLEL with a jit train_step and nn.DistributedGradReducer, as MindSpore's data
    parallel sample writes it: every rank ends with one process's weights."""
    weights, x, y = _data()
    _, ref_params = _one_process(weights, x, y)
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)

    def rank(comm):
        net = OperatorParallelNet(weights, sharded=False)
        opt = nn.SGD(net.trainable_params(), LR)
        reducer = nn.DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
        grad_fn = ms.value_and_grad(_forward_fn(net, nn.CrossEntropyLoss()), None,
                                    net.trainable_params(), has_aux=True)

        @ms.jit
        def train_step(a, b):
            (loss, _), grads = grad_fn(a, b)
            opt(reducer(grads))
            return loss

        rows = slice(comm.rank * ROWS, (comm.rank + 1) * ROWS)
        for s in range(STEPS):
            train_step(ms.Tensor(x[s][rows]), ms.Tensor(y[s][rows]))
        return {p.name: p.asnumpy() for p in net.trainable_params()}

    for params in run_ranks(WORLD, rank, timeout=120):
        for name, want in ref_params.items():
            np.testing.assert_allclose(params[name], want, rtol=1e-5, atol=1e-6)


def test_a_split_strategy_outside_a_staged_cell_of_a_pipeline_is_refused():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=2)
    matmul = ops.MatMul().shard(((2, 1), (1, 1)))
    with pytest.raises(ShardingError, match="pipelined job.*staged cells"):
        matmul(ms.Tensor(np.ones((4, 2), np.float32)), ms.Tensor(np.ones((2, 2), np.float32)))


def test_strategies_outside_a_network_call_are_refused():
    """A sharded primitive called bare under semi_auto would run whole: refused by name."""
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    matmul = ops.MatMul().shard(((2, 1), (1, 1)))
    x, w = np.ones((4, 2), np.float32), np.ones((2, 2), np.float32)

    def rank(comm):
        with sharding_world(comm):
            matmul(ms.Tensor(x), ms.Tensor(w))

    with pytest.raises(ShardingError, match=r"MatMul.*outside a network call"):
        run_ranks(2, rank, timeout=60)
    # one rank: the split cannot be honoured, and the error says how to run it
    with pytest.raises(ShardingError, match=r"splits over 2 devices but this job has one rank"):
        matmul(ms.Tensor(x), ms.Tensor(w))
    plain = ops.MatMul().shard(((1, 1), (1, 1)))          # no split: runs whole
    assert plain(ms.Tensor(x), ms.Tensor(w)).shape == (4, 2)


def test_replication_on_several_ranks_without_semi_auto_now_fails():
    """The old silent path: strategies set, parallel_mode left at stand_alone, 2 ranks each
    training the whole network. It now stops on every rank, naming the primitive."""
    weights, x, y = _data()

    def rank(comm):
        with sharding_world(comm):
            net = OperatorParallelNet(weights)
            step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                                       nn.SGD(net.trainable_params(), LR))
            step(ms.Tensor(x[0][:2]), ms.Tensor(y[0][:2]))

    with pytest.raises(ShardingError, match=r"matmul1: strategy \(\(2, 4\), \(4, 1\)\) is set but "
                                            r"parallel_mode is 'stand_alone'.*replicated"):
        run_ranks(2, rank, timeout=60)


def test_one_process_outside_semi_auto_runs_whole_with_a_warning(caplog):
    weights, x, y = _data()
    net = OperatorParallelNet(weights)
    with caplog.at_level("WARNING", logger="minitorch_dist"):
        out = net(ms.Tensor(x[0][:2]))
        net(ms.Tensor(x[0][:2]))
    assert out.shape == (2, 10)
    assert sum("matmul1: strategy" in r.message for r in caplog.records) == 1


def test_shard_errors_name_the_primitive():
    with pytest.raises(ValueError, match=r"MatMul-op\d+\.shard: in_strategy must be"):
        ops.MatMul().shard(((2.5, 1), (1, 1)))
    relu = ops.ReLU()
    relu.instance_name = "relu1"
    with pytest.raises(ValueError, match=r"relu1\.shard: give in_strategy or strategy"):
        relu.shard(((2, 1),), strategy=((2, 1),))
    assert ops.ReLU().shard(strategy=((2, 1),)).in_strategy == ((2, 1),)


def test_auto_parallel_bad_input():
    with pytest.raises(ValueError, match="parallel_mode must be one of"):
        AutoParallel(lambda x: x, parallel_mode="data_parallel")
    ap = AutoParallel(lambda x: x)
    with pytest.raises(ValueError, match="scheduler must be one of"):
        ap.pipeline(stages=1, scheduler="zero_bubble")
    with pytest.raises(ValueError, match="stages must be positive"):
        ap.pipeline(stages=0)
    with pytest.raises(TypeError, match="interleave must be True or False"):
        ap.pipeline(stages=2, interleave="yes")
    with pytest.raises(ValueError, match="dataset_strategy"):
        ap.dataset_strategy(((8, 1.5),))
    from minitorch_dist.parallel.nn import Pipeline
    with pytest.raises(ValueError, match="not a cell of the network.*_backbone"):
        Pipeline(nn.WithLossCell(nn.Dense(2, 2), nn.MSELoss()), 2, stage_config={"layer9": 0})


def test_settings_conflicting_between_styles_are_refused():
    """The context says one thing, AutoParallel another: a clear error, not a silent winner."""
    ms.set_auto_parallel_context(parallel_mode="data_parallel")
    with pytest.raises(ValueError, match=r"conflict.*'data_parallel' \(context\) vs "
                                         r"'semi_auto_parallel' \(AutoParallel\)"):
        AutoParallel(lambda x: x)(ms.Tensor([1.0]))
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=2)
    ap = AutoParallel(lambda x: x)
    ap.pipeline(stages=4)
    with pytest.raises(ValueError, match="pipeline_stages 2 \\(context\\) vs 4"):
        ap(ms.Tensor([1.0]))


def test_jit_keeps_results_and_checks_options():
    f = ms.jit(lambda a: (a * a).sum(), jit_config=ms.JitConfig(jit_level="O1"))
    assert float(f(ms.Tensor([1.0, 2.0])).asnumpy()) == 5.0
    with pytest.raises(ValueError, match="capture_mode must be one of"):
        ms.jit(lambda a: a, capture_mode="graph")
    with pytest.raises(ValueError, match="jit_level"):
        ms.JitConfig(jit_level="O9")
