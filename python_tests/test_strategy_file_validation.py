"""Strategy files are validated against the network (issue 28 item 2), through both
``set_auto_parallel_context(strategy_ckpt_load_file=...)`` and
``AutoParallel.load_param_strategy_file``: a file of another network (other names) or of
other shapes is refused; a file that is not ``{name: layout}`` JSON is a ValueError naming
it (it used to raise AttributeError/TypeError). Ranks run as threads."""
import json

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.common.initializer import initializer
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.auto_parallel import AutoParallel
from minitorch_dist.parallel.sharding.rules import ShardingError
from minitorch_dist.parallel.sharding.scope import sharding_world

X = ms.Tensor(np.ones((2, 16), np.float32))


class TwoLayer(nn.Cell):
    def __init__(self, rows=16, prefix=""):
        super().__init__()
        self.w1 = ms.Parameter(initializer("normal", [rows, 32]), prefix + "w1")
        self.w2 = ms.Parameter(initializer("normal", [32, 4]), prefix + "w2")
        self.mm1 = ops.MatMul().shard(((2, 2), (2, 1)))
        self.mm2 = ops.MatMul()

    def construct(self, x):
        return self.mm2(self.mm1(x, self.w1), self.w2)


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_auto_parallel_context()


def _save(path, **net_kwargs):
    def rank(comm):
        with sharding_world(comm):
            net = AutoParallel(TwoLayer(**net_kwargs), parallel_mode="semi_auto")
            net.save_param_strategy_file(path)
            net(X if net_kwargs.get("rows", 16) == 16 else ms.Tensor(np.ones((2, 8), np.float32)))
    run_ranks(4, rank, timeout=30)


def _load_auto(path, **net_kwargs):
    def rank(comm):
        with sharding_world(comm):
            net = AutoParallel(TwoLayer(**net_kwargs), parallel_mode="semi_auto")
            net.load_param_strategy_file(path)
            net(X)
    run_ranks(4, rank, timeout=30)


def _load_context(path, **net_kwargs):
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel",
                                 strategy_ckpt_load_file=path)

    def rank(comm):
        with sharding_world(comm):
            TwoLayer(**net_kwargs)(X)
    run_ranks(4, rank, timeout=30)


LOADERS = {"AutoParallel": (_load_auto, "AutoParallel"),
           "context": (_load_context, "strategy_ckpt_load_file")}


@pytest.mark.parametrize("how", sorted(LOADERS))
def test_the_file_of_another_network_is_refused(tmp_path, how):
    path = str(tmp_path / "other.json")
    _save(path, prefix="encoder.")
    load, owner = LOADERS[how]
    with pytest.raises(ShardingError, match=rf"{owner}: the strategy file .* lays out "
                                            r"\['encoder.w1', 'encoder.w2'\], but this network "
                                            r"slices "
                                            r".*'w1'.*another network"):
        load(path)
    load(path, prefix="encoder.")                       # its own network: fine


@pytest.mark.parametrize("how", sorted(LOADERS))
def test_a_file_of_other_shapes_is_refused(tmp_path, how):
    path = str(tmp_path / "shapes.json")
    _save(path, rows=8)
    load, owner = LOADERS[how]
    with pytest.raises(ShardingError, match=rf"{owner}: .* other shapes .*w1 \(8, 32\) in "
                                            r"the file, \(16, 32\) here"):
        load(path)


@pytest.mark.parametrize("how", sorted(LOADERS))
@pytest.mark.parametrize("content, problem", [
    ("[1, 2, 3]", "must hold a JSON object mapping parameter names to layouts, got a list"),
    ('{"w1": 5}', "bad layout for 'w1': not a JSON object"),
    ('{"w1": {"device_matrix": [2, 2], "tensor_map": [1], "shape": [16, 32]}}',
     "'tensor_map' must hold one device axis"),
    ('{"w1": {"device_matrix": "2", "tensor_map": [1, -1], "shape": [16, 32]}}',
     "'device_matrix' must be a non-empty list"),
    ("not json", "cannot read the strategy file"),
])
def test_malformed_strategy_files_name_the_file(tmp_path, how, content, problem):
    path = tmp_path / "bad.json"
    path.write_text(content)
    load, owner = LOADERS[how]
    with pytest.raises(ValueError) as caught:
        load(str(path))
    message = str(caught.value)
    assert message.startswith(owner) and repr(str(path)) in message and problem in message


def test_random_bytes_are_a_value_error_naming_the_file(tmp_path):
    path = tmp_path / "noise.json"
    path.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8)))
    with pytest.raises(ValueError, match="cannot read the strategy file"):
        _load_auto(str(path))


def test_the_saved_file_still_fits_its_network(tmp_path):
    path = str(tmp_path / "same.json")
    _save(path)
    assert json.load(open(path))["w1"]["shape"] == [16, 32]
    _load_auto(path)
    _load_context(path)
