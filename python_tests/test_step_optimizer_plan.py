"""The fused optimizer update checks the parameter side once (nn/optim/fused.py's ``_Plan``)
and keeps that plan while every array it looked at is the same object: each case here changes
one of them and checks that the update still gives the per-parameter NumPy update's bits."""
import gc
import weakref

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.nn.optim import fused

needs_fused = pytest.mark.skipif(fused.native_kernels() is None, reason="C++ kernels not built")
pytestmark = pytest.mark.host_default        # the plan fuses host arrays


class _PerParameter(nn.SGD):
    """The NumPy twin: the same optimizer, one parameter at a time."""

    def _fused_ready(self):
        return False


def _params(seed=0, shapes=((4, 3), (3,), (5, 2))):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(ms.Tensor(rng.normal(size=s).astype(np.float32)), name=f"p{i}")
            for i, s in enumerate(shapes)]


def _grads(params, seed):
    rng = np.random.default_rng(seed)
    return tuple(ms.Tensor(rng.normal(size=p.shape).astype(p.asnumpy().dtype)) for p in params)


def _pair(**options):
    """The fused optimizer and its per-parameter twin, on equal copies of the parameters."""
    a, b = _params(), _params()
    return a, nn.SGD(a, 0.1, **options), b, _PerParameter(b, 0.1, **options)


def _step_both(a, opt_a, b, opt_b, seed, change=None):
    grads = _grads(a, seed)
    if change is not None:
        grads = change(grads)
    opt_a(grads)
    opt_b(grads)
    for x, y in zip(a, b):
        assert x.asnumpy().tobytes() == y.asnumpy().tobytes(), x.name


@needs_fused
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_the_plan_is_made_once_and_kept_while_nothing_changes(momentum):
    a, opt_a, b, opt_b = _pair(momentum=momentum)
    _step_both(a, opt_a, b, opt_b, 1)
    plan = fused._plans[opt_a]
    for seed in (2, 3):
        _step_both(a, opt_a, b, opt_b, seed)
    assert fused._plans[opt_a] is plan
    assert sum(len(batch[0]) for batch in plan.batches.values()) == 3


@needs_fused
def test_a_parameter_given_a_new_array_makes_a_new_plan():
    a, opt_a, b, opt_b = _pair()
    _step_both(a, opt_a, b, opt_b, 1)
    plan = fused._plans[opt_a]
    for params in (a, b):     # a new, strided array: the kernel cannot take it
        params[0].data = np.asfortranarray(params[0].data * 2)
    _step_both(a, opt_a, b, opt_b, 2)
    assert fused._plans[opt_a] is not plan
    assert [len(batch[0]) for batch in fused._plans[opt_a].batches.values()] == [2]
    for params in (a, b):     # and a contiguous one again: fused again
        params[0].data = np.ascontiguousarray(params[0].data)
    _step_both(a, opt_a, b, opt_b, 3)
    assert [len(batch[0]) for batch in fused._plans[opt_a].batches.values()] == [3]


@needs_fused
def test_a_new_dtype_or_a_new_state_column_makes_a_new_plan():
    a, opt_a, b, opt_b = _pair()
    _step_both(a, opt_a, b, opt_b, 1)
    for params in (a, b):
        params[1].data = params[1].data.astype(np.float64)
    _step_both(a, opt_a, b, opt_b, 2)
    assert sorted(dtype.name for _, dtype in fused._plans[opt_a].batches) == \
        ["float32", "float64"]
    plan = fused._plans[opt_a]
    for opt in (opt_a, opt_b):
        opt._add_slots("extra")
    _step_both(a, opt_a, b, opt_b, 3)
    assert fused._plans[opt_a] is not plan


@needs_fused
def test_a_state_of_another_dtype_than_its_parameter_is_left_to_the_numpy_path():
    a, opt_a, b, opt_b = _pair(momentum=0.9)
    _step_both(a, opt_a, b, opt_b, 1)
    for params in (a, b):     # the moment stays float32
        params[1].data = params[1].data.astype(np.float64)
    _step_both(a, opt_a, b, opt_b, 2)
    assert [len(batch[0]) for batch in fused._plans[opt_a].batches.values()] == [2]


@needs_fused
def test_odd_gradients_go_one_parameter_at_a_time_and_the_rest_stays_fused():
    a, opt_a, b, opt_b = _pair()
    _step_both(a, opt_a, b, opt_b, 1, change=lambda g: (None,) + g[1:])
    _step_both(a, opt_a, b, opt_b, 2, change=lambda g: (ms.Tensor(g[0].asnumpy().T.copy().T),)
               + g[1:])                                  # a strided gradient
    _step_both(a, opt_a, b, opt_b, 3, change=lambda g: tuple(x.asnumpy() for x in g))  # arrays
    with pytest.raises(ValueError, match="gradient 0 has shape"):
        opt_a((ms.Tensor(np.zeros((2, 2), np.float32)),) + _grads(a, 4)[1:])


@needs_fused
def test_the_plan_does_not_keep_a_dropped_array_alive():
    a, opt_a, _, _ = _pair()
    opt_a(_grads(a, 1))
    old = weakref.ref(a[0].data)
    a[0].data = a[0].data.copy()
    gc.collect()
    assert old() is None


# ---- the placement report's rows, counted per plan batch and settled when read
def _rows():
    return [(r["name"], r["calls"], r["bytes"]) for r in ms.placement_report().updates]


@needs_fused
def test_a_fused_step_adds_no_report_rows_until_the_report_is_read():
    from minitorch_dist import placement
    a, opt_a, _, _ = _pair()
    ms.reset_placement_stats()
    for seed in (1, 2, 3):
        opt_a(_grads(a, seed))
    assert placement._updates == {}         # counted on the plan, not per parameter
    assert _rows() == [("SGD.p0", 3, 3 * 48), ("SGD.p1", 3, 3 * 12), ("SGD.p2", 3, 3 * 40)]
    opt_a(_grads(a, 4))
    assert _rows() == [("SGD.p0", 4, 4 * 48), ("SGD.p1", 4, 4 * 12), ("SGD.p2", 4, 4 * 40)]


@needs_fused
def test_rows_recorded_at_once_come_after_the_fused_calls_before_them():
    from minitorch_dist.placement import record_update
    a, opt_a, _, _ = _pair()
    ms.reset_placement_stats()
    opt_a(_grads(a, 1))
    record_update("Other.x", "CPU", 0.0, 8)
    record_update("SGD.p1", "CPU", 0.0, 12)        # the same name adds up with the fused calls
    opt_a(_grads(a, 2))
    assert _rows() == [("SGD.p0", 2, 96), ("SGD.p1", 3, 36), ("SGD.p2", 2, 80), ("Other.x", 1, 8)]


@needs_fused
def test_reset_forgets_the_calls_counted_on_a_plan():
    a, opt_a, _, _ = _pair()
    opt_a(_grads(a, 1))
    ms.reset_placement_stats()
    assert _rows() == []
    opt_a(_grads(a, 2))
    assert _rows() == [("SGD.p0", 1, 48), ("SGD.p1", 1, 12), ("SGD.p2", 1, 40)]


@needs_fused
def test_a_renamed_parameter_makes_a_new_plan_and_reports_under_its_new_name():
    a, opt_a, b, opt_b = _pair()
    ms.reset_placement_stats()
    _step_both(a, opt_a, b, opt_b, 1)
    plan = fused._plans[opt_a]
    a[1].name = "renamed"
    _step_both(a, opt_a, b, opt_b, 2)
    assert fused._plans[opt_a] is not plan
    rows = [r for r in _rows() if r[0].startswith("SGD.")]     # the twin's are _PerParameter's
    assert rows == [("SGD.p0", 2, 96), ("SGD.p1", 1, 12), ("SGD.p2", 2, 80), ("SGD.renamed", 1, 12)]


@needs_fused
def test_a_parameter_named_later_is_reported_under_its_name():
    params = [nn.Parameter(ms.Tensor(np.ones((2, 2), np.float32)))]     # no name yet
    opt = nn.SGD(params, 0.1)
    ms.reset_placement_stats()
    opt((ms.Tensor(np.ones((2, 2), np.float32)),))
    params[0].name = "late"
    opt((ms.Tensor(np.ones((2, 2), np.float32)),))
    assert ("SGD.late", 1, 16) in _rows()
