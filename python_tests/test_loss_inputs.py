"""Loss cells on unusual inputs: an empty batch is an error (not NaN) except under
``reduction="sum"``, and integer or boolean labels keep the loss and its gradient float32.
(Values against PyTorch: test_nn_loss.py.)"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn


@pytest.mark.parametrize("loss, labels", [
    (nn.MSELoss(), np.zeros((0, 3), np.float32)),
    (nn.L1Loss(), np.zeros((0, 3), np.float32)),
    (nn.BCEWithLogitsLoss(), np.zeros((0, 3), np.float32)),
    (nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), np.zeros(0, np.int32)),
    (nn.CrossEntropyLoss(), np.zeros(0, np.int64)),
])
def test_an_empty_batch_is_an_error_not_nan(loss, labels):
    with pytest.raises(ValueError, match=r"the batch is empty \(logits of shape \(0, 3\)\)"):
        loss(ms.Tensor(np.zeros((0, 3), np.float32)), ms.Tensor(labels))


def test_an_empty_batch_with_sum_is_zero():
    out = nn.MSELoss(reduction="sum")(ms.Tensor(np.zeros((0, 3), np.float32)),
                                      ms.Tensor(np.zeros((0, 3), np.float32)))
    assert float(out.asnumpy()) == 0.0


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.BCEWithLogitsLoss()])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_labels_keep_the_loss_float32(loss, dtype):
    logits = ms.Tensor(np.full((2, 3), 0.5, np.float32), requires_grad=True)
    out = loss(logits, ms.Tensor(np.ones((2, 3), dtype)))
    assert out.dtype == np.float32
    reference = loss(ms.Tensor(np.full((2, 3), 0.5, np.float32)),
                     ms.Tensor(np.ones((2, 3), np.float32)))
    assert float(out.asnumpy()) == float(reference.asnumpy())
    out.backward()
    assert logits.grad.dtype == np.float32
