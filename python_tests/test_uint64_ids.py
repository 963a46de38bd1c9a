"""uint64 ids past int64's range are reported as themselves (not as a wrapped negative
number), by the kernels' index check and by datasets."""
import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.kernels import _checks


def test_a_huge_uint64_id_is_reported_as_itself():
    with pytest.raises(IndexError, match="id 18446744073709551615 is out of range"):
        _checks.index_array(np.array([3, 2 ** 64 - 1], np.uint64))
    assert _checks.index_array(np.array([3], np.uint64)).dtype == np.int64
    data = ds.NumpySlicesDataset({"id": np.array([1, 2 ** 64 - 1], np.uint64)}, shuffle=False)
    with pytest.raises(ValueError, match="uint64 value 18446744073709551615"):
        list(data)
