"""Communication fusion: ``Cell.set_comm_fusion`` ids, ``Parameter.comm_fusion`` and
``set_auto_parallel_context(comm_fusion=...)`` decide how many collectives a step makes;
the values never change. Ranks run as threads; collectives are counted per step."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.parallel.sharding.scope import sharding_world

RNG = np.random.default_rng(3)
X = RNG.standard_normal((8, 6)).astype(np.float32)
Y = RNG.standard_normal((8, 2)).astype(np.float32)


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_auto_parallel_context()


class Net(nn.Cell):
    def __init__(self, ids=None):
        super().__init__()
        self.layer1 = nn.Dense(6, 8, weight_init="ones", bias_init="zeros")
        self.layer2 = nn.Dense(8, 8, weight_init="ones", bias_init="zeros")
        self.layer3 = nn.Dense(8, 2, weight_init="ones", bias_init="zeros")
        for layer, fusion in zip((self.layer1, self.layer2, self.layer3), ids or ()):
            layer.set_comm_fusion(fusion)

    def construct(self, x):
        return self.layer3(self.layer2(self.layer1(x).tanh()).tanh())


def _one_step(ids=None, optimizer_parallel=False):
    """Per rank: (gradients or parameters after one step, collectives by kind)."""
    def rank(comm):
        with sharding_world(comm):
            net = Net(ids)
            loss = nn.WithLossCell(net, nn.MSELoss())
            params = net.trainable_params()
            opt = nn.Adam(params, 0.01)
            reducer = DistributedGradReducer(params, mean=True, communicator=comm)
            part = slice(comm.rank * 4, comm.rank * 4 + 4)
            _, grads = ms.value_and_grad(loss, None, params)(ms.Tensor(X[part]),
                                                             ms.Tensor(Y[part]))
            comm.reset_stats()
            grads = reducer(grads)
            if optimizer_parallel:
                opt(grads)
                values = [p.asnumpy() for p in params]
            else:
                values = [g.asnumpy() for g in grads]
            return values, {op: s["calls"] for op, s in comm.comm_stats()["by_op"].items()}
    return run_ranks(2, rank)


def _same_values(results, reference):
    for values, _ in results:
        for got, want in zip(values, reference[0][0]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_set_comm_fusion_gives_every_parameter_of_the_cell_its_id():
    net = Net((0, 1, 2))
    assert [(p.name, p.comm_fusion) for p in net.trainable_params()] == [
        ("layer1.weight", 0), ("layer1.bias", 0), ("layer2.weight", 1), ("layer2.bias", 1),
        ("layer3.weight", 2), ("layer3.bias", 2)]
    net.set_comm_fusion(5, recurse=False)      # the top cell holds no parameter of its own
    assert net.layer1.weight.comm_fusion == 0


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.0, TypeError), (True, TypeError)])
def test_bad_fusion_ids_are_refused(value, error):
    with pytest.raises(error, match="fusion_type"):
        Net().layer1.set_comm_fusion(value)


def test_data_parallel_allreduces_once_per_fusion_id():
    ms.set_auto_parallel_context(parallel_mode="data_parallel")
    reference = _one_step()
    assert reference[0][1] == {"allreduce": 1}          # default: one 4 MB bucket
    three = _one_step((0, 1, 2))
    assert all(calls == {"allreduce": 3} for _, calls in three)
    _same_values(three, reference)
    # ids need not be neighbours: layers 1 and 3 share id 7
    two = _one_step((7, 1, 7))
    assert all(calls == {"allreduce": 2} for _, calls in two)
    _same_values(two, reference)


def test_comm_fusion_context_modes_set_the_number_of_allreduces():
    ms.set_auto_parallel_context(parallel_mode="data_parallel")
    reference = _one_step()
    ms.set_auto_parallel_context(comm_fusion={"openstate": False})
    alone = _one_step((0, 0, 0))
    assert alone[0][1] == {"allreduce": 6}              # every gradient alone
    _same_values(alone, reference)
    ms.set_auto_parallel_context(comm_fusion={"allreduce": {"mode": "index", "config": [2, 4]}})
    assert _one_step()[0][1] == {"allreduce": 3}
    # 200 bytes per group: layer1.weight (192 B) + bias, then layer2.weight (256 B) alone, ...
    ms.set_auto_parallel_context(comm_fusion={"allreduce": {"mode": "size",
                                                            "config": 200 / (1 << 20)}})
    sized = _one_step()
    assert sized[0][1] == {"allreduce": 4}
    _same_values(sized, reference)


def test_optimizer_parallel_gathers_and_scatters_once_per_fusion_id():
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                 enable_parallel_optimizer=True,
                                 parallel_optimizer_config={"parallel_optimizer_threshold": 0})
    fused = _one_step(optimizer_parallel=True)
    assert fused[0][1] == {"reduce_scatter": 1, "allgather": 1}
    split = _one_step((0, 1, 2), optimizer_parallel=True)
    assert split[0][1] == {"reduce_scatter": 3, "allgather": 3}
    _same_values(split, fused)


@pytest.mark.parametrize("config, match", [
    ([1], "must be a dict"),
    ({"allreduce": {"mode": "bucket"}}, "mode must be one of"),
    ({"allreduce": {"mode": "size", "config": 0}}, "positive size in MB"),
    ({"allreduce": {"mode": "index", "config": [3, 2]}}, "strictly increasing"),
    ({"allgather": {"mode": "index", "config": [2]}}, "allreduce only"),
    ({"allreduce": {"mode": "auto", "config": 4}}, "takes no config"),
    ({"openstate": "yes"}, "openstate must be True or False"),
    ({"broadcast": {"mode": "auto"}}, "unknown keys"),
])
def test_bad_comm_fusion_settings_are_refused_and_change_nothing(config, match):
    before = ms.get_auto_parallel_context("comm_fusion")
    with pytest.raises(ValueError, match=match):
        ms.set_auto_parallel_context(comm_fusion=config)
    assert ms.get_auto_parallel_context("comm_fusion") == before


def _semi_auto_step(ids):
    """Per rank under semi-auto parallel: (gradients, allreduce calls) of one value_and_grad
    (which spans its forward and backward with ``FusedMirrors``)."""
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    def rank(comm):
        with sharding_world(comm):
            net = Net(ids)
            loss = nn.WithLossCell(net, nn.MSELoss(reduction="sum"))
            params = net.trainable_params()
            part = slice(comm.rank * 4, comm.rank * 4 + 4)
            comm.reset_stats()
            _, grads = ms.value_and_grad(loss, None, params)(ms.Tensor(X[part]),
                                                             ms.Tensor(Y[part]))
            return [g.asnumpy() for g in grads], comm.comm_stats()["by_op"]["allreduce"]["calls"]
    return run_ranks(2, rank)


def test_semi_auto_mirrors_travel_once_per_fusion_id():
    """A semi-auto network's six mirrors reduce alone; with fusion ids (0, 1, 1), two
    allreduces carry them (value_and_grad defers them and reduces once per id): the counts
    match the ids, and the gradients are the same."""
    alone = _semi_auto_step(None)
    fused = _semi_auto_step((0, 1, 1))
    for (want, alone_calls), (got, calls) in zip(alone, fused):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        assert calls == alone_calls - 6 + 2
