"""MindSpore 2.6's parallel API around sharding: deferred parameters (``no_init_parameters``),
AutoParallel's strategy files, ``mindspore.runtime``, and sharded parameters holding only
their slice."""
import json
import logging
import threading

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.runtime as rt
from minitorch_dist import nn, ops
from minitorch_dist.common.initializer import initializer
from minitorch_dist.communication import run_ranks
from minitorch_dist.nn.utils import no_init_parameters
from minitorch_dist.parallel.auto_parallel import AutoParallel
from minitorch_dist.parallel.extension import sharded_call_of
from minitorch_dist.parallel.sharding.rules import ShardingError
from minitorch_dist.parallel.sharding.scope import sharding_world


@pytest.fixture(autouse=True)
def _contexts():
    yield
    ms.reset_auto_parallel_context()


class TwoLayer(nn.Cell):
    def __init__(self, first=((2, 2), (2, 1))):
        super().__init__()
        self.w1 = ms.Parameter(initializer("normal", [16, 32]), "w1")
        self.w2 = ms.Parameter(initializer("he_uniform", [32, 4]), "w2")
        self.mm1 = ops.MatMul().shard(first)
        self.relu = ops.ReLU()
        self.mm2 = ops.MatMul()

    def construct(self, x):
        return self.mm2(self.relu(self.mm1(x, self.w1)), self.w2)


@pytest.mark.parametrize("name", ["normal", "uniform", "xavier_uniform", "he_normal",
                                  "truncated_normal"])
def test_deferred_values_equal_the_eager_ones_block_by_block(name):
    ms.set_seed(11)
    eager = [initializer(name, [40, 6]).asnumpy(), initializer(name, [7, 3]).asnumpy()]
    ms.set_seed(11)
    with no_init_parameters():
        lazy = [initializer(name, [40, 6]), initializer(name, [7, 3])]
    for tensor, want in zip(lazy, eager):
        assert tensor.data.strides == (0, 0)           # no memory until drawn
        block = (slice(10, 30), slice(2, 5))
        np.testing.assert_array_equal(tensor.deferred_init.draw(block), want[block])
        np.testing.assert_array_equal(tensor.deferred_init.draw(), want)
    ms.set_seed(11)
    with no_init_parameters():
        initializer(name, [40, 6]), initializer(name, [7, 3])
    after = initializer(name, [3, 2])        # the stream moved on as if both were drawn
    ms.set_seed(11)
    initializer(name, [40, 6]), initializer(name, [7, 3])
    np.testing.assert_array_equal(after.asnumpy(), initializer(name, [3, 2]).asnumpy())


def test_a_deferred_network_used_whole_equals_the_eager_one():
    x = ms.Tensor(np.random.default_rng(0).random((4, 16), np.float32))
    ms.set_seed(5)
    eager = TwoLayer()(x).asnumpy()
    ms.set_seed(5)
    with no_init_parameters():
        net = TwoLayer()
        opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    assert net.w1.deferred_init is not None
    np.testing.assert_array_equal(net(x).asnumpy(), eager)
    assert net.w1.deferred_init is None and opt.moments.w1.shape == (16, 32)


def test_sharded_ranks_draw_only_their_slice_and_train_like_one_process():
    rng = np.random.default_rng(1)
    x, y = rng.random((8, 16), np.float32), rng.random((8, 4), np.float32)
    ms.set_seed(3)
    ref = TwoLayer()
    step = nn.TrainOneStepCell(nn.WithLossCell(ref, nn.MSELoss()),
                               nn.Momentum(ref.trainable_params(), 0.1, 0.9))
    for _ in range(2):
        step(ms.Tensor(x), ms.Tensor(y))
    want = {p.name: p.asnumpy() for p in ref.trainable_params()}
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")

    lock = threading.Lock()    # thread ranks share the framework's generator: one at a time

    def rank(comm):
        with sharding_world(comm):
            with lock:
                ms.set_seed(3 + comm.rank)       # different seeds: rank 0's stream is shared
                with no_init_parameters():
                    net = TwoLayer()
                    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
            step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
            rows = slice(2 * comm.rank, 2 * comm.rank + 2)
            step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
            drawn = net.w1.data.base is None or net.w1.data.base.size == net.w1.data.size
            step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
            return {p.name: (p.asnumpy(), p.sharding_layout, p.sharding_rank)
                    for p in net.trainable_params()}, drawn, opt.moments.w1.shape

    for params, drawn, moment_shape in run_ranks(4, rank):
        w1, layout, r = params["w1"]
        assert w1.shape == (8, 32) == moment_shape and drawn
        np.testing.assert_allclose(w1, want["w1"][layout.slice_for(r)], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(params["w2"][0], want["w2"], rtol=1e-5, atol=1e-6)


def test_strategy_files_are_written_and_checked(tmp_path):
    path = str(tmp_path / "strategy.json")
    x = ms.Tensor(np.ones((2, 16), np.float32))

    def rank(comm, first, save):
        with sharding_world(comm):
            ms.set_seed(0)
            net = AutoParallel(TwoLayer(first), parallel_mode="semi_auto")
            (net.save_param_strategy_file if save else net.load_param_strategy_file)(path)
            net(x)

    run_ranks(4, lambda comm: rank(comm, ((2, 2), (2, 1)), True))
    saved = json.load(open(path))
    assert saved["w1"]["shape"] == [16, 32] and saved["w1"]["device_matrix"][:2] == [2, 2]
    run_ranks(4, lambda comm: rank(comm, ((2, 2), (2, 1)), False))      # same plan: fine
    with pytest.raises(ShardingError, match=r"lays out \['w1'\] differently"):
        run_ranks(4, lambda comm: rank(comm, ((4, 1), (1, 1)), False))
    with pytest.raises(FileNotFoundError):
        AutoParallel(TwoLayer()).load_param_strategy_file(str(tmp_path / "none.json"))


def test_runtime_settings(caplog):
    with caplog.at_level(logging.WARNING, logger="minitorch_dist"):
        rt.set_memory(max_size="28GB")
        rt.launch_blocking()
        rt.set_cpu_affinity(True)
    text = " ".join(r.message for r in caplog.records)
    assert "max_size" in text and "synchronously" in text
    with pytest.raises(ValueError, match="max_size must be a size"):
        rt.set_memory(max_size="lots")
    with pytest.raises(TypeError, match="enable_affinity"):
        rt.set_cpu_affinity("yes")


def test_tensor_dump_writes_numbered_files(tmp_path):
    dump = ops.TensorDump()
    base = str(tmp_path / "dumps" / "act")
    dump(base, ms.Tensor([[1.0, 2.0]]))
    dump(base + ".npy", ms.Tensor([3.0]))
    assert np.load(base + "_0.npy").tolist() == [[1.0, 2.0]]
    assert np.load(base + "_1.npy").tolist() == [3.0]
    with pytest.raises(TypeError, match="TensorDump: expected a Tensor"):
        dump(base, [1.0])


def test_strategy_checkpoint_options_of_the_context(tmp_path):
    # a folder not yet there is made, as MindSpore does (upstream Wide&Deep's per-rank folder)
    path = str(tmp_path / "checkpoints-0" / "ckpt_strategy.json")
    x = ms.Tensor(np.ones((2, 16), np.float32))

    def rank(comm, first):
        with sharding_world(comm):
            ms.set_seed(0)
            TwoLayer(first)(x)

    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", strategy_ckpt_save_file=path)
    run_ranks(4, lambda comm: rank(comm, ((2, 2), (2, 1))))
    assert json.load(open(path))["w1"]["shape"] == [16, 32]
    ms.set_auto_parallel_context(strategy_ckpt_save_file="", strategy_ckpt_load_file=path)
    run_ranks(4, lambda comm: rank(comm, ((2, 2), (2, 1))))
    with pytest.raises(ShardingError, match=r"strategy_ckpt_load_file: the plan lays out \['w1'\]"):
        run_ranks(4, lambda comm: rank(comm, ((1, 4), (4, 1))))


def test_set_context_accepts_mindspore_options_and_says_what_they_do(caplog):
    from minitorch_dist import context
    context._noted.clear()        # notes are once per process; earlier tests may have set these
    try:
        with caplog.at_level(logging.WARNING, logger="minitorch_dist"):
            ms.set_context(enable_graph_kernel=True, device_id=0, max_device_memory="2GB",
                           runtime_num_threads=1, op_timeout=30)
        assert ms.get_context("num_threads") == 1
        assert any("enable_graph_kernel=...) is accepted and ignored" in r.message
                   for r in caplog.records)
        with pytest.raises(ValueError, match=r"no Ascend backend here; valid targets are \['CPU', 'GPU'\]"):
            ms.set_context(device_target="Ascend")
        with pytest.raises(ValueError, match="enable_graph_kernel must be a bool"):
            ms.set_context(enable_graph_kernel="yes")
        with pytest.raises(ValueError, match="device_id must be a non-negative int"):
            ms.set_context(device_id=-1)
        with pytest.raises(ValueError, match="max_device_memory|max_size must be a size"):
            ms.set_context(max_device_memory="lots")
        with pytest.raises(ValueError, match="unknown context option 'no_such_option'"):
            ms.set_context(no_such_option=1)
    finally:
        ms.set_context(num_threads=None)


def test_auto_parallel_context_options_act_or_say_why_not():
    # enable_parallel_optimizer acts (python_tests/test_optimizer_parallel.py)
    ms.set_auto_parallel_context(enable_parallel_optimizer=True)
    assert ms.get_auto_parallel_context("enable_parallel_optimizer") is True
    ms.reset_auto_parallel_context()
    with pytest.raises(ValueError, match="strategy_ckpt_save_file must be a file path"):
        ms.set_auto_parallel_context(strategy_ckpt_save_file=3)


def test_all_reduce_fusion_config_sets_the_gradient_buckets():
    """all_reduce_fusion_config=[2] fuses parameters 0-1 and 2-3 into two allreduces (the
    default plan fuses all four small gradients into one); the averages are the same."""
    grads = [np.full(3, float(k)) for k in range(4)]

    def rank(comm):
        params = [ms.Parameter(ms.Tensor(np.zeros(3)), f"p{k}") for k in range(4)]
        reducer = nn.DistributedGradReducer(params, mean=True, communicator=comm)
        comm.reset_stats()
        out = reducer(tuple(ms.Tensor(g * (comm.rank + 1)) for g in grads))
        return comm.comm_stats()["by_op"]["allreduce"]["calls"], [o.asnumpy() for o in out]

    default = run_ranks(2, rank)
    ms.set_auto_parallel_context(all_reduce_fusion_config=[2])
    split = run_ranks(2, rank)
    assert default[0][0] == 1 and split[0][0] == 2
    for (_, a), (_, b) in zip(default, split):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # split points past a reducer's last parameter split nothing (MindSpore numbers them
    # over the whole graph: upstream Wide&Deep gives [6, 12] to a two-parameter reducer)
    ms.set_auto_parallel_context(all_reduce_fusion_config=[4])
    assert run_ranks(2, rank)[0][0] == 1
    ms.set_auto_parallel_context(all_reduce_fusion_config=[2, 12])
    assert run_ranks(2, rank)[0][0] == 2
    with pytest.raises(ValueError, match="strictly increasing list"):
        ms.set_auto_parallel_context(all_reduce_fusion_config=[3, 1])


def test_the_default_device_is_the_one_that_is_there(monkeypatch):
    from minitorch_dist import context
    monkeypatch.setitem(context._context, "device_target", None)        # as a fresh process
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "1")
    assert ms.get_context("device_target") == "GPU"
    assert not ms.Tensor([1.0]).device.is_host
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "0")
    from minitorch_dist.backend import cupy_or_none
    assert ms.get_context("device_target") == ("GPU" if cupy_or_none() else "CPU")
    ms.set_context(device_target="CPU")                                   # the way to say host
    monkeypatch.setenv("MINITORCH_DIST_VIRTUAL_GPU", "1")
    assert ms.get_context("device_target") == "CPU"


@pytest.mark.parametrize("alltoall", [True, False])
def test_enable_alltoall_chooses_the_redistribution(alltoall):
    """A row split turned into a column split moves by AllToAll, or, with
    enable_alltoall=False (MindSpore's default), by AllGather and a slice; same results."""
    x = np.random.default_rng(0).random((8, 4), np.float32)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.relu = ops.ReLU().shard(((2, 1),))
            self.neg = ops.Neg().shard(((1, 2),))

        def construct(self, a):
            return self.neg(self.relu(a))

    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", enable_alltoall=alltoall,
                                 dataset_strategy="full_batch")

    def rank(comm):
        with sharding_world(comm):
            net = Net()
            out = net(ms.Tensor(x)).asnumpy()
            comm.reset_stats()
            net(ms.Tensor(x))
            call = sharded_call_of(net)
            groups = call.program.groups.communicators() + [comm]
            ops_used = {op for c in groups for op in c.comm_stats()["by_op"]}
            return out, ops_used

    for out, ops_used in run_ranks(2, rank):
        np.testing.assert_allclose(out, -np.maximum(x, 0))
        assert ("alltoall" in ops_used) is alltoall
    with pytest.raises(ValueError, match="enable_alltoall must be True or False"):
        ms.set_auto_parallel_context(enable_alltoall="no")


def test_set_algo_parameters_checks_and_says_what_applies(caplog):
    from minitorch_dist.parallel import (get_algo_parameters, reset_algo_parameters,
                                         set_algo_parameters)
    try:
        with caplog.at_level(logging.WARNING, logger="minitorch_dist"):
            set_algo_parameters(elementwise_op_strategy_follow=True, fully_use_devices=True,
                                tensor_slice_align_size=32)
        assert get_algo_parameters("tensor_slice_align_size") == 32
        assert any("elementwise_op_strategy_follow=...) is recorded and has no effect"
                   in r.message for r in caplog.records)
        assert not any("fully_use_devices" in r.message for r in caplog.records)
        with pytest.raises(ValueError, match="power of two"):
            set_algo_parameters(tensor_slice_align_size=24)
        with pytest.raises(ValueError, match="unknown option 'search_depth'"):
            set_algo_parameters(search_depth=3)
    finally:
        reset_algo_parameters()
