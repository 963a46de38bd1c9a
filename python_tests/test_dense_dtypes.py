"""``nn.Dense`` and the dtype of its input (issue 28 item 8): an integer input is refused,
as MindSpore's MatMul refuses operands of different types, instead of coming out float64."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_an_integer_input_is_refused_naming_both_dtypes(dtype):
    dense = nn.Dense(3, 2)
    with pytest.raises(TypeError, match=r"nn\.Dense: the input has dtype .* but the weight "
                                        r"is float32.*astype\(ms\.float32\)"):
        dense(ms.Tensor(np.ones((1, 3), dtype)))


def test_a_cast_input_gives_float32():
    dense = nn.Dense(3, 2, weight_init="ones", bias_init="zeros")
    out = dense(ms.Tensor(np.array([[1, 2, 3]], np.int64)).astype(ms.float32))
    assert out.dtype == ms.float32
    assert out.asnumpy().tolist() == [[6.0, 6.0]]


def test_float_inputs_still_run():
    dense = nn.Dense(3, 2)
    assert dense(ms.Tensor(np.ones((2, 3), np.float32))).dtype == ms.float32
