"""Real multi-process runs: MPI ranks through ``python -m minitorch_dist.run``, the TCP
multiprocessing path (SINGA's ``python train.py N`` launch), and NCCL on a GPU.

Every subprocess has a timeout; failure tests assert the job ended well within it.
"""
import multiprocessing
import os
import socket
import sys
import threading
import time

import numpy as np
import pytest

from minitorch_dist.communication import TCPCommunicator, UniqueId

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "python_tests", "mpi_scripts")
sys.path.insert(0, SCRIPTS)
from collective_checks import tcp_child  # noqa: E402

from mpi_jobs import LAUNCH_TIMEOUT, launch, needs_mpi  # noqa: E402


def launch_script(n, script, *args, launcher_timeout=LAUNCH_TIMEOUT):
    """Run ``script`` on ``n`` ranks through the launcher; (completed process, seconds)."""
    return launch(n, script, *args, launcher_timeout=launcher_timeout)


# ---- MPI ----------------------------------------------------------------------------------------
@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_on_mpi_ranks(n):
    done, _ = launch_script(n, os.path.join(SCRIPTS, "check_collectives.py"), str(n))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.split("\n")[:-1]) == sorted(f"OK rank {r}" for r in range(n))


@pytest.mark.mpi
@needs_mpi
def test_a_raising_rank_ends_the_launched_job_promptly():
    """The launcher runs ranks under ``python -m mpi4py``: no init() needed for the abort."""
    done, elapsed = launch_script(2, os.path.join(SCRIPTS, "raise_on_rank.py"), "--no-init",
                                  launcher_timeout=60)
    assert done.returncode not in (0, 124), done.stdout + done.stderr  # not our timeout kill
    assert "deliberate failure on rank 1" in done.stderr
    assert elapsed < 30


@pytest.mark.mpi
@needs_mpi
def test_init_abort_hook_ends_a_plain_mpiexec_job():
    """Under bare mpiexec (no mpi4py runner) init()'s excepthook must abort the job."""
    import subprocess
    from minitorch_dist.run import build_command, find_mpiexec, mpi_flavor, rank_environment
    mpiexec = find_mpiexec()
    command = build_command(2, [os.path.join(SCRIPTS, "raise_on_rank.py"), "--init"], mpiexec,
                            flavor=mpi_flavor(mpiexec), abort_on_error=False)
    env = rank_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "deliberate failure on rank 1" in done.stderr
    assert "unreachable" not in done.stdout
    assert time.monotonic() - start < 30



@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("user_btl", [None, "self,sm,tcp"])
def test_plain_mpiexec_on_one_machine_skips_the_ofi_probe_unless_btls_are_chosen(user_btl):
    """Open MPI's ofi BTL probe cost every rank about 1 s at start under a plain
    ``mpiexec -n 2`` here; the ranks of a one-machine job now leave it out, and a choice of
    BTLs the user made is kept."""
    import subprocess
    from minitorch_dist.run import find_mpiexec, mpi_flavor, rank_environment
    mpiexec = find_mpiexec()
    if mpi_flavor(mpiexec) != "openmpi":
        pytest.skip("Open MPI's BTLs")
    env = rank_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    env.pop("OMPI_MCA_btl", None)
    if user_btl:
        env["OMPI_MCA_btl"] = user_btl
    code = ("import os; from minitorch_dist.communication import init, get_rank; init(); "
            "print(get_rank(), os.environ.get('OMPI_MCA_btl'))")
    command = [mpiexec, "--oversubscribe", "-n", "2", sys.executable, "-c", code]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")[:2]) == [f"0 {user_btl or '^ofi'}",
                                                   f"1 {user_btl or '^ofi'}"], done.stdout


# ---- TCP: SINGA's multiprocessing launch -------------------------------------------------------
@pytest.mark.parametrize("size, method", [(2, "spawn"), (3, "fork")])
def test_multiprocessing_launch_with_unique_id(size, method):
    context = multiprocessing.get_context(method)
    results = context.Queue()
    unique_id = UniqueId()  # made in the parent, pickled to the children (spawn too)
    processes = [context.Process(target=tcp_child, args=(unique_id, rank, size, results))
                 for rank in range(size)]
    for process in processes:
        process.start()
    try:
        reports = sorted(results.get(timeout=60) for _ in processes)
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    assert reports == [(rank, "OK") for rank in range(size)], reports
    assert all(process.exitcode == 0 for process in processes)


def tcp_ranks(size, fn, timeout=10.0):
    """Run ``fn(comm)`` on ``size`` threads, each with its own TCPCommunicator."""
    unique_id, results, errors = UniqueId(), [None] * size, []

    def body(rank):
        try:
            comm = TCPCommunicator(unique_id, rank, size, timeout=timeout)
            try:
                results[rank] = fn(comm)
            finally:
                comm.close()
        except BaseException as exc:  # noqa: B902 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)
    assert not any(thread.is_alive() for thread in threads), "a TCP rank hung"
    if errors:
        raise errors[0]
    return results


def test_tcp_large_messages_both_ways_do_not_deadlock():
    big = 3_000_000  # 24 MB each way, far beyond the socket buffers

    def body(comm):
        other = 1 - comm.rank
        comm.isend(np.full(big, float(comm.rank)), other, tag=5)
        got = comm.recv(np.empty(big), other, tag=5)
        total = comm.allreduce(np.full(big, comm.rank + 1.0))
        return got[::big // 3].tolist(), float(total[-1])
    assert tcp_ranks(2, body) == [([1.0] * 3, 3.0), ([0.0] * 3, 3.0)]


def test_tcp_dead_peer_raises_instead_of_hanging():
    def body(comm):
        if comm.rank == 1:
            return None  # leaves: its sockets close
        start = time.monotonic()
        with pytest.raises(ConnectionError, match="rank 1 closed the connection"):
            comm.allreduce(np.zeros(4))
        return time.monotonic() - start
    assert tcp_ranks(2, body, timeout=20)[0] < 5


def test_tcp_silent_peer_times_out():
    def body(comm):
        if comm.rank == 0:
            with pytest.raises(TimeoutError, match="no data from rank 1"):
                comm.recv(np.empty(1), 1)
        else:
            time.sleep(1.5)  # alive but silent, longer than the timeout
    tcp_ranks(2, body, timeout=0.5)


def test_tcp_missing_peers_time_out():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="waiting for peers"):
        TCPCommunicator(UniqueId(), 0, 2, timeout=0.5)
    with pytest.raises(TimeoutError, match="connecting"):
        TCPCommunicator(UniqueId(), 1, 2, timeout=0.5)  # nobody listens on the id's port
    assert time.monotonic() - start < 5


def test_tcp_rejects_a_stranger_with_the_wrong_token():
    unique_id = UniqueId()
    outcome = {}

    def root():
        comm = TCPCommunicator(unique_id, 0, 2, timeout=10)
        outcome["sum"] = comm.allreduce(np.array([1.0]))[0]
        comm.close()
    thread = threading.Thread(target=root, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while True:  # the stranger connects first, with a token of the right length
        try:
            stranger = socket.create_connection(("127.0.0.1", unique_id.port), timeout=1)
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    stranger.sendall(b"0" * 32 + bytes(8))
    peer = TCPCommunicator(unique_id, 1, 2, timeout=10)
    assert peer.allreduce(np.array([2.0]))[0] == 3.0
    peer.close()
    stranger.close()
    thread.join(10)
    assert outcome == {"sum": 3.0}


class _FakeDeviceArray:
    """Stands in for a CuPy array: has ``nbytes``/``shape``/``dtype`` but is not NumPy."""
    nbytes, shape, dtype = 16, (2,), np.dtype(np.float64)


def test_tcp_bad_arguments():
    with pytest.raises(ValueError, match="0 <= rank < size"):
        TCPCommunicator(UniqueId(), 2, 2)
    solo = TCPCommunicator(UniqueId(), 0, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        solo.allreduce(np.zeros((4, 4))[:, ::2])
    with pytest.raises(TypeError, match="NumPy host arrays"):
        solo.allreduce(_FakeDeviceArray())
    np.testing.assert_array_equal(solo.allgatherv(np.arange(3.0))[0], [0.0, 1.0, 2.0])
    solo.close()

    def negative_tag(comm):
        with pytest.raises(ValueError, match="tag must be an int"):
            comm.send(np.zeros(1), 1 - comm.rank, tag=-3)
    tcp_ranks(2, negative_tag)


# ---- NCCL (needs CuPy and a CUDA GPU; world size 1) ---------------------------------------------
@pytest.mark.gpu
def test_nccl_collectives_world_of_one():
    import cupy
    from minitorch_dist.communication import NCCLCommunicator
    comm = NCCLCommunicator()
    try:
        for dtype in (cupy.float32, cupy.float16, cupy.float64):
            x = cupy.arange(6, dtype=dtype).reshape(2, 3)
            assert cupy.array_equal(comm.allreduce(x), x)
            assert cupy.array_equal(comm.allreduce(x, op="mean"), x)
            in_place = x.copy()
            assert comm.allreduce(in_place, out=in_place) is in_place
            assert cupy.array_equal(comm.iallreduce(x, op="max").wait(), x)
            assert comm.allgather(x).shape == (1, 2, 3)
            data, counts = comm.allgatherv(x.ravel())
            assert counts == [6] and cupy.array_equal(data, x.ravel())
            assert cupy.array_equal(comm.broadcast(x.copy(), root=0), x)
            assert cupy.array_equal(comm.reduce_scatter(x), x)
            assert cupy.array_equal(comm.alltoall(x), x)
        comm.barrier()
        assert comm.comm_stats()["calls"] > 0
        with pytest.raises(TypeError, match="CuPy arrays"):
            comm.allreduce(np.zeros(3))
    finally:
        comm.close()


@pytest.mark.gpu
def test_nccl_backend_through_init():
    import cupy
    from minitorch_dist import communication as C
    C.release()
    try:
        C.init("nccl")
        assert C.GlobalComm.BACKEND == "nccl" and C.get_group_size() == 1
        x = cupy.ones(4, cupy.float32)
        assert float(C.get_communicator().allreduce(x).sum()) == 4.0
    finally:
        C.release()
