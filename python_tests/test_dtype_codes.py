"""The one dtype-code table (``backend.dtypes``) and its three users on the wire: collective
signatures (``communication.desync``), DistOpt's parameter-list check and the pipeline's
Send/Recv header."""
import numpy as np
import pytest

from minitorch_dist.backend import dtypes
from minitorch_dist.backend.dtypes import (UNKNOWN_CODE, WIRE_DTYPES, dtype_code,
                                           dtype_from_code)
from minitorch_dist.backend.device import get_device
from minitorch_dist.communication import desync
from minitorch_dist.parallel.comm import p2p
from minitorch_dist.parallel.data_parallel import dist_opt


@pytest.mark.parametrize("dtype", WIRE_DTYPES, ids=str)
def test_every_wire_dtype_round_trips(dtype):
    code = dtype_code(dtype)
    assert dtype_from_code(code) == dtype
    assert dtype_code(str(dtype)) == code == dtype_code(dtype.type)


def test_codes_are_dense_and_distinct_and_cover_the_supported_dtypes():
    codes = [dtype_code(d) for d in WIRE_DTYPES]
    assert codes == list(range(len(WIRE_DTYPES)))
    assert set(dtypes.SUPPORTED) <= set(WIRE_DTYPES)
    assert UNKNOWN_CODE not in codes


def test_a_dtype_outside_the_table_raises_or_gives_the_default():
    odd = np.dtype([("a", np.int32), ("b", np.float32)])
    with pytest.raises(TypeError, match="has no wire code; expected one of"):
        dtype_code(odd)
    assert dtype_code(odd, default=UNKNOWN_CODE) == UNKNOWN_CODE
    assert dtype_code(None, default=-1) == -1        # None is no dtype (numpy: float64)
    with pytest.raises(TypeError):
        dtype_code(None)


def test_an_unknown_code_raises_or_gives_the_default():
    for code in (-1, len(WIRE_DTYPES), UNKNOWN_CODE):
        with pytest.raises(ValueError, match=f"unknown dtype wire code {code}"):
            dtype_from_code(code)
        assert dtype_from_code(code, default="other") == "other"


def test_desync_signatures_use_the_table_and_name_other_dtypes():
    vector = desync.signature("allreduce", 1, np.zeros(3, np.float16), "sum")
    assert vector[3] == dtype_code(np.float16)
    odd = np.zeros(2, np.dtype("V4"))
    vector = desync.signature("broadcast", 1, odd, 0)
    assert vector[3] == UNKNOWN_CODE
    assert desync.describe(vector) == "broadcast #1 (other dtype, shape (2,), root 0)"
    assert desync.signature("barrier", 1)[3] == -1          # no array at all


@pytest.mark.parametrize("dtype", WIRE_DTYPES, ids=str)
def test_the_pipeline_header_carries_every_wire_dtype(dtype):
    cpu = get_device("CPU")
    array = np.zeros((2, 3), dtype)
    header = p2p.pack_header([array], [cpu], "a test border")
    ((shape, got, device),) = p2p.unpack_header(header)
    assert (shape, got, device) == ((2, 3), dtype, cpu)


def test_the_pipeline_header_refuses_a_dtype_outside_the_table():
    cpu = get_device("CPU")
    with pytest.raises(TypeError, match=r"dtype \|V4 .* cannot cross a test border .*'float32'"):
        p2p.pack_header([np.zeros(2, np.dtype("V4"))], [cpu], "a test border")


class _Param:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_dist_opt_model_signature_round_trips_and_names_other_dtypes():
    params = [_Param((2, 3), "float32"), _Param((4,), "int64"), _Param((1,), "V4")]
    requested, specs = dist_opt._decode(dist_opt._signature(params, 2))
    assert requested == 2
    assert specs == [((2, 3), "float32"), ((4,), "int64"), ((1,), "other")]
