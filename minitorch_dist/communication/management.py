"""Process groups, MindSpore style: ``init``, ``get_rank``, ``get_group_size``, groups, ``release``.

``init()`` picks the backend from how the process was started:

* under ``mpiexec`` (or ``python -m minitorch_dist.run``) with more than one rank: MPI over
  mpi4py (``init("mpi")`` uses it for a single launched rank too);
* with a real GPU as ``device_target`` (or ``init("nccl")``): NCCL for device arrays, with the
  host communicator (MPI, or a world of one) kept for bootstrapping and sub-groups;
* a plain ``python script.py``: a world of one (every collective is a copy);
* SINGA's multiprocessing launch: ``init(unique_id=uid, rank=r, world_size=n)`` (or
  ``init_from_unique_id``) joins the processes that hold the same ``UniqueId`` over TCP.

>>> from minitorch_dist import communication as comm
>>> comm.init()                      # a single process: a world of one
>>> comm.get_rank(), comm.get_group_size(), comm.GlobalComm.BACKEND
(0, 1, 'local')
>>> comm.release()
"""
import os
import sys

from .local import LocalCommunicator, check_group_ranks

__all__ = ["GlobalComm", "init", "init_from_unique_id", "release", "get_rank",
           "get_group_size", "get_local_rank", "get_local_rank_size", "create_group",
           "destroy_group", "get_communicator", "get_world_rank_from_group_rank",
           "get_group_rank_from_world_rank", "launched_world_size"]

# Set by mpiexec/mpirun of Open MPI, MPICH/Intel MPI (PMI) and MVAPICH.
_LAUNCHER_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
_HOST_NAMES = ("mpi", "mccl", "gloo", "host")
_WORLD_ALIASES = ("hccl_world_group", "nccl_world_group", "mccl_world_group", "world_group")


class GlobalComm:
    """What ``init`` chose: ``BACKEND`` ("mpi", "nccl", "tcp" or "local"), the world group name."""

    BACKEND = None
    WORLD_COMM_GROUP = "mccl_world_group"
    INITED = False


_state = {"world": None, "host": None, "groups": {}, "excepthook": None}


def launched_world_size():
    """The world size an MPI launcher announced in the environment, or None."""
    for name in _LAUNCHER_SIZE_VARS:
        if os.environ.get(name):
            return int(os.environ[name])
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        return MPI.COMM_WORLD.Get_size()  # MPI started by the user's script
    return None


def _backend_kind(backend_name):
    if backend_name is None:
        return None
    name = str(backend_name).lower()
    if name == "hccl":
        raise ValueError("init('hccl'): Ascend (HCCL) is not supported; use 'nccl' for NVIDIA "
                         "GPUs or 'mpi' (also 'mccl'/'gloo') for the host")
    if name == "nccl":
        return "nccl"
    if name in _HOST_NAMES:
        return "host"
    raise ValueError(f"init: unknown backend {backend_name!r}; expected 'nccl', 'mpi', "
                     "'mccl' or 'gloo'")


def _wants_nccl(kind):
    """NCCL for ``init("nccl")`` or a real GPU target; a virtual GPU's arrays are host
    buffers, so there ``init("nccl")`` runs on the host communicator (scripts written for
    GPUs then run unchanged on a laptop)."""
    from ..backend import get_device, virtual_gpu_enabled
    if kind == "nccl":
        return not (virtual_gpu_enabled() and get_device("GPU").virtual)
    if kind is not None:
        return False
    from ..context import get_context
    if get_context("device_target") != "GPU":
        return False
    return not get_device("GPU").virtual


def init(backend_name=None, unique_id=None, rank=None, world_size=None):
    """Initialize the world group (idempotent: a second call keeps the first world).

    ``backend_name``: None (choose, see the module docstring), "nccl", "mpi"/"mccl"/"gloo"
    (host collectives); "hccl" raises (Ascend is not supported). Pass ``unique_id``, ``rank``
    and ``world_size`` for processes started with ``multiprocessing`` (see ``UniqueId``).
    """
    if GlobalComm.INITED:
        _check_same_world(unique_id, rank, world_size)
        return
    kind = _backend_kind(backend_name)
    if unique_id is not None:
        init_from_unique_id(unique_id, rank, world_size, backend_name)
        return
    launched = launched_world_size()
    if launched is not None and (launched > 1 or str(backend_name).lower() == "mpi"):
        from .mpi import MPICommunicator
        host = MPICommunicator()
        if host.size > 1:
            _install_abort_hook()
    else:
        host = LocalCommunicator.create(1)[0]
    _set_world(host, kind)


def init_from_unique_id(unique_id, rank, world_size, backend_name=None):
    """Join the ``world_size`` processes holding ``unique_id`` as ``rank`` (TCP on 127.0.0.1).

    With a real GPU as device target (or ``backend_name="nccl"``) the collectives run on
    NCCL and TCP only bootstraps it.
    """
    if GlobalComm.INITED:
        _check_same_world(unique_id, rank, world_size)
        return
    kind = _backend_kind(backend_name)
    if rank is None or world_size is None:
        raise ValueError("init with a unique_id needs rank and world_size")
    from .tcp import TCPCommunicator
    _set_world(TCPCommunicator(unique_id, rank, world_size), kind,
               nccl_id=getattr(unique_id, "nccl_id", None))


def _check_same_world(unique_id, rank, world_size):
    """A second ``init`` keeps the first world, unless it names another one: then it is
    refused (e.g. a process forked after its parent's ``init()`` would otherwise stay in the
    parent's world of one instead of joining the ``unique_id``'s)."""
    world = _state["world"]
    asked = {"rank": rank, "world_size": world_size}
    found = {"rank": world.rank, "world_size": world.size}
    wrong = [f"{name}={asked[name]} (it is {found[name]})" for name in asked
             if asked[name] is not None and asked[name] != found[name]]
    if unique_id is not None and GlobalComm.BACKEND not in ("tcp", "nccl"):
        wrong.append(f"a unique_id (the world is {GlobalComm.BACKEND!r}, not one joined by id)")
    if wrong:
        raise RuntimeError("init: this process is already in a world (rank "
                           f"{world.rank} of {world.size}, backend {GlobalComm.BACKEND!r}); "
                           f"it was asked for {', '.join(wrong)}. Call "
                           "minitorch_dist.communication.release() first (a process forked "
                           "after init() inherits its parent's world)")


def _set_world(host, kind, nccl_id=None):
    world = host
    if _wants_nccl(kind):
        from .nccl import NCCLCommunicator
        world = NCCLCommunicator(bootstrap=host, nccl_id=nccl_id)
    _state.update(world=world, host=host, groups={})
    GlobalComm.BACKEND = world.backend
    GlobalComm.WORLD_COMM_GROUP = "nccl_world_group" if world.backend == "nccl" \
        else "mccl_world_group"
    GlobalComm.INITED = True


def _install_abort_hook():
    """A rank that dies of an exception takes the whole MPI job down instead of hanging it."""
    if _state["excepthook"] is not None:
        return
    previous = sys.excepthook
    _state["excepthook"] = previous

    def abort_job(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        sys.stderr.flush()
        from .mpi import import_mpi
        import_mpi().COMM_WORLD.Abort(1)

    sys.excepthook = abort_job


def release():
    """Close every group and the world; ``init`` may be called again afterwards."""
    for _, comm in _state["groups"].values():
        _close(comm)
    _close(_state["world"])
    if _state["host"] is not _state["world"]:
        _close(_state["host"])
    if _state["excepthook"] is not None:
        sys.excepthook = _state["excepthook"]
    _state.update(world=None, host=None, groups={}, excepthook=None)
    GlobalComm.BACKEND, GlobalComm.INITED = None, False


def _close(comm):
    if comm is not None and hasattr(comm, "close"):
        comm.close()


# ---- queries ---------------------------------------------------------------------------
def _world():
    if not GlobalComm.INITED:
        raise RuntimeError("minitorch_dist.communication: call init() first")
    return _state["world"]


def _is_world(group):
    return group is None or group in _WORLD_ALIASES or group == GlobalComm.WORLD_COMM_GROUP


def get_communicator(group=None):
    """The ``Communicator`` of ``group`` (the world by default)."""
    world = _world()
    if _is_world(group):
        return world
    if group not in _state["groups"]:
        raise ValueError(f"unknown group {group!r}; create it with create_group first "
                         f"(known: {sorted(_state['groups'])})")
    comm = _state["groups"][group][1]
    if comm is None:
        raise ValueError(f"rank {world.rank} is not a member of group {group!r}")
    return comm


def get_rank(group=None):
    """This process's rank in ``group`` (the world by default)."""
    return get_communicator(group).rank


def get_group_size(group=None):
    """The number of ranks in ``group`` (the world by default)."""
    return get_communicator(group).size


def get_local_rank(group=None):
    """This process's rank among the ranks of ``group`` on the same host."""
    return get_communicator(group).local_rank


def get_local_rank_size(group=None):
    """The number of ranks of ``group`` on this host."""
    return get_communicator(group).local_size


def create_group(group_name, rank_ids):
    """Create group ``group_name`` over world ranks ``rank_ids`` (called by its members)."""
    world = _world()
    if _is_world(group_name) or group_name in _state["groups"]:
        raise ValueError(f"create_group: group {group_name!r} already exists")
    ranks = check_group_ranks(rank_ids, world.size)
    _state["groups"][group_name] = (ranks, world.split(list(ranks), group_name))


def destroy_group(group_name):
    """Destroy a group made by ``create_group`` (the world group cannot be destroyed)."""
    _world()
    if _is_world(group_name):
        raise ValueError("destroy_group: the world group cannot be destroyed; use release()")
    if group_name not in _state["groups"]:
        raise ValueError(f"destroy_group: unknown group {group_name!r}")
    _close(_state["groups"].pop(group_name)[1])


def get_world_rank_from_group_rank(group, group_rank_id):
    """The world rank of rank ``group_rank_id`` of ``group``."""
    _world()
    if _is_world(group):
        return group_rank_id
    return _state["groups"][group][0][group_rank_id]


def get_group_rank_from_world_rank(world_rank_id, group):
    """The rank in ``group`` of world rank ``world_rank_id``."""
    _world()
    if _is_world(group):
        return world_rank_id
    return _state["groups"][group][0].index(world_rank_id)
