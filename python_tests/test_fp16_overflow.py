"""Float16 overflow. fp16 DistOpt without loss scaling raises before any
parameter changes (never NaN weights); dynamic loss scaling that keeps skipping at its floor
warns and says what to do."""
import warnings

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt
from minitorch_dist.parallel.data_parallel.loss_scale import DynamicLossScale, LossScaleFloorWarning


def _step(comm, value, **options):
    w = ms.Parameter(ms.Tensor(np.ones(4, np.float32)), name="w")
    opt = DistOpt(nn.SGD([w], 0.1), communicator=comm, **options)
    grad = np.full(4, value, np.float32)
    try:
        applied = opt.step((ms.Tensor(grad),), "fp16")
    except FloatingPointError as exc:
        return "raised", str(exc), w.asnumpy().tolist()
    return applied, "", w.asnumpy().tolist()


def test_fp16_overflow_without_loss_scaling_raises_and_keeps_the_weights():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # NumPy's cast warning
        results = run_ranks(2, lambda comm: _step(comm, 2.0e5), timeout=20)
    for outcome, message, weights in results:
        assert outcome == "raised"
        assert "overflowed float16" in message and "loss_scale='dynamic'" in message
        assert weights == [1.0, 1.0, 1.0, 1.0]               # unchanged, not NaN


def test_fp16_below_the_limit_still_trains():
    for applied, _, weights in run_ranks(2, lambda comm: _step(comm, 1.0e4), timeout=20):
        assert applied is True
        np.testing.assert_allclose(weights, 1.0 - 0.1 * 1.0e4, rtol=1e-3)


def test_fp16_overflow_with_dynamic_scaling_is_skipped():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        results = run_ranks(2, lambda comm: _step(comm, 2.0e5, loss_scale="dynamic"), timeout=20)
    for applied, _, weights in results:
        assert applied is False and weights == [1.0, 1.0, 1.0, 1.0]


def test_skipping_at_the_floor_warns_after_patience_steps():
    scale = DynamicLossScale(init_scale=4.0, min_scale=1.0, floor_patience=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):                     # 4 -> 2 -> 1: not yet at the floor
            scale.update(False)
        assert not caught
        for _ in range(5):
            scale.update(False)
    floor = [w for w in caught if issubclass(w.category, LossScaleFloorWarning)]
    assert len(floor) == 1
    text = str(floor[0].message)
    assert "5 steps in a row were skipped at the smallest loss scale 1.0" in text
    assert "learning rate" in text and "dist_option='fp32'" in text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scale.update(True)                     # a good step ends the streak
        for _ in range(4):
            scale.update(False)
    assert not caught and scale.skips_at_floor == 4


def test_floor_patience_must_be_a_positive_int():
    with pytest.raises(ValueError, match="floor_patience"):
        DynamicLossScale(floor_patience=0)


def test_dist_opt_at_the_floor_warns_on_every_rank():
    def body(comm):
        w = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 0.1), communicator=comm,
                      loss_scale=DynamicLossScale(init_scale=1.0, floor_patience=3))
        for _ in range(3):
            opt.step((ms.Tensor(np.array([np.inf, 1.0], np.float32)),), "fp16")
        return opt.loss_scale.skips_at_floor, w.asnumpy().tolist()
    with warnings.catch_warnings(record=True) as caught:     # one recorder for both threads
        warnings.simplefilter("always")
        results = run_ranks(2, body, timeout=20)
    for skips, weights in results:
        assert skips == 3 and weights == [1.0, 1.0]
    assert sum(issubclass(w.category, LossScaleFloorWarning) for w in caught) == 2
