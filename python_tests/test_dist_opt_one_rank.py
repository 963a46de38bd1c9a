"""``DistOpt`` in fp32 on one rank hands the gradients straight to the optimizer: no bucket,
no identity allreduce, the bits of the bucket path (which copied them into a bucket, through
the reduction and back), the caller's arrays untouched, loss scaling and parameters without a
gradient as before. More ranks, and the other options on one rank, keep the buckets."""
import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt, DynamicLossScale
from minitorch_dist.parallel.data_parallel.buckets import BucketExchange

SHAPES = [(6, 5), (5,), (40,), (3, 2)]
TIMEOUT = 20


def make_params(shapes=SHAPES):
    rng = np.random.default_rng(7)
    return [ms.Parameter(ms.Tensor(rng.standard_normal(s).astype(np.float32)), name=f"p{i}")
            for i, s in enumerate(shapes)]


def step_grads(step, scale=1.0):
    rng = np.random.default_rng(100 + step)
    return [(rng.standard_normal(s) * scale).astype(np.float32) for s in SHAPES]


def loss_of(params, step):
    """A loss whose gradients are ``step_grads(step)`` for p0..p2; p3 gets none."""
    terms = [(p * ms.Tensor(g)).sum() for p, g in zip(params[:3], step_grads(step))]
    return terms[0] + terms[1] + terms[2]


def sgd_by_hand(grads_per_step, lr=0.1, momentum=0.9):
    """nn.SGD's momentum rule on make_params() (a missing gradient counts as zeros)."""
    weights = [p.asnumpy().copy() for p in make_params()]
    moments = [np.zeros_like(w) for w in weights]
    for grads in grads_per_step:
        for w, m, g in zip(weights, moments, grads):
            g = np.zeros_like(w) if g is None else g
            m *= np.float32(momentum)
            m += g
            w -= np.float32(lr) * m
    return weights


def one_rank(fn):
    return run_ranks(1, fn, timeout=TIMEOUT)[0]


def test_backward_and_update_on_one_rank_is_the_optimizer_on_the_gradients():
    def run(comm):
        params = make_params()
        opt = DistOpt(nn.SGD(params, 0.1, momentum=0.9), communicator=comm)
        opt.reset_comm_stats()
        for step in range(3):
            opt.backward_and_update(loss_of(params, step))
        return [p.asnumpy() for p in params], opt.comm_stats()

    weights, stats = one_rank(run)
    want = sgd_by_hand([step_grads(s)[:3] + [None] for s in range(3)])
    for got, expected in zip(weights, want):
        np.testing.assert_array_equal(got, expected)
    assert stats["by_option"]["fp32"] == {"steps": 3, "calls": 0, "bytes_sent": 0}


def test_step_on_one_rank_with_loss_scaling_divides_copies_and_skips_overflow():
    def run(comm):
        params = make_params()
        opt = DistOpt(nn.SGD(params, 0.1, momentum=0.9), communicator=comm,
                      loss_scale=DynamicLossScale(init_scale=8.0))
        mine = step_grads(0, scale=8.0)
        kept = [g.copy() for g in mine]
        applied = [opt.step(mine)]
        untouched = all(np.array_equal(a, b) for a, b in zip(mine, kept))
        before = [p.asnumpy().copy() for p in params]
        bad = step_grads(1, scale=4.0)
        bad[2][3] = np.inf
        applied.append(opt.step(bad))
        unchanged = all(np.array_equal(p.asnumpy(), b) for p, b in zip(params, before))
        return applied, untouched, unchanged, opt.loss_scale.scale, before

    applied, untouched, unchanged, scale, weights = one_rank(run)
    assert applied == [True, False] and untouched and unchanged and scale == 4.0
    for got, expected in zip(weights, sgd_by_hand([step_grads(0)])):
        np.testing.assert_array_equal(got, expected)     # 8g / 8 == g exactly


def test_one_rank_at_loss_scale_one_still_skips_an_overflowing_step():
    """Regression (found in review): at scale 1 the division is skipped, the finite check
    and the scale's update must not be."""
    def run(comm):
        params = make_params()
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm,
                      loss_scale=DynamicLossScale(init_scale=1.0, min_scale=1.0,
                                                  growth_interval=1))
        bad = step_grads(0)
        bad[0][0, 0] = np.nan
        before = [p.asnumpy().copy() for p in params]
        skipped = opt.step(bad)
        unchanged = all(np.array_equal(p.asnumpy(), b) for p, b in zip(params, before))
        applied = opt.step(step_grads(1))
        return skipped, unchanged, applied, opt.loss_scale.scale

    assert one_rank(run) == (False, True, True, 2.0)      # grew after one good step


def test_one_rank_fp32_makes_no_bucket_and_the_other_options_still_do(monkeypatch):
    made = []
    original = BucketExchange.__init__
    monkeypatch.setattr(BucketExchange, "__init__", lambda self, *a, **k: made.append(
        k.get("half", a[3] if len(a) > 3 else False)) or original(self, *a, **k))

    def run(comm):
        params = make_params()
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm)
        opt.backward_and_update(loss_of(params, 0))
        opt.step(step_grads(1))
        opt.backward_and_update_half(loss_of(params, 2))      # float16 rounding: kept
    one_rank(run)
    assert made == [True]


def test_two_ranks_still_average_through_the_buckets():
    def run(comm):
        params = make_params()
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm)
        opt.reset_comm_stats()
        opt.step([g * np.float32(comm.rank + 1) for g in step_grads(0)])
        return [p.asnumpy() for p in params], opt.comm_stats()["by_option"]["fp32"]["calls"]

    start = [p.asnumpy() for p in make_params()]
    want = [w - np.float32(0.1) * (g * np.float32(1.5)) for w, g in zip(start, step_grads(0))]
    for weights, calls in run_ranks(2, run, timeout=TIMEOUT):
        assert calls > 0
        for got, expected in zip(weights, want):
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
