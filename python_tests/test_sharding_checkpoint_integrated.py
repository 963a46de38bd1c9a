"""``save_checkpoint(integrated_save=True)``, MindSpore's default, on an operator-sharded
network: every rank writes whole tensors (gathered over the ranks that share each one), a
one-process network loads the file as it is, and a sharded one resumes from it (each rank
takes its block). Before, the flag was ignored and every rank wrote its slices.
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell


class Net(nn.Cell):
    """Two MatMuls; the first sharded 2 x 2 (its weight split in row blocks over 2 ranks and
    held twice)."""

    def __init__(self, strategy=((2, 2), (2, 1))):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.zeros((8, 6), np.float32)), "w")
        self.w2 = ms.Parameter(ms.Tensor(np.zeros((6, 4), np.float32)), "w2")
        self.matmul = ops.MatMul().shard(strategy) if strategy else ops.MatMul()
        self.matmul2 = ops.MatMul()
        self.relu = ops.ReLU()

    def construct(self, x):
        return self.matmul2(self.relu(self.matmul(x, self.w)), self.w2)


RNG = np.random.default_rng(3)
WEIGHTS = [RNG.standard_normal((8, 6)).astype(np.float32) * 0.3,
           RNG.standard_normal((6, 4)).astype(np.float32) * 0.3]
BATCHES = [(RNG.random((4, 8), np.float32), RNG.random((4, 4), np.float32)) for _ in range(5)]


def _step(net, comm=None):
    opt = nn.Momentum(net.trainable_params(), 0.2, 0.9)
    cell = nn.WithLossCell(net, nn.MSELoss())
    if comm is not None:
        cell = ShardedCell(cell, opt, group=comm)
    return nn.TrainOneStepCell(cell, opt)


def _fresh(strategy=((2, 2), (2, 1))):
    net = Net(strategy)
    for p, w in zip(net.trainable_params(), WEIGHTS):
        p.data = w.copy()
    return net


def _losses(step, batches):
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for x, y in batches]


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def test_every_rank_writes_whole_tensors_that_one_process_loads(tmp_path):
    def rank(comm):
        net = _fresh()
        step = _step(net, comm)
        _losses(step, BATCHES[:2])
        assert net.w.shape != (8, 6)              # trained sliced
        ms.save_checkpoint(step, str(tmp_path / f"r{comm.rank}.ckpt"))
        return net.w.shape

    shapes = run_ranks(4, rank)
    assert set(shapes) == {(4, 6)}                 # rows split in two
    ms.reset_auto_parallel_context()
    reference = _step(_fresh(None))
    _losses(reference, [(np.concatenate([x] * 1), y) for x, y in BATCHES[:2]])
    files = [ms.load_checkpoint(str(tmp_path / f"r{r}.ckpt")) for r in range(4)]
    assert not any(name.startswith("sharding_layout.") for name in files[0])
    for name in files[0]:
        for other in files[1:]:
            np.testing.assert_array_equal(other[name].asnumpy(), files[0][name].asnumpy())
    plain = _step(_fresh(None))
    not_loaded, _ = ms.load_param_into_net(plain, files[2])
    assert not_loaded == []
    for got, want in zip(plain.get_parameters(), reference.get_parameters()):
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)


def test_a_sharded_network_resumes_from_a_whole_checkpoint(tmp_path):
    """A run interrupted after 2 steps and resumed from the whole checkpoint into a sharded
    network whose parameters (and momentum) are already sliced: the same losses as an
    uninterrupted run."""
    def rank(comm):
        step = _step(_fresh(), comm)
        first = _losses(step, BATCHES[:2])
        ms.save_checkpoint(step, str(tmp_path / f"r{comm.rank}.ckpt"))
        uninterrupted = _losses(step, BATCHES[2:])
        other = _step(_fresh(), comm)
        _losses(other, BATCHES[4:])              # slices, and moves, its parameters
        ms.load_param_into_net(other, ms.load_checkpoint(str(tmp_path / "r0.ckpt")),
                               strict_load=True)
        resumed = _losses(other, BATCHES[2:])
        return first, uninterrupted, resumed

    for first, uninterrupted, resumed in run_ranks(4, rank):
        assert resumed == uninterrupted, (first, uninterrupted, resumed)


def test_integrated_save_must_be_made_on_every_rank_of_the_group(tmp_path):
    """Slices of a parameter whose group does not match its layout cannot be gathered: the
    error says what to do instead (no silent slice file)."""
    def rank(comm):
        step = _step(_fresh(), comm)
        _losses(step, BATCHES[:1])
        net = step.network
        param = [p for p in net.get_parameters() if getattr(p, "sharding_layout", None)][0]
        param.sharding_rank = (param.sharding_rank + 1) % comm.size   # a corrupted record
        try:
            ms.save_checkpoint([param], str(tmp_path / f"bad{comm.rank}.ckpt"))
        except ValueError as exc:
            return str(exc)
        return None

    for message in run_ranks(4, rank):
        assert message is not None and "integrated_save=False" in message
