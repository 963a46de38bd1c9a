"""Optimizer arguments that used to be accepted silently: a momentum of one or more, and a
negative or non-finite learning rate for the sparse kernels."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import kernels, nn
from minitorch_dist.kernels import _checks


@pytest.mark.parametrize("make", [
    lambda w: nn.Momentum([w], 0.1, momentum=5.0),
    lambda w: nn.Momentum([w], 0.1, momentum=1.0),
    lambda w: nn.SGD([w], 0.1, momentum=1.5),
])
def test_momentum_of_one_or_more_is_refused(make):
    w = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="w")
    with pytest.raises(ValueError, match=r"momentum must lie in \[0, 1\)"):
        optimizer = make(w)
        optimizer((ms.Tensor(np.ones(2, np.float32)),))        # Momentum checks at its step


def test_momentum_below_one_still_works():
    w = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="w")
    nn.Momentum([w], 0.1, momentum=0.99)((ms.Tensor(np.ones(2, np.float32)),))
    np.testing.assert_allclose(w.asnumpy(), 0.9)


@pytest.mark.parametrize("lr", [-0.1, float("nan"), float("inf")])
def test_sparse_sgd_refuses_a_bad_learning_rate(lr):
    table = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError, match="lr must be a finite number >= 0"):
        kernels.native.sparse_sgd(table, np.array([1]), np.ones((1, 2), np.float32), lr) \
            if kernels.HAVE_CPP else _checks.learning_rate(lr)
    assert (table == 1).all()
