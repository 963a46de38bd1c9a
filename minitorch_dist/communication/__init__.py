"""Communication: the ``Communicator`` collectives and the MindSpore-style process-group API.

>>> from minitorch_dist.communication import init, get_rank, get_group_size, release
>>> init()
>>> get_rank(), get_group_size()
(0, 1)
>>> release()

Backends (each imports its library only when used): ``LocalCommunicator`` (threads, for
tests; ``run_ranks``), ``MPICommunicator`` (mpi4py), ``NCCLCommunicator`` (CuPy NCCL) and
``TCPCommunicator`` (loopback sockets, for the ``multiprocessing`` launch with a ``UniqueId``).
``hooks`` is how a tool above the layers (the launcher's watchdog) learns of new
communicators and of the training step without the layers importing it.
"""
from . import hooks
from .communicator import Communicator, Request, REDUCE_OPS
from .local import LocalCommunicator, PeerFailedError, run_ranks
from .mpi import MPICommunicator
from .nccl import NCCLCommunicator
from .tcp import TCPCommunicator
from .unique_id import UniqueId, NcclIdHolder
from .management import (GlobalComm, init, init_from_unique_id, release, get_rank,
                         get_group_size, get_local_rank, get_local_rank_size, create_group,
                         destroy_group, get_communicator, get_world_rank_from_group_rank,
                         get_group_rank_from_world_rank, launched_world_size)

__all__ = ["hooks", "Communicator", "Request", "REDUCE_OPS", "LocalCommunicator", "PeerFailedError",
           "run_ranks", "MPICommunicator", "NCCLCommunicator", "TCPCommunicator", "UniqueId",
           "NcclIdHolder", "GlobalComm", "init", "init_from_unique_id", "release", "get_rank",
           "get_group_size", "get_local_rank", "get_local_rank_size", "create_group",
           "destroy_group", "get_communicator", "get_world_rank_from_group_rank",
           "get_group_rank_from_world_rank", "launched_world_size"]
