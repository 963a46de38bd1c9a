"""Sparse gradient selection and exchange (``minitorch_dist.parallel.data_parallel.sparsification``)."""
import math

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.data_parallel.buckets import Bucket
from minitorch_dist.parallel.data_parallel.sparsification import (ErrorFeedback, check_spars, index_dtype,
                                                    select_threshold, select_topk,
                                                    sparse_allreduce, topk_count)


def _largest(values, k):
    return np.sort(np.argsort(-np.abs(values), kind="stable")[:k])


def test_topk_picks_true_largest_magnitudes_below_one_and_negative():
    # SINGA compared int(|x|): every entry here would tie at 0 and the "top-3" would be 0, 1, 2
    g = np.array([0.01, 0.02, -0.03, 0.9, -0.95, 0.5, -0.04], np.float32)
    assert select_topk(np, g, 3).tolist() == [3, 4, 5]
    rng = np.random.default_rng(1)
    for n, k in ((100, 1), (100, 7), (257, 128), (10, 10)):
        x = (rng.standard_normal(n) * 0.1).astype(np.float32)
        np.testing.assert_array_equal(select_topk(np, x, k), _largest(x, k))


def test_threshold_selects_at_or_above_and_caps_to_the_largest():
    g = np.array([0.5, -0.2, 0.1, -0.7, 0.2, 0.05], np.float32)
    assert select_threshold(np, g, 0.2, cap=10).tolist() == [0, 1, 3, 4]
    assert select_threshold(np, g, 0.2, cap=2).tolist() == [0, 3]
    assert select_threshold(np, g, 5.0, cap=2).tolist() == []


@pytest.mark.parametrize("spars, n, k", [(0.01, 1000, 10), (0.05, 10, 1), (1e-9, 10, 1),
                                         (1.0, 7, 7), (0.25, 6, 2), (0.5, 0, 0)])
def test_topk_count(spars, n, k):
    assert topk_count(spars, n) == k


@pytest.mark.parametrize("spars, topK, words", [
    (0.0, True, "0 < spars <= 1"), (1.5, True, "0 < spars <= 1"), (-0.1, True, "0 < spars <= 1"),
    (0.0, False, "spars > 0"), (-1.0, False, "spars > 0"), (math.inf, False, "spars > 0"),
    (math.nan, True, "0 < spars <= 1")])
def test_check_spars_names_value_and_range(spars, topK, words):
    with pytest.raises(ValueError) as info:
        check_spars(spars, topK)
    assert f"spars={spars!r}" in str(info.value) and words in str(info.value)


def test_check_spars_rejects_non_numbers_and_accepts_valid():
    with pytest.raises(ValueError, match="must be a number"):
        check_spars("0.1", True)
    assert check_spars(1, True) == 1.0 and check_spars(3, False) == 3.0


def test_index_dtype():
    assert index_dtype(10) == np.int32 and index_dtype(2 ** 31) == np.int64


def test_sparse_allreduce_scatter_adds_every_rank_with_duplicates():
    def run(comm):
        indices = np.array([0, 3], np.int32) if comm.rank == 0 else np.array([3], np.int32)
        values = np.array([1.0, 2.0], np.float32) if comm.rank == 0 else np.array([5.0], np.float32)
        if comm.rank == 2:
            indices, values = np.array([], np.int32), np.array([], np.float32)
        out = np.full(5, 99.0, np.float32)
        counts = sparse_allreduce(comm, np, indices, values, out)
        return out, counts

    for out, counts in run_ranks(3, run):
        assert counts == [2, 1, 0]
        np.testing.assert_array_equal(out, [1.0, 0, 0, 7.0, 0])


def test_error_feedback_is_per_parameter_and_round_trips():
    params = [ms.Parameter(ms.Tensor(np.zeros((2, 2), np.float32)), name="a"),
              ms.Parameter(ms.Tensor(np.zeros(3, np.float32)), name="b")]
    feedback = ErrorFeedback(params)
    assert feedback.peek(0) is None
    bucket = Bucket([1, 0], [3, 4])
    flat = np.arange(7, dtype=np.float32)
    feedback.keep(bucket, flat)
    np.testing.assert_array_equal(feedback.peek(1), [0, 1, 2])
    np.testing.assert_array_equal(feedback.peek(0), [[3, 4], [5, 6]])
    again = np.ones(7, np.float32)
    feedback.add_into(bucket, again)
    np.testing.assert_array_equal(again, np.arange(7) + 1)
    feedback.reset()
    assert feedback.peek(0) is None
