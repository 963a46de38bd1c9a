"""Strategy files and layouts for distributed checkpoints (issue 26 item 4):
``strategy_ckpt_config``, ``Model.infer_train_layout``/``infer_predict_layout`` and
``load_distributed_checkpoint`` into a network laid out another way. Ranks run as threads."""
import json

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import context as parallel_context
from minitorch_dist.parallel.context import auto_parallel_scope
from minitorch_dist.parallel.distributed_load import load_distributed_checkpoint
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell
from minitorch_dist.parallel.strategy_ckpt import check_strategy_ckpt_config
from minitorch_dist.parallel.sharding.strategy_file import write_strategy_file

RNG = np.random.default_rng(5)
W = RNG.standard_normal((8, 4)).astype(np.float32)
X = RNG.random((2, 8), np.float32)
Y = RNG.random((2, 4), np.float32)
WIRED = "strategy_ckpt_config" in parallel_context._DEFAULTS


class Net(nn.Cell):
    def __init__(self, strategy=None, frozen=False):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(W.copy()), "w", requires_grad=not frozen)
        self.matmul = ops.MatMul().shard(strategy) if strategy else ops.MatMul()

    def construct(self, x):
        return self.matmul(x, self.w)


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def test_the_config_is_checked_and_completed():
    assert check_strategy_ckpt_config({"save_file": "a.json"}) == {
        "save_file": "a.json", "load_file": "", "only_trainable_params": True}
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['only_trainable'\]"):
        check_strategy_ckpt_config({"only_trainable": False})
    with pytest.raises(ValueError, match="load_file must be a file path"):
        check_strategy_ckpt_config({"load_file": 3})
    with pytest.raises(ValueError, match="only_trainable_params must be True or False"):
        check_strategy_ckpt_config({"only_trainable_params": "yes"})


def test_only_trainable_params_leaves_frozen_parameters_out(tmp_path):
    def rank(comm):
        net = Net(((1, 2), (2, 1)), frozen=True)
        ShardedCell(net, group=comm)(ms.Tensor(X))
        if comm.rank == 0:
            write_strategy_file(str(tmp_path / "trainable.json"), only_trainable=True)
            write_strategy_file(str(tmp_path / "all.json"))
        return True

    run_ranks(2, rank, timeout=30)
    assert json.load(open(tmp_path / "trainable.json")) == {}
    assert json.load(open(tmp_path / "all.json"))["w"]["shape"] == [8, 4]


@pytest.mark.skipif(not WIRED, reason="parallel/context.py does not have strategy_ckpt_config yet")
def test_strategy_ckpt_config_writes_the_strategy_file(tmp_path):
    path = str(tmp_path / "sub" / "strategy.json")

    def rank(comm):
        with auto_parallel_scope(strategy_ckpt_config={"save_file": path}):
            ShardedCell(Net(((1, 2), (2, 1))), group=comm)(ms.Tensor(X))
        return True

    run_ranks(2, rank, timeout=30)
    saved = json.load(open(path))["w"]
    assert saved["shape"] == [8, 4] and saved["tensor_map"] == [1, 0]


def test_infer_layouts_and_load_slices_of_another_layout(tmp_path):
    def train(comm):
        net = Net(((1, 2), (2, 1)))
        model = ms.Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
        with sharding_world(comm), auto_parallel_scope(
                strategy_ckpt_save_file=str(tmp_path / "train.json")):
            layouts = model.infer_train_layout([(ms.Tensor(X), ms.Tensor(Y))])
            # inside the thread rank's world: the file records this rank (outside it, the
            # identity would be the process's communicator, which an earlier test may have
            # initialised as rank 0 of 1)
            ms.save_checkpoint(net, str(tmp_path / f"r{comm.rank}.ckpt"), integrated_save=False)
        return layouts

    layouts = run_ranks(2, train, timeout=30)
    assert layouts[0]["w"].shape == (8, 4) and layouts[0]["w"].local_shape() == (4, 4)
    files = [str(tmp_path / f"r{r}.ckpt") for r in range(2)]

    def predict(comm):
        net = Net(((1, 1), (1, 2)))
        net.w.set_data(ms.Tensor(np.zeros_like(W)))
        model = ms.Model(net)
        with sharding_world(comm):
            layout = model.infer_predict_layout(ms.Tensor(X))
            load_distributed_checkpoint(net, files, layout, str(tmp_path / "train.json"))
            assert layout["w"].local_shape() == (8, 2)     # columns now, rows in training
            assert np.array_equal(net.w.asnumpy(), W[layout["w"].slice_for(comm.rank)])
            return model.predict(ms.Tensor(X)).asnumpy()

    for out in run_ranks(2, predict, timeout=30):
        np.testing.assert_allclose(out, X @ W, rtol=1e-5)
    ms.reset_auto_parallel_context()
    single = ms.Model(Net())
    assert single.infer_predict_layout(ms.Tensor(X)) == {}


def test_infer_train_layout_refuses_what_it_cannot_plan_from():
    model = ms.Model(Net(), nn.MSELoss(), nn.SGD(Net().trainable_params(), 0.1))
    with pytest.raises(TypeError, match="one-shot iterator"):
        model.infer_train_layout(iter([(ms.Tensor(X), ms.Tensor(Y))]))
    with pytest.raises(ValueError, match="yielded no batch"):
        model.infer_train_layout([])
    ms.reset_auto_parallel_context()
    assert model.infer_train_layout([(ms.Tensor(X), ms.Tensor(Y))]) == {}
