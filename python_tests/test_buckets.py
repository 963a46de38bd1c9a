"""Gradient fusion (``minitorch_dist.parallel.data_parallel.buckets``): plans, packing, fp16 casts, fused
allreduce and broadcast over an in-process communicator."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.data_parallel.buckets import (Bucket, BucketedAllreduce,
                                                          BucketExchange, cast_from_half,
                                                          cast_to_half, fused_broadcast,
                                                          launch_allreduce, pack, plan_buckets,
                                                          unpack, wire_bound)


def layout(buckets):
    return [(b.members, b.offsets, b.size, b.fused) for b in buckets]


# ---- planning -------------------------------------------------------------------------------
def test_small_tensors_share_a_bucket_with_running_offsets():
    # capacity 40 bytes / 4 = 10 elements; 3 + 5 + 2 fills it exactly
    plan = plan_buckets([3, 5, 2], itemsize=4, buff_size=40, threshold=100)
    assert layout(plan) == [((0, 1, 2), (0, 3, 8), 10, True)]


def test_tensor_exactly_filling_a_bucket_closes_it_and_leaves_no_empty_bucket():
    assert layout(plan_buckets([10], 4, 40, 100)) == [((0,), (0,), 10, True)]
    assert layout(plan_buckets([5, 5, 3], 4, 40, 100)) == [((0, 1), (0, 5), 10, True),
                                                           ((2,), (0,), 3, True)]
    assert plan_buckets([], 4, 40, 100) == []


def test_tensor_that_does_not_fit_starts_a_new_bucket():
    assert layout(plan_buckets([6, 5, 4], 4, 40, 100)) == [((0,), (0,), 6, True),
                                                           ((1, 2), (0, 5), 9, True)]


def test_tensor_larger_than_a_bucket_is_sent_alone_and_the_open_bucket_continues():
    plan = plan_buckets([3, 25, 4], 4, 40, 100)
    assert layout(plan) == [((1,), (0,), 25, False), ((0, 2), (0, 3), 7, True)]


def test_tensor_at_or_above_threshold_is_sent_alone():
    plan = plan_buckets([2, 8, 7], 4, 400, threshold=8)
    assert layout(plan) == [((1,), (0,), 8, False), ((0, 2), (0, 2), 9, True)]


def test_itemsize_sets_the_capacity():
    # float16: 40 bytes hold 20 elements, float64 only 5
    assert len(plan_buckets([10, 10], 2, 40, 100)) == 1
    assert [b.members for b in plan_buckets([4, 4], 8, 40, 100)] == [(0,), (1,)]


def test_members_names_are_kept():
    plan = plan_buckets([2, 2], 4, 400, 100, members=[7, 3])
    assert plan[0].members == (7, 3) and plan[0].slices() == [(7, 0, 2), (3, 2, 4)]


@pytest.mark.parametrize("kwargs, word", [({"buff_size": 0}, "buff_size"),
                                          ({"threshold": -1}, "threshold"),
                                          ({"itemsize": 2.5}, "itemsize"),
                                          ({"buff_size": True}, "buff_size")])
def test_bad_plan_arguments(kwargs, word):
    args = {"sizes": [1], "itemsize": 4, "buff_size": 40, "threshold": 10}
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"plan_buckets: {word}"):
        plan_buckets(**args)


def test_plan_invariants_hold_for_random_sizes():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.given(st.lists(st.integers(0, 40), max_size=30), st.integers(1, 64),
                      st.sampled_from([2, 4, 8]), st.integers(1, 50))
    def check(sizes, buff_size, itemsize, threshold):
        plan = plan_buckets(sizes, itemsize, buff_size, threshold)
        seen = sorted(m for b in plan for m in b.members)
        assert seen == list(range(len(sizes)))               # every tensor exactly once
        capacity = buff_size // itemsize
        for b in plan:
            assert b.members and b.size == sum(sizes[m] for m in b.members)
            assert list(b.members) == sorted(b.members)       # order kept inside a bucket
            if b.fused:
                assert b.size <= capacity
                assert all(sizes[m] < threshold for m in b.members)
            else:
                n = sizes[b.members[0]]
                assert len(b.members) == 1 and (n >= threshold or n > capacity)

    check()


# ---- packing --------------------------------------------------------------------------------
def test_pack_unpack_round_trip_restores_shapes_including_non_contiguous():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 6)).astype(np.float32)
    arrays = [rng.standard_normal((2, 3)).astype(np.float32), base.T, base[:, ::2], None,
              np.float32(rng.standard_normal()) * np.ones((), np.float32)]
    shapes = [a.shape if a is not None else (5,) for a in arrays]
    bucket = Bucket(range(5), [int(np.prod(s)) for s in shapes])
    flat = pack(bucket, arrays, np.full(bucket.size, np.nan, np.float32))
    assert bucket.offsets == (0, 6, 30, 42, 47) and bucket.size == 48
    restored = dict(unpack(bucket, flat, shapes))
    for pos, a in enumerate(arrays):
        expected = np.zeros(5, np.float32) if a is None else a
        assert restored[pos].shape == expected.shape
        np.testing.assert_array_equal(restored[pos], expected)
    assert np.shares_memory(restored[1], flat)     # views, not copies


def test_pack_scales_while_copying_and_zeroes_missing_gradients():
    arrays = [np.arange(6.0, dtype=np.float32).reshape(2, 3).T, None, np.ones(2, np.float32)]
    bucket = Bucket([0, 1, 2], [6, 4, 2])
    out = pack(bucket, arrays, np.full(12, np.nan, np.float32), scale=0.25)
    np.testing.assert_array_equal(out[:6], arrays[0].ravel() * np.float32(0.25))
    np.testing.assert_array_equal(out[6:10], 0)
    np.testing.assert_array_equal(out[10:], 0.25)


def test_launch_allreduce_blocks_where_the_communicator_cannot_progress_alone():
    def refuse(*args, **kwargs):
        raise AssertionError("iallreduce used where the blocking call was asked for")

    def run(comm):
        comm.progresses_in_background = False      # as MPICommunicator says of itself
        comm.iallreduce = refuse
        out = np.empty(3)
        request = launch_allreduce(comm, np.full(3, comm.rank + 1.0), out)
        return request.wait().copy(), comm.comm_stats()["by_op"]["allreduce"]["calls"]

    for result, calls in run_ranks(2, run):
        np.testing.assert_array_equal(result, [3.0, 3.0, 3.0])
        assert calls == 1


def test_prescale_is_applied_once_to_packed_and_to_alone_buckets():
    spec = [((3,), np.float32), ((50,), np.float32)]     # one packed, one sent alone

    def run(comm):
        params = _params(spec)
        reducer = BucketedAllreduce(comm, buff_size=64)
        grads = [np.full(s, comm.rank + 1.0, d) for s, d in spec]
        out = {}
        for item in reducer.start(params, grads, threshold=40, prescale=0.5):
            out.update({pos: g.copy() for pos, g in reducer.finish(params, item, divisor=1)[1]})
        return out

    for out in run_ranks(2, run):
        np.testing.assert_array_equal(out[0], np.full(3, 1.5, np.float32))
        np.testing.assert_array_equal(out[1], np.full(50, 1.5, np.float32))


def test_fp16_casts_match_numpy():
    x = np.array([[1.0, -2.5e-3], [70000.0, 3.0]], np.float32)
    half = cast_to_half(np, x, np.empty(x.shape, np.float16), 0.25)
    np.testing.assert_array_equal(half, (x.astype(np.float64) * 0.25).astype(np.float16))
    back = cast_from_half(np, half, np.empty(x.shape, np.float32), 0.5)
    np.testing.assert_array_equal(back, half.astype(np.float32) / np.float32(0.5))
    back64 = cast_from_half(np, half, np.empty(x.shape, np.float64), 2.0)
    np.testing.assert_array_equal(back64, half.astype(np.float64) / 2.0)
    already = cast_to_half(np, half, np.empty(x.shape, np.float16), 2.0)   # fp16 input
    np.testing.assert_array_equal(already, half * np.float16(2.0))


# ---- collectives ----------------------------------------------------------------------------
def _params(shapes_dtypes):
    return [ms.Parameter(ms.Tensor(np.zeros(s, d)), name=f"p{i}")
            for i, (s, d) in enumerate(shapes_dtypes)]


def test_bucketed_allreduce_sums_per_dtype_group_and_divides():
    spec = [((3,), np.float32), ((2, 2), np.float64), ((50,), np.float32), ((1,), np.float64)]

    def run(comm):
        params = _params(spec)
        reducer = BucketedAllreduce(comm, buff_size=64)
        grads = [np.full(s, comm.rank + 1.0 + i, d) for i, (s, d) in enumerate(spec)]
        plan = reducer.plan(params, threshold=40)
        pending = reducer.start(params, grads, threshold=40)
        out = {}
        for item in pending:
            out.update({pos: g.copy() for pos, g in reducer.finish(params, item, divisor=3)[1]})
        return plan, out

    results = run_ranks(3, run)
    plan = results[0][0]
    assert {(b.members, str(dt)) for b, _, _, dt in plan} == \
        {((0,), "float32"), ((2,), "float32"), ((1, 3), "float64")}
    assert not [b for b, *_ in plan if b.members == (2,)][0].fused
    for _, out in results:
        for pos, (shape, dtype) in enumerate(spec):
            expected = sum(np.full(shape, r + 1.0 + pos, dtype) for r in range(3)) / dtype(3)
            assert out[pos].dtype == dtype
            np.testing.assert_array_equal(out[pos], expected)


def test_bucketed_allreduce_half_wire_and_clip():
    def run(comm):
        params = _params([((4,), np.float32)])
        reducer = BucketedAllreduce(comm, buff_size=1024)
        g = np.array([1.0, -300.0, 0.5, 1000.0], np.float32) * (comm.rank + 1)
        pending = reducer.start(params, [g], 100, half=True, prescale=0.5, clip=100.0)
        assert [b.dtype for b in reducer._buffers.values()] == [np.float16]   # the wire
        flat, views = reducer.finish(params, pending[0], divisor=1.0)
        return flat.copy(), comm.comm_stats()["bytes_sent"]

    results = run_ranks(2, run)
    clipped = [np.clip(np.array([1.0, -300.0, 0.5, 1000.0]) * k * 0.5, -100, 100) for k in (1, 2)]
    np.testing.assert_allclose(results[0][0], clipped[0] + clipped[1], rtol=1e-3)
    assert results[0][1] == 4 * 2          # four float16 values


def test_fused_broadcast_copies_root_values_in_place():
    def run(comm):
        dev = ms.get_device("CPU")
        arrays = [np.full((2, 3), comm.rank, np.float32), np.full(4, comm.rank * 10.0),
                  np.full(1, comm.rank + 0.5, np.float32)]
        fused_broadcast(comm, [(dev, a) for a in arrays], root=1)
        return arrays, comm.comm_stats()["by_op"]["broadcast"]["calls"]

    for arrays, calls in run_ranks(3, run):
        assert calls == 2                   # one per dtype
        np.testing.assert_array_equal(arrays[0], np.ones((2, 3)))
        np.testing.assert_array_equal(arrays[1], np.full(4, 10.0))
        np.testing.assert_array_equal(arrays[2], np.full(1, 1.5))


# ---- the one bucket path ----------------------------------------------------------------------
def test_the_float16_clip_bound_is_rounded_and_never_past_the_largest_half():
    assert wire_bound(None) is None
    assert wire_bound(1e9) == 65504.0 == float(np.finfo(np.float16).max)
    assert wire_bound(0.1) == float(np.float16(0.1))
    params = _params([((3,), np.float32)])
    exchange = BucketExchange(BucketedAllreduce(None, 64), params, 100, half=True, clip=1e9,
                              launch=False)
    slot = exchange.put(0, np.array([1e30, -1e30, 2.0], np.float32))
    np.testing.assert_array_equal(slot, np.array([65504.0, -65504.0, 2.0], np.float16))


def test_the_grad_reducer_and_dist_opt_take_the_one_exchange(monkeypatch):
    """DistributedGradReducer (hence TrainOneStepCell) and DistOpt, packing or filling during
    backward, all launch their dense buckets through ``BucketExchange``."""
    from minitorch_dist import nn
    from minitorch_dist.parallel import DistOpt, DistributedGradReducer
    launched = []
    original = BucketExchange._launch
    monkeypatch.setattr(BucketExchange, "_launch", lambda self, index, grads: launched.append(
        self.owner) or original(self, index, grads))

    def run(comm):
        w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
        DistributedGradReducer([w], communicator=comm)((ms.Tensor(np.ones(3, np.float32)),))
        opt = DistOpt(nn.SGD([w], 0.1), communicator=comm)
        opt.step([np.ones(3, np.float32)])
        opt((w * w).sum())
    run_ranks(2, run)
    assert sorted(launched) == ["DistOpt"] * 4 + ["DistributedGradReducer"] * 2


def test_fresh_buffers_are_new_memory_each_call_and_kept_ones_are_reused():
    spec = [((3,), np.float32), ((2,), np.float32)]

    def run(comm):
        params = _params(spec)
        reducer = BucketedAllreduce(comm, buff_size=64)
        grads = [np.ones(s, d) for s, d in spec]
        flats = []
        for fresh in (True, True, False, False):
            (item,) = reducer.start(params, grads, threshold=40, fresh=fresh)
            flats.append(reducer.finish(params, item, divisor=1)[0])
        return flats

    for a, b, c, d in run_ranks(2, run):
        assert not np.shares_memory(a, b) and c is d
        np.testing.assert_array_equal(a, np.full(5, 2.0, np.float32))


def test_packing_and_filling_during_backward_write_the_same_bits():
    """``start`` (arrays handed in) and a ``BucketFill`` observer (gradients as they become
    final) fill the same slots: the same wire bytes, fp32 and fp16 with clipping."""
    from minitorch_dist.autograd import run_backward
    from minitorch_dist.parallel.data_parallel.bucket_fill import BucketFill
    rng = np.random.default_rng(3)
    params = [ms.Parameter(ms.Tensor(rng.standard_normal(s).astype(np.float32)), name=f"q{i}")
              for i, s in enumerate([(4, 3), (3,), (3, 2)])]
    x = ms.Tensor(rng.standard_normal((5, 4)).astype(np.float32))

    def loss():
        h = ms.ops.matmul(x, params[0]) + params[1]
        return (ms.ops.matmul(h.tanh(), params[2]) ** 2).sum() * 300.0

    grads = run_backward([loss()], [np.ones((), np.float32)], targets=params)
    for half, clip in ((False, None), (True, 50.0)):
        fused = BucketedAllreduce(None, buff_size=256)
        packed = BucketExchange(fused, params, 100, half, 0.5, clip, launch=False, tag="a")
        packed.complete(grads)
        filled = BucketExchange(fused, params, 100, half, 0.5, clip, launch=False, tag="b")
        run_backward([loss()], [np.ones((), np.float32)], targets=params,
                     observer=BucketFill(filled))
        assert filled.filled == {0, 1, 2}
        for a, b in zip(packed.buffers, filled.buffers):
            assert a.tobytes() == b.tobytes()


def test_under_compute_slots_buckets_go_out_after_backward_not_during_it(monkeypatch):
    """With a wait guard installed (``--compute-slots``), a full bucket is not launched from
    ``put`` (the launch would wait for other ranks mid-backward, activations held): every
    bucket goes out in ``launch_rest``, in the same order."""
    import contextlib
    from minitorch_dist.communication import hooks
    params = _params([((3,), np.float32), ((2,), np.float32)])
    launched = []
    original = BucketExchange._launch
    monkeypatch.setattr(BucketExchange, "_launch", lambda self, index, grads: launched.append(
        index) or original(self, index, grads))

    class Guard:
        def released(self):
            return contextlib.nullcontext()

    def run(comm):
        exchange = BucketExchange(BucketedAllreduce(comm, 16), params, 100)
        exchange.put(0, np.ones(3, np.float32))
        exchange.put(1, np.ones(2, np.float32))
        during = len(launched)
        pending = exchange.launch_rest([None, None])
        for *_, request, _ in pending:
            request.wait()
        return during

    for guard in (None, Guard()):
        launched.clear()
        hooks.set_wait_guard(guard)
        try:
            during = run_ranks(1, run)[0]
        finally:
            hooks.set_wait_guard(None)
        assert (during == 0) == (guard is not None) and len(launched) >= 1
