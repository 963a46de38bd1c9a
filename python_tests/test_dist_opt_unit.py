"""``DistOpt`` on in-process ranks (``LocalCommunicator`` threads): construction, the fp32 and
fp16 options, partial update, dynamic loss scaling, bad input, communication volume and
gradient kinds, each against a closed form computed here with NumPy, with a different
gradient on every rank. The sparse options are in ``test_dist_opt_sparse.py``."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import Communicator, Request, run_ranks
from minitorch_dist.parallel import DistOpt, DynamicLossScale
from minitorch_dist.parallel.data_parallel.partial_update import PartialUpdateSchedule

# 30 elements (> a 16-float bucket: alone), 5 and 6 (fused together), 40 (>= threshold: alone)
SHAPES = [(6, 5), (5,), (40,), (3, 2)]
BUFF, THRESHOLD = 64, 32
TIMEOUT = 20


def make_params(seed, shapes=SHAPES, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [ms.Parameter(ms.Tensor(rng.standard_normal(s).astype(dtype)), name=f"p{i}")
            for i, s in enumerate(shapes)]


def rank_grads(rank, step, shapes=SHAPES, dtype=np.float32, scale=1.0):
    rng = np.random.default_rng(1000 * step + rank)
    return [(rng.standard_normal(s) * (rank + 1) * scale).astype(dtype) for s in shapes]


def rank_order_mean(arrays):
    """The mean as the communicator computes it: sum in rank order, then divide."""
    total = arrays[0].copy()
    for a in arrays[1:]:
        total += a
    total /= total.dtype.type(len(arrays))
    return total


def values(params):
    return [p.asnumpy().copy() for p in params]


def catch(fn):
    """Run ``fn(comm)`` and return the exception it raised (so every rank can be inspected)."""
    def body(comm):
        try:
            fn(comm)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            return exc
        return None
    return body


# ---- construction ---------------------------------------------------------------------------
def test_construction_broadcasts_rank0_parameters_and_sets_ranks():
    def run(comm):
        params = make_params(seed=comm.rank)          # every rank starts elsewhere
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm, buffSize=BUFF)
        return (opt.global_rank, opt.local_rank, opt.world_size), values(params)

    results = run_ranks(3, run, timeout=TIMEOUT)
    expected = values(make_params(seed=0))
    for rank, (ids, vals) in enumerate(results):
        assert ids == (rank, rank, 3)
        for got, want in zip(vals, expected):
            np.testing.assert_array_equal(got, want)


# ---- fp32 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [
    lambda ps: nn.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: nn.Adam(ps, 0.01)], ids=["sgd_momentum", "adam"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("world", [3, 4], ids=["divide_after", "prescale_power_of_two"])
def test_fp32_step_equals_closed_form_mean_exactly(make_opt, dtype, world):
    steps = 3

    def run(comm):
        params = make_params(comm.rank, dtype=dtype)
        opt = DistOpt(make_opt(params), communicator=comm, buffSize=BUFF)
        for step in range(steps):
            assert opt.step(rank_grads(comm.rank, step, dtype=dtype), "fp32", threshold=THRESHOLD)
        return values(params), int(opt.opt.global_step.asnumpy()[0])

    results = run_ranks(world, run, timeout=TIMEOUT)
    ref_params = make_params(0, dtype=dtype)
    ref = make_opt(ref_params)
    for step in range(steps):
        per_rank = [rank_grads(r, step, dtype=dtype) for r in range(world)]
        ref(tuple(ms.Tensor(rank_order_mean([g[i] for g in per_rank]))
                  for i in range(len(SHAPES))))
    for vals, global_step in results:
        assert global_step == steps
        for got, want in zip(vals, values(ref_params)):
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)


def test_backward_and_update_matches_step_with_value_and_grad():
    x = np.random.default_rng(5).standard_normal((8, 6)).astype(np.float32)

    def loss_fn(params, shard):
        h = ops_matmul(ms.Tensor(shard), params[0])        # (2, 5)
        return (h * h).mean() + (params[1] * params[1]).sum() * 0.1

    def run(comm):
        shard = x[2 * comm.rank:2 * comm.rank + 2]
        a = make_params(comm.rank, shapes=[(6, 5), (5,)])
        b = make_params(comm.rank, shapes=[(6, 5), (5,)])
        opt_a = DistOpt(nn.SGD(a, 0.1, momentum=0.5), communicator=comm)
        opt_b = DistOpt(nn.SGD(b, 0.1, momentum=0.5), communicator=comm)
        grad_fn = ms.value_and_grad(lambda: loss_fn(b, shard), None, opt_b.parameters)
        for _ in range(2):
            opt_a(loss_fn(a, shard))
            _, grads = grad_fn()
            opt_b.step(grads)
        return values(a), values(b)

    for va, vb in run_ranks(4, run, timeout=TIMEOUT):
        for got, want in zip(va, vb):
            np.testing.assert_array_equal(got, want)


def ops_matmul(a, b):
    return ms.ops.matmul(a, b)


class _OneRankComm(Communicator):
    """A 1-rank communicator with nothing behind it, for argument checks."""

    def _allreduce(self, array, op, out):
        result = out if out is not None else array.copy()
        result[...] = array
        return result

    def _allgather(self, array):
        return array[None].copy()

    def _allgatherv(self, array):
        return array.copy(), [array.shape[0]]

    def _broadcast(self, array, root):
        return array

    def _reduce_scatter(self, array, op):
        return array.copy()

    def _send(self, array, dest, tag):
        raise NotImplementedError

    def _recv(self, out, source, tag):
        raise NotImplementedError

    def _barrier(self):
        pass


def _record_launches_waits_and_updates(comm, sgd, log):
    """Log when ``comm``'s nonblocking allreduces are launched and waited for, and which
    parameters ``sgd`` updates in between."""
    launch = comm._iallreduce

    def logged_launch(array, op, out):
        log.append(("launch", array.size))
        request = launch(array, op, out)
        return Request(lambda: log.append(("wait", array.size)) or request.wait())

    comm._iallreduce = logged_launch
    original = sgd.update_many      # each bucket's parameters in one call, as it arrives
    sgd.update_many = lambda grads: log.extend(
        ("update", i) for i, g in enumerate(grads) if g is not None) or original(grads)


def test_buckets_are_all_launched_before_the_first_wait_and_updated_as_they_arrive():
    log = []     # rank 0's (a 1-rank DistOpt in fp32 has nothing to exchange: no buckets)

    def run(comm):
        sgd = nn.SGD(make_params(0), 0.1)
        if comm.rank == 0:
            _record_launches_waits_and_updates(comm, sgd, log)
        opt = DistOpt(sgd, communicator=comm, buffSize=BUFF)
        opt.step(rank_grads(comm.rank, 0), threshold=THRESHOLD)

    run_ranks(2, run, timeout=TIMEOUT)
    # plan: p0 (30 > a 16-float bucket) alone, p2 (40 >= threshold) alone, p1 + p3 fused;
    # launched in the one fixed order (the fused bucket first, then alone from the end)
    assert log == [("launch", 11), ("launch", 40), ("launch", 30),
                   ("wait", 11), ("update", 1), ("update", 3), ("wait", 40), ("update", 2),
                   ("wait", 30), ("update", 0)]


# ---- fp16 -----------------------------------------------------------------------------------
def test_fp16_equals_mean_within_half_precision_and_halves_the_bytes():
    world = 4

    def run(comm):
        params = make_params(comm.rank)
        for p in params:
            p.data[...] = 0
        opt = DistOpt(nn.SGD(params, 1.0), communicator=comm, buffSize=BUFF)
        opt.reset_comm_stats()
        opt.step(rank_grads(comm.rank, 0), "fp16", threshold=THRESHOLD)
        return values(params), opt.comm_stats()["bytes_sent"]

    results = run_ranks(world, run, timeout=TIMEOUT)
    per_rank = [rank_grads(r, 0) for r in range(world)]
    for vals, nbytes in results:
        assert nbytes == 2 * sum(int(np.prod(s)) for s in SHAPES)
        for i, got in enumerate(vals):
            mean = np.mean([g[i].astype(np.float64) for g in per_rank], axis=0)
            np.testing.assert_allclose(-got, mean, rtol=0, atol=4e-3 * np.abs(mean).max())
            assert not np.array_equal(-got, mean.astype(np.float32))   # it did go through fp16


def test_fp16_divides_before_summing_so_values_near_65504_do_not_overflow():
    world = 4
    big = np.array([60000.0, -65000.0, 65504.0, 1.0], np.float32)
    # SINGA's order (cast, sum in fp16, divide afterwards) overflows here:
    with np.errstate(over="ignore"):
        singa = sum(np.float16(big) for _ in range(world))
    assert np.isinf(singa[:3]).all()

    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(4, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm)
        opt.step((big.copy(),), "fp16")
        return -w.asnumpy()

    for got in run_ranks(world, run, timeout=TIMEOUT):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, big, rtol=2e-3)


def test_fp16_clipping_clamps_local_values_first():
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(3, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm)
        g = np.array([5.0, -0.25, -300.0], np.float32) * (comm.rank + 1)
        opt.backward_and_update_half(((w * ms.Tensor(g)).sum()), clipping=True, clip_Value=2)
        return -w.asnumpy()

    for got in run_ranks(2, run, timeout=TIMEOUT):
        np.testing.assert_allclose(got, [2.0, -0.375, -2.0], rtol=1e-3)


# ---- partial update -------------------------------------------------------------------------
def test_partial_update_schedule_covers_every_element_once_per_period():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([2, 4, 8])),
                               min_size=1, max_size=12), st.integers(1, 100))
    def check(spec, buff_size):
        sizes, itemsizes = [n for n, _ in spec], [s for _, s in spec]
        schedule = PartialUpdateSchedule(sizes, itemsizes, buff_size)
        total = sum(n * s for n, s in spec)
        assert schedule.period == max(1, -(-total // buff_size))
        covered = [np.zeros(n, int) for n in sizes]
        for k in range(schedule.period):
            assert schedule.chunk(k + schedule.period) == schedule.chunk(k)
            nbytes = 0
            for pos, lo, hi in schedule.chunk(k):
                covered[pos][lo:hi] += 1
                nbytes += (hi - lo) * itemsizes[pos]
            assert nbytes <= buff_size + max(itemsizes)
        assert all((c == 1).all() for c in covered)

    check()


def test_partial_update_averages_every_parameter_within_the_period():
    world = 3

    def run(comm):
        params = make_params(0)
        opt = DistOpt(nn.SGD(params, 0.0), communicator=comm, buffSize=BUFF)
        for p in params:            # replicas drift apart (what local updates do)
            p.data[...] = np.arange(p.size).reshape(p.shape) + 100.0 * comm.rank
        zeros = [np.zeros(s, np.float32) for s in SHAPES]
        equal_after = []
        for _ in range(opt.partial_period):
            opt.step(zeros, "partialUpdate")
            equal_after.append(values(params))
        return opt.partial_period, opt.partial, equal_after

    results = run_ranks(world, run, timeout=TIMEOUT)
    period = results[0][0]
    assert period == -(-4 * sum(int(np.prod(s)) for s in SHAPES) // BUFF) == 6
    assert all(r[1] == 0 for r in results)           # the counter wrapped around
    for step in range(period):
        same = all(np.array_equal(results[0][2][step][i], results[r][2][step][i])
                   for r in range(world) for i in range(len(SHAPES)))
        assert same == (step == period - 1)
    for i, s in enumerate(SHAPES):
        np.testing.assert_allclose(results[1][2][-1][i], np.arange(np.prod(s)).reshape(s) + 100.0)


def test_partial_update_applies_the_local_gradient_first():
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(4, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm, buffSize=8)     # period 2
        g = np.full(4, comm.rank + 1.0, np.float32)
        opt.backward_and_partial_update((w * ms.Tensor(g)).sum())
        return -w.asnumpy()

    for rank, got in enumerate(run_ranks(2, run, timeout=TIMEOUT)):
        np.testing.assert_array_equal(got, [1.5, 1.5, rank + 1.0, rank + 1.0])


# ---- dynamic loss scaling -------------------------------------------------------------------
@pytest.mark.parametrize("option", ["fp32", "fp16", "sparseTopK", "partialUpdate"])
def test_dynamic_loss_scale_skips_inf_steps_on_every_rank(option):
    world = 3

    def run(comm):
        params = make_params(comm.rank)
        scale = DynamicLossScale(init_scale=1024.0, growth_interval=2)
        opt = DistOpt(nn.SGD(params, 0.1), communicator=comm, buffSize=BUFF, loss_scale=scale)
        start = values(params)
        bad = rank_grads(comm.rank, 0, scale=1024.0)
        if comm.rank == 1:
            bad[2][7] = np.inf
        sparse = {"spars": 0.5} if option.startswith("sparse") else {}
        skipped = opt.step(bad, option, threshold=THRESHOLD, **sparse)
        unchanged = all(np.array_equal(a, b) for a, b in zip(start, values(params)))
        after_skip = (scale.scale, int(opt.opt.global_step.asnumpy()[0]))
        applied = opt.step(rank_grads(comm.rank, 1, scale=512.0), option, threshold=THRESHOLD,
                           **sparse)
        opt.step(rank_grads(comm.rank, 2, scale=512.0), option, threshold=THRESHOLD, **sparse)
        return skipped, unchanged, after_skip, applied, scale.scale, values(params)

    results = run_ranks(world, run, timeout=TIMEOUT)
    for skipped, unchanged, after_skip, applied, final_scale, _ in results:
        assert skipped is False and unchanged and after_skip == (512.0, 0)
        assert applied is True and final_scale == 1024.0
    if option == "fp32":      # the unscaled result equals a run without loss scaling
        def plain(comm):
            params = make_params(comm.rank)
            opt = DistOpt(nn.SGD(params, 0.1), communicator=comm, buffSize=BUFF)
            for step in (1, 2):
                opt.step(rank_grads(comm.rank, step), threshold=THRESHOLD)
            return values(params)
        for got, want in zip(results[0][5], run_ranks(world, plain, timeout=TIMEOUT)[0]):
            np.testing.assert_array_equal(got, want)


def test_dynamic_loss_scale_seeds_backward_with_the_scale():
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(3, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm,
                      loss_scale=DynamicLossScale(init_scale=1024.0))
        g = np.array([1e-6, 2.0, -3.0], np.float32) * (comm.rank + 1)
        opt.backward_and_update_half((w * ms.Tensor(g)).sum())
        return -w.asnumpy(), opt.loss_scale.scale

    for got, scale in run_ranks(2, run, timeout=TIMEOUT):
        assert scale == 1024.0
        # 1e-6 / 2 is below float16's normal range (6.1e-5); the scale keeps it accurate
        np.testing.assert_allclose(got, [1.5e-6, 3.0, -4.5], rtol=1e-3)


# ---- bad input: every rank raises ValueError, nobody hangs ----------------------------------
def _all_value_errors(results, *words):
    assert all(isinstance(e, ValueError) for e in results), results
    for e in results:
        for word in words:
            assert word in str(e), (word, str(e))


@pytest.mark.parametrize("topK, spars, words", [(True, 1.5, "0 < spars <= 1"),
                                                (True, 0.0, "0 < spars <= 1"),
                                                (False, -0.5, "spars > 0")])
def test_bad_spars_raises_on_every_rank(topK, spars, words):
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.ones(4, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm)
        opt.backward_and_sparse_update((w * w).sum(), spars=spars, topK=topK)

    _all_value_errors(run_ranks(3, catch(run), timeout=10), f"spars={spars!r}", words)


def test_shape_mismatch_between_ranks_raises_on_every_rank():
    def run(comm):
        shapes = list(SHAPES)
        if comm.rank == 2:
            shapes[1] = (6,)
        DistOpt(nn.SGD(make_params(0, shapes), 0.1), communicator=comm)

    _all_value_errors(run_ranks(3, catch(run), timeout=10), "parameter 1", "(6,)", "(5,)",
                      "rank 2")


def test_parameter_count_and_dtype_mismatch_raise_on_every_rank():
    def fewer(comm):
        DistOpt(nn.SGD(make_params(0, SHAPES[:3] if comm.rank else SHAPES), 0.1),
                communicator=comm)

    _all_value_errors(run_ranks(2, catch(fewer), timeout=10), "parameter 3", "missing",
                      "(3, 2)")

    def dtypes(comm):
        DistOpt(nn.SGD(make_params(0, dtype=np.float64 if comm.rank else np.float32), 0.1),
                communicator=comm)

    _all_value_errors(run_ranks(2, catch(dtypes), timeout=10), "parameter 0", "float64",
                      "float32")


def test_world_size_mismatch_raises_on_every_rank():
    def run(comm):
        DistOpt(nn.SGD(make_params(0), 0.1), communicator=comm,
                world_size=3 if comm.rank == 1 else 2)

    _all_value_errors(run_ranks(2, catch(run), timeout=10), "world_size=3", "rank 1", "2 ranks")


def test_local_argument_errors():
    params = make_params(0)
    comm = _OneRankComm()
    with pytest.raises(TypeError, match="wraps an optimizer"):
        DistOpt(params, communicator=comm)
    with pytest.raises(ValueError, match="buffSize"):
        DistOpt(nn.SGD(params, 0.1), communicator=comm, buffSize=0)
    with pytest.raises(ValueError, match="sparse_cap"):
        DistOpt(nn.SGD(params, 0.1), communicator=comm, sparse_cap=0)
    with pytest.raises(ValueError, match="loss_scale"):
        DistOpt(nn.SGD(params, 0.1), communicator=comm, loss_scale="static")
    with pytest.raises(ValueError, match="local_rank and world_size"):
        DistOpt(nn.SGD(params, 0.1), nccl_id=object())
    with pytest.raises(TypeError, match="Communicator"):
        DistOpt(nn.SGD(params, 0.1), communicator="mpi")
    opt = DistOpt(nn.SGD(params, 0.1), communicator=comm, loss_scale="dynamic")
    assert isinstance(opt.loss_scale, DynamicLossScale) and opt.loss_scale.scale == 2.0 ** 16
    opt = DistOpt(nn.SGD(params, 0.1), communicator=comm)
    grads = rank_grads(0, 0)
    with pytest.raises(ValueError, match="dist_option must be one of"):
        opt.step(grads, "fp8")
    with pytest.raises(ValueError, match="expected a tuple of 4 gradients"):
        opt.step(grads[:3])
    with pytest.raises(ValueError, match=r"'p1' has shape \(4,\), expected \(5,\)"):
        opt.step([grads[0], np.zeros(4, np.float32)] + grads[2:])
    with pytest.raises(ValueError, match="threshold"):
        opt.step(grads, threshold=0)
    with pytest.raises(ValueError, match="contradicts"):
        opt.step(grads, "sparseTopK", topK=False)
    with pytest.raises(ValueError, match="one element"):
        opt(params[0] * 2)
    assert opt.step(grads, "plain") and opt.step(grads, "half")   # SINGA's option names


# ---- communication volume -------------------------------------------------------------------
def test_comm_stats_fp16_and_topk_byte_ratios():
    shapes = [(100, 50), (50,), (50, 10), (10,)]

    def run(comm):
        params = make_params(0, shapes)
        opt = DistOpt(nn.SGD(params, 0.01), communicator=comm)
        opt.reset_comm_stats()
        for option in ("fp32", "fp16", "sparseTopK", "sparseThreshold", "partialUpdate"):
            sparse = {"spars": 0.01} if option.startswith("sparse") else {}
            opt.step(rank_grads(comm.rank, 0, shapes), option, **sparse)
        stats = opt.comm_stats()
        return stats["by_option"], stats["bytes_sent"], stats["calls"]

    for by_option, total, calls in run_ranks(2, run, timeout=TIMEOUT):
        fp32 = by_option["fp32"]["bytes_sent"]
        assert fp32 == 4 * (5000 + 50 + 500 + 10) and by_option["fp32"]["calls"] == 1
        assert by_option["fp16"]["bytes_sent"] <= 0.5 * fp32
        assert by_option["sparseTopK"]["bytes_sent"] <= 0.025 * fp32
        assert by_option["partialUpdate"]["bytes_sent"] <= fp32
        assert all(v["steps"] == 1 for v in by_option.values())
        assert total == sum(v["bytes_sent"] for v in by_option.values())
        assert calls == sum(v["calls"] for v in by_option.values())


def test_all_reduce_helper_for_metrics():
    def run(comm):
        opt = DistOpt(nn.SGD(make_params(0), 0.1), communicator=comm)
        t = opt.all_reduce(ms.Tensor([comm.rank + 1.0]))
        a = opt.all_reduce(np.array([2.0 * comm.rank]), op="max")
        return t.asnumpy().tolist(), a.tolist()

    for t, a in run_ranks(3, run, timeout=TIMEOUT):
        assert t == [6.0] and a == [4.0]


# ---- gradient kinds and devices -------------------------------------------------------------
def test_tensor_rowtensor_and_missing_gradients():
    def run(comm):
        table = ms.Parameter(ms.Tensor(np.zeros((5, 2), np.float32)), name="table")
        bias = ms.Parameter(ms.Tensor(np.zeros(2, np.float32)), name="bias")
        unused = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="unused")
        opt = DistOpt(nn.SGD([table, bias, unused], 1.0), communicator=comm)
        rows = ms.RowTensor(ms.Tensor(np.array([comm.rank, 4])),
                            ms.Tensor(np.full((2, 2), comm.rank + 1.0, np.float32)), (5, 2))
        opt.step((rows, ms.Tensor(np.full(2, 2.0 * comm.rank, np.float32)), None))
        return -table.asnumpy(), -bias.asnumpy(), unused.asnumpy()

    for table, bias, unused in run_ranks(2, run, timeout=TIMEOUT):
        np.testing.assert_array_equal(table[:, 0], [0.5, 1.0, 0, 0, 1.5])
        np.testing.assert_array_equal(bias, [1.0, 1.0])
        np.testing.assert_array_equal(unused, [1.0, 1.0, 1.0])   # zero mean gradient


def test_parameters_on_the_virtual_gpu(virtual_gpu):
    def run(comm):
        params = [ms.Parameter(ms.Tensor(np.full(s, comm.rank, np.float32)), name=f"p{i}",
                               device="GPU") for i, s in enumerate([(3, 2), (4,)])]
        opt = DistOpt(nn.SGD(params, 1.0), communicator=comm)
        grads = [np.full(p.shape, comm.rank + 1.0, np.float32) for p in params]
        for option in ("fp32", "fp16", "sparseTopK", "partialUpdate"):
            opt.step(grads, option, **({"spars": 1.0} if option == "sparseTopK" else {}))
        return [(p.device.is_host, p.asnumpy()) for p in params]

    for result in run_ranks(2, run, timeout=TIMEOUT):
        for on_host, value in result:
            assert not on_host
            np.testing.assert_array_equal(value, np.full(value.shape, -6.0))
