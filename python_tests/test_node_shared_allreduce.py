"""Allreduce through buffers the MPI ranks of one machine share (``node_shared.py``): the
buffers themselves in one process, and real MPI jobs where the shared path must give MPI's
sums (its bits with 2 ranks), fall back to MPI on every rank alike, and carry DistOpt's
buckets to the same result as one process on the full batch."""
import gc
import os
import sys

import numpy as np
import pytest

from minitorch_dist.communication import LocalCommunicator, node_shared
from minitorch_dist.communication.node_shared import SharedBuffers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_scripts"))
from mpi_jobs import SCRIPTS, launch, needs_mpi  # noqa: E402

needs_shm = pytest.mark.skipif(not os.path.isdir(node_shared.SHARED_DIR),
                               reason="no /dev/shm on this machine")


@needs_shm
def test_a_buffer_lives_in_a_file_of_its_own_until_dropped():
    buffers = SharedBuffers(0, 2)
    array = buffers.empty(node_shared.MIN_BYTES // 4, np.float32)
    token, nbytes, path = buffers._owned[array.ctypes.data]
    assert os.path.exists(path) and nbytes == array.nbytes
    assert buffers.header(array).tolist() == [1, os.getpid(), token, array.nbytes]
    array[:] = 3.0                                   # the reserved space is writable
    del array
    gc.collect()
    assert not os.path.exists(path) and not buffers._owned


def test_what_is_not_a_shared_buffer_says_so_in_its_header():
    buffers = SharedBuffers(0, 2)
    plain = np.zeros(node_shared.MIN_BYTES, np.float32)
    assert buffers.header(plain)[0] == 0
    assert buffers.header(None)[0] == 0               # this rank's call is not in place
    small = buffers.empty(16, np.float32)             # too small to be worth a file
    halves = buffers.empty(node_shared.MIN_BYTES, np.float16)   # MPI's own op for these
    assert not buffers._owned and buffers.header(small)[0] == 0 and halves.dtype == np.float16
    assert not node_shared.worth_sharing(small)
    assert node_shared.worth_sharing(plain)


@needs_shm
def test_a_part_of_a_buffer_is_not_the_buffer():
    buffers = SharedBuffers(0, 2)
    array = buffers.empty(node_shared.MIN_BYTES, np.float32)
    assert buffers.header(array[: len(array) // 2])[0] == 0
    assert buffers.header(array.reshape(2, -1))[0] == 0


def test_the_switch_is_read_strictly(monkeypatch):
    monkeypatch.setenv("MINITORCH_DIST_SHARED_ALLREDUCE", "0")
    assert not node_shared.enabled()
    monkeypatch.setenv("MINITORCH_DIST_SHARED_ALLREDUCE", "on")
    assert node_shared.enabled()
    monkeypatch.setenv("MINITORCH_DIST_SHARED_ALLREDUCE", "maybe")
    with pytest.raises(ValueError, match="MINITORCH_DIST_SHARED_ALLREDUCE must be 0 or 1"):
        node_shared.enabled()


def test_other_communicators_hand_out_plain_buffers():
    comm = LocalCommunicator.create(1)[0]
    buffer = comm.allreduce_buffer(1 << 16, np.float32)
    assert buffer.shape == (1 << 16,) and buffer.dtype == np.float32 and buffer.base is None


# ---- real MPI ranks -------------------------------------------------------------------------
@pytest.mark.mpi
@needs_mpi
@needs_shm
@pytest.mark.parametrize("n", [2, 3])
def test_shared_allreduce_on_mpi_ranks(n):
    done, _ = launch(n, os.path.join(SCRIPTS, "shared_allreduce_check.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.split("\n")[:-1]) == sorted(f"OK rank {r}" for r in range(n))


@pytest.mark.mpi
@needs_mpi
def test_switched_off_nothing_is_shared():
    done, _ = launch(2, os.path.join(SCRIPTS, "shared_allreduce_check.py"), "off",
                     env={"MINITORCH_DIST_SHARED_ALLREDUCE": "0"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.mpi
@needs_mpi
@needs_shm
def test_dist_opt_through_shared_buckets_matches_one_process():
    """A hidden width of 2048 makes the bucket large enough for the shared path; 3 ranks
    sum in another order than one process, within the check's 1e-5."""
    done, _ = launch(3, os.path.join(SCRIPTS, "dist_opt_check.py"), "--hidden", "2048",
                     "--buff-size", "4194304")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DIST_OPT_CHECK OK world=3" in done.stdout
