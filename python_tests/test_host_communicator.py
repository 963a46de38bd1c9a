"""The one host-communicator rule: host arrays go over the communicator that bootstrapped
NCCL (``Communicator.host_communicator``), or over the communicator itself; and the one
choice of communicator per device (``collectives.communicator_for``), followed by the
collectives, the pipeline's Send/Recv channel and result broadcast, and SINGA's DistOpt."""
import types

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.backend.device import Device
from minitorch_dist.communication import Communicator, LocalCommunicator, run_ranks
from minitorch_dist.communication.nccl import NCCLCommunicator
from minitorch_dist.parallel.comm.collectives import communicator_for
from minitorch_dist.parallel.comm.p2p import Channel
from minitorch_dist.parallel.pipeline.broadcast import broadcast_values
from minitorch_dist.singa.dist_opt import DistOpt as SingaDistOpt


class _DeviceOnly(Communicator):
    """Stands in for NCCL: bootstrapped by a host communicator, and it must never be asked
    to move anything in these tests (every collective raises)."""

    backend = "nccl-like"

    def __init__(self, host):
        super().__init__()
        self.bootstrap, self.rank, self.size = host, host.rank, host.size

    def _refuse(self, *args):
        raise AssertionError("a host array reached the device-only communicator")

    _allreduce = _allgather = _allgatherv = _broadcast = _reduce_scatter = _refuse
    _send = _recv = _barrier = _refuse


def _devices():
    return ms.get_device("CPU"), Device("GPU", 0, virtual=True)


def test_a_plain_communicator_is_its_own_host_communicator():
    comm = LocalCommunicator.create(1)[0]
    cpu, gpu = _devices()
    assert comm.bootstrap is None and comm.host_communicator is comm
    assert communicator_for(comm, cpu) is comm and communicator_for(comm, gpu) is comm


def test_a_bootstrapped_communicator_sends_host_arrays_over_its_bootstrap():
    host = LocalCommunicator.create(1)[0]
    device_only = _DeviceOnly(host)
    cpu, gpu = _devices()
    assert device_only.host_communicator is host
    assert communicator_for(device_only, cpu) is host
    assert communicator_for(device_only, gpu) is device_only


def test_nccl_answers_with_its_bootstrap_or_itself():
    # The real class without CuPy: only the attribute the rule reads is set.
    nccl = object.__new__(NCCLCommunicator)
    nccl.bootstrap = LocalCommunicator.create(1)[0]
    assert nccl.host_communicator is nccl.bootstrap
    nccl.bootstrap = None                 # made from an nccl_id alone: no host communicator
    assert nccl.host_communicator is nccl


def test_the_pipeline_channel_and_singa_use_the_host_communicator():
    host = LocalCommunicator.create(1)[0]
    device_only = _DeviceOnly(host)
    assert Channel(device_only, 2).host is host
    assert Channel(host, 2).host is host
    singa_like = types.SimpleNamespace(communicator=device_only)
    assert SingaDistOpt._host_comm(singa_like) is host


@pytest.mark.host_default
def test_pipeline_results_on_the_host_are_broadcast_over_the_host_communicator():
    class _Topology:
        stages = 2

        def __init__(self, comm):
            self.comm = comm

        def pipeline_group(self):
            return self.comm

    def rank_fn(comm):
        values = [ms.Tensor(np.array([1.5, 2.5], np.float32)), np.arange(3)] \
            if comm.rank == 1 else None
        out = broadcast_values(_Topology(_DeviceOnly(comm)), values)
        return [(t.asnumpy().tolist(), t.device.name) for t in out]

    for result in run_ranks(2, rank_fn):
        assert result == [([1.5, 2.5], "CPU"), ([0, 1, 2], "CPU")]
