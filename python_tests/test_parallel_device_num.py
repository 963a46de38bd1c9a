"""``device_num`` and ``global_rank`` of ``set_auto_parallel_context`` are checked against the
job (they were stored and never read): MindSpore sizes its parallel plan and its gradient
mean by ``device_num``, so a mismatch is refused, whichever comes first, the setting or
``communication.init()``. Matching values (Wide&Deep sets ``device_num=get_group_size()``)
are accepted."""
import sys

import pytest

import minitorch_dist as ms
from minitorch_dist.parallel.context import check_job_size
from mpi_jobs import needs_mpi, run_process


@pytest.fixture(autouse=True)
def _clean_context():
    yield
    ms.reset_auto_parallel_context()


def test_a_device_num_or_global_rank_the_job_contradicts_is_refused(monkeypatch):
    from minitorch_dist.parallel import context      # set directly: whether a world is
    monkeypatch.setitem(context._context, "device_num", 4)   # initialized here does not matter
    with pytest.raises(ValueError, match=r"device_num=4, but the job has 2 rank\(s\); set "
                                         r"device_num=2"):
        check_job_size(2, 0, "TrainOneStepCell")
    check_job_size(4, 3)                        # the job it names: fine
    monkeypatch.setitem(context._context, "device_num", None)
    monkeypatch.setitem(context._context, "global_rank", 1)
    with pytest.raises(ValueError, match="global_rank=1, but this process is rank 0"):
        check_job_size(2, 0)
    monkeypatch.setitem(context._context, "global_rank", None)
    check_job_size(8, 5)                        # unset: nothing to contradict


def test_in_one_process_a_device_num_of_2_is_refused_at_once():
    """``init()`` in one process is a world of one: setting device_num=2 afterwards fails
    right there, and leaves the context as it was."""
    from minitorch_dist import communication
    was_initialized = communication.GlobalComm.INITED
    communication.init()
    try:
        before = ms.get_context("save_graphs")
        with pytest.raises(ValueError, match="device_num=2, but the job has 1 rank"):
            ms.set_auto_parallel_context(parallel_mode="data_parallel", device_num=2,
                                         save_graphs=not before)
        assert ms.get_auto_parallel_context("device_num") is None
        assert ms.get_auto_parallel_context("parallel_mode") == "stand_alone"
        assert ms.get_context("save_graphs") == before     # nothing changed
        ms.set_auto_parallel_context(device_num=1)
    finally:
        if not was_initialized:
            communication.release()


CODE = """\
import numpy as np
import minitorch_dist as ms
from minitorch_dist import communication, nn
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                             device_num=4)          # before init: checked when training starts
communication.init()
net = nn.WithLossCell(nn.Dense(2, 1), nn.MSELoss())
step = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), 0.1))
"""


@needs_mpi
def test_a_data_parallel_job_with_the_wrong_device_num_fails_with_the_reason():
    done, _ = run_process([sys.executable, "-m", "minitorch_dist.run", "-n", "2", "--timeout",
                           "100", "-c", CODE])
    assert done.returncode != 0
    assert "device_num=4, but the job has 2 rank(s); set device_num=2" in done.stderr
