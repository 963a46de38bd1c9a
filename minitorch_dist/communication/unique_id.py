"""``UniqueId``: the ticket a parent hands to the ranks it starts (SINGA's ``NcclIdHolder``).

SINGA's multiprocessing launch (``python train.py 2``) creates one id in the parent and passes
it to ``multiprocessing.Process`` children; only processes holding the same id join the same
group. Here the id names a rendezvous point on the loopback interface (127.0.0.1 and a free
port, found by binding port 0) plus a random token that a connecting rank must present, so a
stray connection cannot join the group. It is plain data, so it pickles under both the
``fork`` and the ``spawn`` start methods (SINGA's SWIG holder needed ``fork``).

An NCCL unique id can ride along (``UniqueId(nccl=True)``, needs CuPy); without one, ranks
that use NCCL create it on rank 0 and share it over the TCP rendezvous, so the parent never
touches CUDA before forking.

>>> uid = UniqueId()
>>> uid.host, 0 < uid.port < 65536
('127.0.0.1', True)
>>> import pickle; pickle.loads(pickle.dumps(uid)) == uid
True
"""
import secrets
import socket

__all__ = ["UniqueId", "NcclIdHolder", "free_loopback_port"]

LOOPBACK = "127.0.0.1"


def free_loopback_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class UniqueId:
    """A picklable rendezvous ticket: ``host`` (127.0.0.1), ``port``, ``token``, ``nccl_id``."""

    def __init__(self, nccl=False, port=None):
        self.host = LOOPBACK
        self.port = int(port) if port is not None else free_loopback_port()
        self.token = secrets.token_hex(16)
        self.nccl_id = _new_nccl_id() if nccl else None

    def __eq__(self, other):
        return isinstance(other, UniqueId) and (self.host, self.port, self.token, self.nccl_id) \
            == (other.host, other.port, other.token, other.nccl_id)

    def __hash__(self):
        return hash((self.port, self.token))

    def __repr__(self):
        return f"UniqueId({self.host}:{self.port}, nccl={self.nccl_id is not None})"


def _new_nccl_id():
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        raise ImportError("UniqueId(nccl=True) needs CuPy with NCCL: pip install "
                          '"minitorch_dist[gpu]"') from exc
    return tuple(nccl.get_unique_id())


NcclIdHolder = UniqueId
