"""Recompute (``Cell.recompute()``, ``recompute(block, *args)``): bit-identical gradients,
lower peak memory (traced host allocations, and the virtual GPU's counter), a model that
overflows the virtual device's cap trains with it, and blocks that cannot be replayed are
refused."""
import json
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.recompute import recompute

from mpi_jobs import run_process

RNG = np.random.default_rng(4)


class Block(nn.Cell):
    def __init__(self, width, drop=False):
        super().__init__()
        self.a = nn.Dense(width, width)
        self.b = nn.Dense(width, width)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(p=0.3) if drop else None

    def construct(self, x):
        h = self.act(self.a(x))
        if self.drop is not None:
            h = self.drop(h)
        return self.act(self.b(h)) + x


def _network(recomputed, depth=4, width=32, drop=False):
    ms.set_seed(11)
    blocks = [Block(width, drop) for _ in range(depth)]
    for block in blocks:
        block.recompute(recomputed)
    return nn.WithLossCell(nn.SequentialCell(blocks), nn.MSELoss())


def _gradients(network, x, y):
    params = network.trainable_params()
    loss, grads = ms.value_and_grad(network, None, params)(ms.Tensor(x), ms.Tensor(y))
    return loss.asnumpy(), [g.asnumpy() for g in grads]


@pytest.mark.host_default
@pytest.mark.parametrize("drop", [False, True])
def test_gradients_are_bit_identical_with_and_without_recompute(drop):
    x = RNG.standard_normal((16, 32)).astype(np.float32)
    y = RNG.standard_normal((16, 32)).astype(np.float32)
    plain_loss, plain = _gradients(_network(False, drop=drop), x, y)
    after_plain = ms.random.rng().random()
    loss, grads = _gradients(_network(True, drop=drop), x, y)
    # the dropout masks were replayed, and the stream goes on where the plain run's did
    assert ms.random.rng().random() == after_plain
    np.testing.assert_array_equal(loss, plain_loss)
    for got, want in zip(grads, plain):
        np.testing.assert_array_equal(got, want)


def test_training_steps_match_bit_for_bit():
    x = RNG.standard_normal((8, 32)).astype(np.float32)
    y = RNG.standard_normal((8, 32)).astype(np.float32)
    nets = [_network(False), _network(True)]
    steps = [nn.TrainOneStepCell(n, nn.Adam(n.trainable_params(), 1e-2)) for n in nets]
    for _ in range(3):
        losses = [float(s(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for s in steps]
        assert losses[0] == losses[1]
    for p, q in zip(nets[0].trainable_params(), nets[1].trainable_params()):
        np.testing.assert_array_equal(p.asnumpy(), q.asnumpy())


def test_functional_recompute_with_arguments_and_captured_tensors():
    w = ms.Tensor(RNG.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
    x = ms.Tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)

    def block(a, b):
        return ((a @ w).tanh() * b).sum()

    plain = ms.grad(lambda a, t: block(a, a) * t.sum(), (0, 1))(x, w)
    again = ms.grad(lambda a, t: recompute(block, a, a) * t.sum(), (0, 1))(x, w)
    for got, want in zip(again, plain):
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


def _peak_bytes(network, x, y):
    params = network.trainable_params()
    grad_fn = ms.value_and_grad(network, None, params)
    grad_fn(x, y)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        grad_fn(x, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_host_memory_falls():
    x = ms.Tensor(RNG.standard_normal((256, 64)).astype(np.float32))
    y = ms.Tensor(np.zeros((256, 64), np.float32))
    plain = _peak_bytes(_network(False, depth=8, width=64), x, y)
    recomputed = _peak_bytes(_network(True, depth=8, width=64), x, y)
    assert recomputed < 0.6 * plain


_VIRTUAL_GPU_JOB = textwrap.dedent("""
    import json, numpy as np, minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.backend import get_device
    from minitorch_dist.backend.memory import DeviceOutOfMemoryError
    ms.set_context(device_target="GPU")
    budget = get_device("GPU").memory

    def net(rec):
        # four blocks of six layers: recomputed, only the blocks' inputs stay alive, and
        # one block's activations during its backward
        ms.set_seed(1)
        blocks = []
        for _ in range(4):
            layers = []
            for _ in range(6):
                layers += [nn.Dense(64, 64), nn.ReLU()]
            blocks.append(nn.SequentialCell(layers).recompute(rec))
        return nn.WithLossCell(nn.SequentialCell(blocks), nn.MSELoss())

    x = ms.Tensor(np.ones((512, 64), np.float32))
    y = ms.Tensor(np.zeros((512, 64), np.float32))
    out = {}
    for rec in (False, True):
        n = net(rec)
        grad_fn = ms.value_and_grad(n, None, n.trainable_params())
        budget.peak = budget.used
        start = budget.used
        try:
            grad_fn(x, y)
            out[str(rec)] = budget.peak - start
        except DeviceOutOfMemoryError:
            out[str(rec)] = "out of memory"
    print(json.dumps(out))
""")


def _virtual_gpu(capacity):
    done, _ = run_process([sys.executable, "-c", _VIRTUAL_GPU_JOB], timeout=120,
                          env={"MINITORCH_DIST_VIRTUAL_GPU": "1",
                               "MINITORCH_DIST_VIRTUAL_GPU_MEMORY": capacity})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_virtual_gpu_peak_falls_and_an_overflowing_model_trains():
    roomy = _virtual_gpu("1GiB")
    assert roomy["True"] < 0.6 * roomy["False"]
    # a cap between the two peaks (above the parameters, charged once at their first use):
    # the plain model overflows, the recomputed one trains
    cap = 24 * (64 * 64 + 64) * 4 + (roomy["True"] + roomy["False"]) // 2
    tight = _virtual_gpu(str(cap))
    assert tight["False"] == "out of memory"
    assert isinstance(tight["True"], int)


def test_a_training_batch_norm_recomputes_and_moves_its_statistics_once():
    def make(rec):
        ms.set_seed(2)
        return nn.SequentialCell([nn.Dense(4, 4), nn.BatchNorm1d(4), nn.ReLU()]).recompute(rec)
    x = ms.Tensor(RNG.standard_normal((6, 4)).astype(np.float32))
    results = []
    for rec in (False, True):
        cell = make(rec)
        grads = ms.value_and_grad(lambda a, c=cell: c(a).sum(), None,
                                  cell.trainable_params())(x)[1]
        results.append(([g.asnumpy() for g in grads],
                        [cell[1].moving_mean.asnumpy(), cell[1].moving_variance.asnumpy()]))
    (plain, plain_stats), (again, again_stats) = results
    assert not np.array_equal(plain_stats[0], np.zeros(4, np.float32))   # it did move
    for got, want in zip(again + again_stats, plain + plain_stats):
        np.testing.assert_array_equal(got, want)     # bit-identical; statistics moved once


def test_bad_recompute_arguments_are_refused():
    with pytest.raises(TypeError, match="mode must be True or False"):
        nn.Dense(2, 2).recompute(1)
    with pytest.raises(TypeError, match="unknown argument 'slice'"):
        nn.Dense(2, 2).recompute(slice=True)
    with pytest.raises(TypeError, match="mp_comm_recompute must be True or False"):
        nn.Dense(2, 2).recompute(mp_comm_recompute="yes")
    nn.Dense(2, 2).recompute(mp_comm_recompute=False)     # noted once, accepted
    with pytest.raises(TypeError, match="block must be a Cell or a function"):
        recompute(3, ms.Tensor([1.0]))
    w = ms.Tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="must return a Tensor"):
        ms.grad(lambda t: recompute(lambda a: [a * t], ms.Tensor([2.0]))[0])(w)


def test_without_gradients_it_is_a_plain_call():
    from minitorch_dist.autograd import no_grad
    cell, plain = _network(True), _network(False)
    x = ms.Tensor(np.ones((2, 32), np.float32))
    with no_grad():
        out = cell(x, x)
    assert out.grad_fn is None
    np.testing.assert_array_equal(out.asnumpy(), plain(x, x).asnumpy())
