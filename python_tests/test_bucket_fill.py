"""Backward writes gradients straight into DistOpt's fused buckets (``BucketFill``, a
backward observer feeding a ``BucketExchange``).

``backward_and_update*`` must give bit for bit what ``step(backward(loss))`` gives (which
writes the slots afterwards), for every option, bucket layout and loss scale; nothing may be
written after backward; a bucket is launched as soon as its last gradient is final; and the
launch order is the same on every rank even when a parameter has no gradient on some rank."""
import threading

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt
from minitorch_dist import autograd
from minitorch_dist.parallel.data_parallel import buckets
from minitorch_dist.parallel.data_parallel.bucket_fill import BucketFill
from minitorch_dist.parallel.data_parallel.buckets import BucketExchange

# three layers; with BUFF and THRESHOLD: W1 (30 > a 16-float bucket) alone, b1 + W2 fused,
# W3 (32 >= threshold) alone, b3 fills a bucket by itself
SHAPES = [(6, 5), (5,), (5, 2), (2, 16), (16,)]
BUFF, THRESHOLD = 64, 32
TIMEOUT = 30


def make_params(seed):
    rng = np.random.default_rng(seed)
    return [ms.Parameter(ms.Tensor((rng.standard_normal(s) * 0.5).astype(np.float32)),
                         name=f"p{i}") for i, s in enumerate(SHAPES)]


def loss_of(params, rank, step):
    rng = np.random.default_rng(100 * step + rank)
    x = ms.Tensor(rng.standard_normal((3, 6)).astype(np.float32) * (rank + 1))
    h = ms.ops.matmul(x, params[0]) + params[1]
    h = ms.ops.matmul(h.tanh(), params[2])
    h = ms.ops.matmul(h, params[3]) + params[4]
    return (h * h).mean()


def values(params):
    return [p.asnumpy().copy() for p in params]


def run_both(option, steps=3, loss_scale=None, world=3, **kwargs):
    """Per rank: parameters after ``steps`` of the filling path and of step(backward())."""
    def run(comm):
        out = []
        for filled in (True, False):
            params = make_params(comm.rank)
            opt = DistOpt(nn.SGD(params, 0.1, momentum=0.9), communicator=comm, buffSize=BUFF,
                          loss_scale=loss_scale)
            for step in range(steps):
                loss = loss_of(params, comm.rank, step)
                if filled:
                    take_step(opt, option, loss, **kwargs)
                else:
                    opt.step(opt.backward(loss), option, threshold=THRESHOLD, **kwargs)
            out.append(values(params))
        return out
    return run_ranks(world, run, timeout=TIMEOUT)


def take_step(opt, option, loss, **kwargs):
    if option == "fp32":
        opt.backward_and_update(loss, threshold=THRESHOLD)
    elif option == "fp16":
        opt.backward_and_update_half(loss, threshold=THRESHOLD, **kwargs)
    else:
        opt.backward_and_sparse_update(loss, threshold=THRESHOLD, topK=option == "sparseTopK",
                                       **kwargs)


@pytest.mark.parametrize("option, kwargs", [
    ("fp32", {}), ("fp16", {}), ("fp16", {"clipping": True, "clip_Value": 0.05}),
    ("sparseTopK", {"spars": 0.3}), ("sparseThreshold", {"spars": 0.02}),
])
@pytest.mark.parametrize("world", [3, 4])
def test_filling_equals_packing_afterwards_bit_for_bit(option, kwargs, world):
    for filled, packed in run_both(option, world=world, **kwargs):
        for got, want in zip(filled, packed):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("option", ["fp32", "fp16", "sparseTopK"])
def test_filling_with_a_dynamic_loss_scale_equals_packing(option):
    kwargs = {"spars": 0.3} if option == "sparseTopK" else {}
    for filled, packed in run_both(option, loss_scale="dynamic", world=2, **kwargs):
        for got, want in zip(filled, packed):
            np.testing.assert_array_equal(got, want)


def test_dp_with_filled_buckets_equals_one_process_on_the_full_batch():
    """Two ranks with half the rows each vs one process with all of them: within 1e-6."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 6)).astype(np.float32)

    def loss_rows(params, rows):
        h = ms.ops.matmul(ms.Tensor(rows), params[0]) + params[1]
        h = ms.ops.matmul(ms.ops.matmul(h.tanh(), params[2]), params[3]) + params[4]
        return (h * h).mean()

    def run(comm):
        params = make_params(0)
        opt = DistOpt(nn.SGD(params, 0.1, momentum=0.9), communicator=comm, buffSize=BUFF)
        for _ in range(4):
            opt.backward_and_update(loss_rows(params, x[4 * comm.rank:4 * comm.rank + 4]),
                                    threshold=THRESHOLD)
        return values(params)

    ref = make_params(0)
    sgd = nn.SGD(ref, 0.1, momentum=0.9)
    grad_fn = ms.value_and_grad(lambda: loss_rows(ref, x), None, ref)
    for _ in range(4):
        sgd(grad_fn()[1])
    for got in run_ranks(2, run, timeout=TIMEOUT):
        for a, b in zip(got, values(ref)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_nothing_is_written_into_a_bucket_after_backward(monkeypatch):
    """Every slot write of ``backward_and_*`` happens inside backward; ``step(grads)``, handed
    arrays, writes them all afterwards."""
    inside, writes = set(), []         # threads (ranks) now in backward; (thread, inside?)
    original_backward, original_write = autograd.run_backward, buckets.write_slot

    def run_backward(*args, **kwargs):
        inside.add(threading.get_ident())
        try:
            return original_backward(*args, **kwargs)
        finally:
            inside.discard(threading.get_ident())

    def write_slot(*args, **kwargs):
        writes.append((threading.get_ident(), threading.get_ident() in inside))
        return original_write(*args, **kwargs)
    monkeypatch.setattr(autograd, "run_backward", run_backward)
    monkeypatch.setattr(buckets, "write_slot", write_slot)

    def run(comm):
        params = make_params(comm.rank)
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm)   # one fused bucket
        mine = threading.get_ident()       # ranks are threads: count this one's calls
        start = len(writes)                # (other ranks append too: filter by thread)
        opt.backward_and_update(loss_of(params, comm.rank, 0))
        opt.backward_and_sparse_update(loss_of(params, comm.rank, 1), spars=0.5, topK=True)
        filled = [w for t, w in writes[start:] if t == mine]
        start = len(writes)
        opt.step(opt.backward(loss_of(params, comm.rank, 2)))
        packed = [w for t, w in writes[start:] if t == mine]
        return filled.count(True), filled.count(False), packed.count(True), packed.count(False)
    # on 2 ranks MatMul computes p0, p2 and p3 straight into their slots (no write at all)
    n, direct = len(SHAPES), 3
    assert run_ranks(2, run, timeout=TIMEOUT) == [(2 * (n - direct), 0, 0, n)] * 2


def test_the_gradients_are_the_slots_of_one_buffer():
    def run(comm):
        params = make_params(comm.rank)
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm)
        exchange = BucketExchange(opt._fused, params, THRESHOLD * 1000, launch=False,
                                  tag="probe")
        grads = exchange.complete(opt._run_backward(loss_of(params, comm.rank, 0),
                                                    BucketFill(exchange)))
        flat = opt._fused.buffer("probe", exchange.plan[0][0], params[0].device, np.float32)
        assert len(exchange.plan) == 1 and all(np.shares_memory(g, flat) for g in grads)
        want = opt.backward(loss_of(params, comm.rank, 0))
        return all(np.array_equal(g, w) for g, w in zip(grads, want))
    assert run_ranks(2, run, timeout=TIMEOUT) == [True, True]


def test_a_bucket_is_launched_as_soon_as_its_last_gradient_is_final(monkeypatch):
    log = []     # rank 0's (a 1-rank DistOpt in fp32 has nothing to exchange: no buckets)
    original_put, original_launch = BucketExchange.put, BucketExchange._launch

    def put(self, pos, grad):
        if self.fused.comm.rank == 0:
            log.append(("grad", pos))
        return original_put(self, pos, grad)

    def launch(self, index, grads):
        if self.fused.comm.rank == 0:
            log.append(("launch", self.plan[index][0].members))
        return original_launch(self, index, grads)

    monkeypatch.setattr(BucketExchange, "put", put)
    monkeypatch.setattr(BucketExchange, "_launch", launch)

    def run(comm):
        params = make_params(comm.rank)
        DistOpt(nn.SGD(params, 0.1), communicator=comm, buffSize=BUFF).backward_and_update(
            loss_of(params, comm.rank, 0), threshold=THRESHOLD)
    run_ranks(2, run, timeout=TIMEOUT)
    # plan: (0,) alone, (3,) alone, (1, 2) fused, (4,) fused. The slotted buckets go out
    # first, last layer first: p4's before any earlier gradient exists, (1, 2) as soon as p1
    # arrives; then the ones sent alone from their own arrays, after backward.
    assert log == [("grad", 4), ("launch", (4,)), ("grad", 2), ("grad", 1), ("launch", (1, 2)),
                   ("launch", (3,)), ("launch", (0,))]


@pytest.mark.parametrize("filled", [True, False])
def test_a_parameter_without_gradient_on_one_rank_keeps_the_launch_order(filled):
    """Rank 1 uses only p0 and p2: the buckets of p1, p3 and p4 are full there only after
    backward (their slots zeroed), yet every rank launches the buckets in the same order, so
    the sums pair up and the update is the closed-form mean (a missing gradient counts 0).
    Regression: p3, sent alone, used to travel unscaled from rank 0 but packed times 1/2 (as
    zeros) on rank 1, which then applied the full sum instead of the mean."""
    def rank_loss(params, rank):
        if rank == 1:
            ones = ms.Tensor(np.ones((1, 6), np.float32))
            return ms.ops.matmul(ms.ops.matmul(ones, params[0]), params[2]).sum()
        return loss_of(params, rank, 0)

    def run(comm):
        params = make_params(0)
        opt = DistOpt(nn.SGD(params, 1.0), communicator=comm, buffSize=BUFF)
        before = values(params)
        grads = opt.backward(rank_loss(params, comm.rank))      # no exchange, no update
        if filled:
            opt.backward_and_update(rank_loss(params, comm.rank), threshold=THRESHOLD)
        else:
            opt.step(opt.backward(rank_loss(params, comm.rank)), threshold=THRESHOLD)
        return before, grads, values(params)

    results = run_ranks(2, run, timeout=TIMEOUT)
    assert results[1][1][4] is None and results[0][1][4] is not None
    grads = [[np.zeros(s, np.float32) if g is None else g for g, s in zip(r[1], SHAPES)]
             for r in results]
    for before, _, after in results:
        for i in range(len(SHAPES)):
            mean = (grads[0][i] + grads[1][i]) / np.float32(2)
            np.testing.assert_allclose(after[i], before[i] - mean, rtol=1e-6, atol=1e-7)


def test_filling_on_the_virtual_gpu_equals_packing(virtual_gpu):
    def run(comm):
        out = []
        for filled in (True, False):
            params = [ms.Parameter(ms.Tensor(np.full(s, 0.5 * (i + 1), np.float32)),
                                   name=f"p{i}", device="GPU")
                      for i, s in enumerate([(3, 2), (2,)])]
            opt = DistOpt(nn.SGD(params, 0.5), communicator=comm)
            x = ms.Tensor(np.full((1, 3), comm.rank + 1.0, np.float32), device="GPU")
            for option in ("fp32", "fp16", "sparseTopK"):
                loss = ((ms.ops.matmul(x, params[0]) + params[1]) ** 2).sum()
                kwargs = {"spars": 1.0} if option == "sparseTopK" else {}
                if filled:
                    take_step(opt, option, loss, **kwargs)
                else:
                    opt.step(opt.backward(loss), option, threshold=THRESHOLD, **kwargs)
            out.append([(p.device.is_host, p.asnumpy()) for p in params])
        return out

    for filled, packed in run_ranks(2, run, timeout=TIMEOUT):
        for (on_host, got), (_, want) in zip(filled, packed):
            assert not on_host
            np.testing.assert_array_equal(got, want)
