"""NCCL unique ids travel as 128 int8 values and come back in the form the local CuPy takes:
a tuple of ints (CuPy < 14) or bytes (CuPy 14, where a tuple made NCCLCommunicator fail)."""
import numpy as np

from minitorch_dist.communication.nccl import _id_array, _id_like


def test_ids_round_trip_between_tuple_and_bytes_forms():
    as_tuple = tuple(range(-64, 64))
    as_bytes = np.arange(-64, 64, dtype=np.int8).tobytes()
    assert _id_like(_id_array(as_tuple), (0,)) == as_tuple
    assert _id_like(_id_array(as_bytes), b"") == as_bytes
    assert _id_like(_id_array(as_tuple), b"") == as_bytes       # rank 0 old CuPy, rank 1 new
    assert _id_like(_id_array(as_bytes), (0,)) == as_tuple
