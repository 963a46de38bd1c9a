"""``DistOpt``'s sparse options (``sparseTopK``, ``sparseThreshold``) on in-process ranks
(``LocalCommunicator`` threads): the top-K and threshold selections, the residual kept for
error feedback (``corr``), per-bucket selection and the cap on what is sent, against closed
forms computed here with NumPy."""
import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt
from test_dist_opt_unit import TIMEOUT, make_params, rank_order_mean, values


def _small_magnitudes(rank, step, n):
    """Distinct magnitudes below 1, mixed signs, so the top-K set is unambiguous."""
    rng = np.random.default_rng(77 + 10 * step + rank)
    mags = rng.permutation(np.arange(1, n + 1)) / (n + 1.0)
    return (mags * rng.choice([-1.0, 1.0], n)).astype(np.float32)


def test_sparse_topk_sends_true_largest_with_error_feedback_exactly():
    world, spars, steps = 2, 0.1, 3
    shapes = [(4, 5), (30,)]          # one fused bucket of 50 elements -> k = 5

    def grads_of(rank, step):
        flat = _small_magnitudes(rank, step, 50)
        return [flat[:20].reshape(4, 5), flat[20:]]

    def run(comm):
        params = make_params(0, shapes)
        for p in params:
            p.data[...] = 0
        opt = DistOpt(nn.SGD(params, 1.0), communicator=comm)
        history = []
        for step in range(steps):
            opt.step(grads_of(comm.rank, step), "sparseTopK", spars=spars)
            history.append((np.concatenate([-v.ravel() for v in values(params)]),
                            np.concatenate([opt.residual(i).ravel() for i in range(2)])))
        return history

    results = run_ranks(world, run, timeout=TIMEOUT)
    residual = [np.zeros(50, np.float32) for _ in range(world)]
    applied = np.zeros(50, np.float32)
    for step in range(steps):
        sent = []
        for r in range(world):
            acc = np.concatenate([g.ravel() for g in grads_of(r, step)]) + residual[r]
            top = np.argsort(-np.abs(acc))[:5]
            s = np.zeros(50, np.float32)
            s[top] = acc[top]
            kept = acc - s
            kept[top] = 0
            np.testing.assert_array_equal(s + kept, acc)          # conservation, exactly
            sent.append(s)
            residual[r] = kept
        applied = applied + rank_order_mean(sent)
        for r, history in enumerate(results):
            total, res = history[step]
            np.testing.assert_array_equal(total, applied)
            np.testing.assert_array_equal(res, residual[r])
            assert np.count_nonzero(res) <= 45 and (step or np.count_nonzero(res) == 45)


def test_sparse_update_is_per_bucket_and_residual_survives_threshold_changes():
    def run(comm):
        params = make_params(0, [(10,), (10,)])
        opt = DistOpt(nn.SGD(params, 1.0), communicator=comm)
        g = [np.linspace(-1, 1, 10).astype(np.float32),
             np.linspace(0.1, 0.2, 10).astype(np.float32)]
        opt.step(g, "sparseTopK", spars=0.2, threshold=5)       # each tensor alone: k = 2 each
        first = [np.count_nonzero(opt.residual(i)) for i in range(2)]
        opt.step(g, "sparseTopK", spars=0.2)                    # fused: k = 4 over both
        return first, [np.count_nonzero(opt.residual(i)) for i in range(2)]

    for first, second in run_ranks(2, run, timeout=TIMEOUT):
        assert first == [8, 8]
        # fused: acc is 2g where kept and g where sent; the four largest are all in w0
        assert second == [6, 10]


def test_sparse_threshold_sends_at_or_above_and_caps_the_count():
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(50, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm, sparse_cap=0.1)
        opt.reset_comm_stats()
        g = np.full(50, 0.5, np.float32)
        g[::10] = np.arange(1, 6)                     # 5 large, 45 at exactly the threshold
        opt.step((g,), "sparseThreshold", spars=0.5)  # all 50 pass, the cap (5) limits it
        capped = opt.comm_stats()["by_op"]["allgatherv"]["bytes_sent"]
        kept = np.count_nonzero(opt.residual(0))
        opt.step((np.zeros(50, np.float32),), "sparseThreshold", spars=0.6, corr=False)
        return capped, kept, -w.asnumpy()

    for capped, kept, total in run_ranks(2, run, timeout=TIMEOUT):
        assert capped == 5 * 4 + 5 * 4          # five int32 indices and five float32 values
        assert kept == 45
        expected = np.zeros(50, np.float32)
        expected[::10] = np.arange(1, 6)
        np.testing.assert_array_equal(total, expected)   # corr=False: residual 0.5 < 0.6 not sent


def test_corr_false_keeps_no_residual_and_corr_can_be_switched_on_later():
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(10, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm)
        g = np.linspace(0.1, 1.0, 10).astype(np.float32)
        opt.backward_and_sparse_update((w * ms.Tensor(g)).sum(), spars=0.5, topK=True, corr=False)
        none_yet = opt.residual(0) is None
        opt.backward_and_sparse_update((w * ms.Tensor(g)).sum(), spars=0.5, topK=True, corr=True)
        return none_yet, opt.residual(0).copy(), -w.asnumpy()

    g = np.linspace(0.1, 1.0, 10).astype(np.float32)
    for none_yet, residual, total in run_ranks(2, run, timeout=TIMEOUT):
        assert none_yet
        np.testing.assert_array_equal(residual, np.where(np.arange(10) < 5, g, 0))
        np.testing.assert_array_equal(total, np.where(np.arange(10) >= 5, 2 * g, 0))
