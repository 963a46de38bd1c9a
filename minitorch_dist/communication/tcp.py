"""``TCPCommunicator``: collectives over a full mesh of loopback sockets, for the SINGA-style
multiprocessing launch on one host (``python train.py 2``: the parent makes a ``UniqueId`` and
starts ``multiprocessing.Process`` children with it).

Building the mesh: rank 0 listens on the id's port; every other rank opens its own listener
on a free port, connects to rank 0 and registers; rank 0 answers with the table of ports;
then rank r connects to the ranks below it and accepts the ranks above it. Only 127.0.0.1
is ever used, connections must present the id's token, and every socket operation has a
timeout, so a dead peer raises (``TimeoutError``/``ConnectionError``) instead of hanging.

Messages are framed (tag, length, payload). Each peer connection has one sender thread, so
sends never block the caller (no send/send deadlock), and a reader that keeps messages with
other tags aside until someone asks for them. Collectives use internal tags numbered by
call, so nonblocking calls may be completed in any order. Every collective is a direct
exchange (each rank sends its part to every rank that needs it) and reductions run locally
in rank order, so all ranks get bitwise identical results.
"""
import queue
import socket
import struct
import threading
import time
import zlib

import numpy as np

from . import hooks
from .communicator import Communicator, Request, check_buffers
from .local import check_group_ranks
from .reduction import check_out, reduce_arrays
from .unique_id import LOOPBACK

__all__ = ["TCPCommunicator"]

_HEADER = struct.Struct("<qQ")          # tag, payload bytes
_HELLO = struct.Struct("<32sII")        # token, rank, listening port
_COLLECTIVE_BIT = 1 << 39               # wire tag = group << 40 | collective bit | value
_MAX_USER_TAG = _COLLECTIVE_BIT - 1


class _Peer:
    """One connection: a sender thread fed by a queue, and a tag-sorting reader."""

    def __init__(self, sock, rank):
        self.sock, self.rank = sock, rank
        self.outbox = queue.Queue()
        self.stash = {}
        self.read_lock = threading.Lock()
        self.error = None
        self.thread = threading.Thread(target=self._send_loop, daemon=True,
                                       name=f"tcp-send-to-{rank}")
        self.thread.start()

    def _send_loop(self):
        while True:
            item = self.outbox.get()
            if item is None:
                return
            tag, payload, done = item
            try:
                if self.error is None:
                    self.sock.sendall(_HEADER.pack(tag, len(payload)))
                    if len(payload):
                        self.sock.sendall(payload)
            except OSError as exc:
                self.error = ConnectionError(f"rank {self.rank} closed the connection while "
                                             f"we were sending to it ({exc})")
            done.set()

    def post(self, tag, array):
        """Queue ``array``'s bytes for sending (no copy); returns a ``wait()`` callable."""
        if self.error is not None:
            raise self.error
        done = threading.Event()
        self.outbox.put((tag, _byte_view(array), done))

        def wait():
            if not done.wait(self.sock.gettimeout()):
                raise TimeoutError(f"sending to rank {self.rank} did not finish in time")
            if self.error is not None:
                raise self.error
        return wait

    def _read_exact(self, view):
        while len(view):
            try:
                got = self.sock.recv_into(view)
            except socket.timeout as exc:
                raise TimeoutError(f"no data from rank {self.rank} within "
                                   f"{self.sock.gettimeout()} s (is it alive?)") from exc
            except OSError as exc:  # reset by a peer that died
                raise ConnectionError(f"rank {self.rank} closed the connection (did it "
                                      f"fail?): {exc}") from exc
            if got == 0:
                raise ConnectionError(f"rank {self.rank} closed the connection (did it fail?)")
            view = view[got:]

    def receive(self, tag, out=None):
        """The next payload with ``tag``: into ``out`` when given, else a new bytearray."""
        with self.read_lock:
            waiting = self.stash.get(tag)
            if waiting:
                return _deliver(waiting.pop(0), out, self.rank)
            header = bytearray(_HEADER.size)
            while True:
                self._read_exact(memoryview(header))
                got_tag, nbytes = _HEADER.unpack(header)
                if got_tag == tag and out is not None and nbytes == out.nbytes:
                    self._read_exact(_byte_view(out))
                    return out
                payload = bytearray(nbytes)
                self._read_exact(memoryview(payload))
                if got_tag == tag:
                    return _deliver(payload, out, self.rank)
                self.stash.setdefault(got_tag, []).append(payload)

    def close(self):
        self.outbox.put(None)
        self.thread.join(5.0)
        self.sock.close()


def _deliver(payload, out, source):
    if out is None:
        return payload
    if len(payload) != out.nbytes:
        raise ValueError(f"recv: rank {source} sent {len(payload)} bytes, but the receive "
                         f"buffer holds {out.nbytes} ({out.shape} {out.dtype})")
    _byte_view(out)[:] = payload
    return out


def _byte_view(array):
    """The bytes of a C-contiguous array as a flat memoryview (no copy; writable if it is)."""
    return memoryview(array.reshape(-1).view(np.uint8))


def _build_mesh(unique_id, rank, size, timeout):
    """Sockets to every other rank, keyed by rank (see the module docstring)."""
    deadline = time.monotonic() + timeout
    token = unique_id.token.encode()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, unique_id.port if rank == 0 else 0))
    listener.listen(size)
    peers = {}
    try:
        if rank == 0:
            ports = [0] * size
            for sock, (other, port) in _accept(listener, token, size - 1, deadline, rank, size):
                peers[other], ports[other] = sock, port
            table = struct.pack(f"<{size}I", *ports)
            for sock in peers.values():
                sock.sendall(table)
        else:
            my_port = listener.getsockname()[1]
            root = _connect(unique_id.port, deadline, rank, retry=True)
            root.sendall(_HELLO.pack(token, rank, my_port))
            ports = struct.unpack(f"<{size}I", _read_all(root, 4 * size, 0))
            peers[0] = root
            for lower in range(1, rank):
                sock = _connect(ports[lower], deadline, rank, retry=False)
                sock.sendall(_HELLO.pack(token, rank, 0))
                peers[lower] = sock
            for sock, (other, _) in _accept(listener, token, size - 1 - rank, deadline, rank, size):
                peers[other] = sock
    except BaseException:
        for sock in peers.values():
            sock.close()
        raise
    finally:
        listener.close()
    for sock in peers.values():
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return peers


def _remaining(deadline, rank, what):
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"TCPCommunicator rank {rank}: timed out {what}")
    return left


def _connect(port, deadline, rank, retry):
    while True:
        try:
            return socket.create_connection(
                (LOOPBACK, port), timeout=_remaining(deadline, rank, f"connecting to port {port}"))
        except ConnectionRefusedError:
            if not retry:
                raise
            time.sleep(0.02)  # rank 0 is not listening yet


def _accept(listener, token, count, deadline, rank, size):
    accepted = []
    while len(accepted) < count:
        listener.settimeout(_remaining(
            deadline, rank, f"waiting for peers ({len(accepted)} of {count} connected)"))
        try:
            sock, _ = listener.accept()
        except socket.timeout:
            continue
        sock.settimeout(_remaining(deadline, rank, "reading a peer's hello"))
        try:
            hello_token, other, port = _HELLO.unpack(_read_all(sock, _HELLO.size, "?"))
        except (OSError, ConnectionError, TimeoutError):
            sock.close()
            continue
        known = {r for _, (r, _) in accepted}
        if hello_token != token or not rank < other < size or other in known:
            sock.close()  # not one of ours
            continue
        accepted.append((sock, (other, port)))
    return accepted


def _read_all(sock, nbytes, source):
    data = bytearray(nbytes)
    view = memoryview(data)
    while len(view):
        got = sock.recv_into(view)
        if got == 0:
            raise ConnectionError(f"rank {source} closed the connection during setup")
        view = view[got:]
    return bytes(data)


class TCPCommunicator(Communicator):
    """A group of processes on this host joined through a ``UniqueId`` (host arrays only).

    ``TCPCommunicator(unique_id, rank, size)`` must be called by every rank; it returns once
    the mesh is connected. Call ``close()`` at the end (``release()`` does it).
    """

    backend = "tcp"

    def __init__(self, unique_id, rank, size, timeout=60.0, _mesh=None, _group=(0, None)):
        super().__init__()
        group_id, members = _group
        if _mesh is None:
            if not isinstance(size, int) or size < 1 or not isinstance(rank, int) \
                    or not 0 <= rank < size:
                raise ValueError(f"TCPCommunicator needs 0 <= rank < size, got rank={rank!r} "
                                 f"size={size!r}")
            with hooks.blocking_wait():     # connecting waits for every peer
                _mesh = _build_mesh(unique_id, rank, size, timeout) if size > 1 else {}
            _mesh = {other: _Peer(sock, other) for other, sock in _mesh.items()}
            members = tuple(range(size))
        self._peers, self._members, self._group_id = _mesh, members, group_id
        self._owns_mesh = group_id == 0
        self.rank, self.size = rank, size
        self.local_rank, self.local_size = rank, size
        self._seq = 0
        self._splits = {}

    # ---- framing helpers ------------------------------------------------------------
    def _peer(self, rank):
        return self._peers[self._members[rank]]

    def _next_tag(self):
        self._seq += 1
        return (self._group_id << 40) | _COLLECTIVE_BIT | (self._seq % _COLLECTIVE_BIT)

    def _user_tag(self, tag):
        if not isinstance(tag, int) or not 0 <= tag <= _MAX_USER_TAG:
            raise ValueError(f"tag must be an int in [0, {_MAX_USER_TAG}], got {tag!r}")
        return (self._group_id << 40) | tag

    def _send_to(self, ranks, tag, array_for):
        return [self._peer(r).post(tag, array_for(r)) for r in ranks if r != self.rank]

    def _others(self):
        return [r for r in range(self.size) if r != self.rank]

    def _receive_array(self, source, tag, like, shape=None):
        payload = self._peer(source).receive(tag)
        data = np.frombuffer(payload, dtype=like.dtype)
        return data.reshape(like.shape if shape is None else shape)

    # ---- collectives ----------------------------------------------------------------
    def _allreduce(self, array, op, out):
        return self._iallreduce(array, op, out).wait()

    def _iallreduce(self, array, op, out):
        _check_host("allreduce", array)
        check_out("allreduce", array, out)
        tag = self._next_tag()
        sends = self._send_to(range(self.size), tag, lambda r: array)

        def finish():
            parts = [array if r == self.rank else self._receive_array(r, tag, array)
                     for r in range(self.size)]
            for wait in sends:
                wait()
            if out is array:
                parts[self.rank] = array.copy()  # out is overwritten while reducing
            return reduce_arrays(parts, op, out)
        return Request(finish)

    def _allgather(self, array):
        _check_host("allgather", array)
        tag = self._next_tag()
        sends = self._send_to(range(self.size), tag, lambda r: array)
        result = np.empty((self.size,) + array.shape, array.dtype)
        for r in range(self.size):
            if r == self.rank:
                result[r] = array
            else:
                self._peer(r).receive(tag, out=result[r])
        for wait in sends:
            wait()
        return result

    def _allgatherv(self, array):
        _check_host("allgatherv", array)
        tag = self._next_tag()
        sends = self._send_to(range(self.size), tag, lambda r: array)
        parts = [array if r == self.rank else np.frombuffer(self._peer(r).receive(tag),
                                                            dtype=array.dtype)
                 for r in range(self.size)]
        for wait in sends:
            wait()
        return np.concatenate(parts), [int(p.shape[0]) for p in parts]

    def _broadcast(self, array, root):
        _check_host("broadcast", array)
        tag = self._next_tag()
        if self.rank == root:
            for wait in self._send_to(range(self.size), tag, lambda r: array):
                wait()
        else:
            self._peer(root).receive(tag, out=array)
        return array

    def _reduce_scatter(self, array, op):
        _check_host("reduce_scatter", array)
        tag = self._next_tag()
        chunk = array.shape[0] // self.size
        sends = self._send_to(range(self.size), tag, lambda r: array[r * chunk:(r + 1) * chunk])
        mine = array[self.rank * chunk:(self.rank + 1) * chunk]
        parts = [mine if r == self.rank else self._receive_array(r, tag, mine)
                 for r in range(self.size)]
        for wait in sends:
            wait()
        return reduce_arrays(parts, op)

    def _alltoall(self, array):
        _check_host("alltoall", array)
        tag = self._next_tag()
        chunk = array.shape[0] // self.size
        sends = self._send_to(range(self.size), tag, lambda r: array[r * chunk:(r + 1) * chunk])
        result = np.empty_like(array)
        for r in range(self.size):
            part = result[r * chunk:(r + 1) * chunk]   # a contiguous view: received in place
            if r == self.rank:
                part[...] = array[r * chunk:(r + 1) * chunk]
            else:
                self._peer(r).receive(tag, out=part)
        for wait in sends:
            wait()
        return result

    def _barrier(self):
        tag = self._next_tag()
        empty = np.empty(0, np.uint8)
        sends = self._send_to(range(self.size), tag, lambda r: empty)
        for r in self._others():
            self._peer(r).receive(tag)
        for wait in sends:
            wait()

    # ---- point to point -------------------------------------------------------------
    def _send(self, array, dest, tag):
        self._isend(array, dest, tag).wait()

    def _isend(self, array, dest, tag):
        _check_host("send", array)
        if dest == self.rank:
            raise ValueError("TCPCommunicator cannot send to its own rank")
        return Request(self._peer(dest).post(self._user_tag(tag), array))

    def _recv(self, out, source, tag):
        _check_host("recv", out)
        if source == self.rank:
            raise ValueError("TCPCommunicator cannot receive from its own rank")
        return self._peer(source).receive(self._user_tag(tag), out=out)

    # ---- groups and teardown --------------------------------------------------------
    def split(self, ranks, name=None):
        """A sub-communicator over ``ranks`` on the same sockets (others get None)."""
        ranks = check_group_ranks(ranks, self.size)
        if self.rank not in ranks:
            return None
        key = (ranks, name)
        self._splits[key] = nth = self._splits.get(key, -1) + 1
        label = f"{self._group_id}/{ranks}/{name}/{nth}".encode()
        group_id = 1 + zlib.crc32(label) % ((1 << 23) - 1)
        members = tuple(self._members[r] for r in ranks)
        return TCPCommunicator(None, ranks.index(self.rank), len(ranks),
                               _mesh=self._peers, _group=(group_id, members))

    def close(self):
        """Stop the sender threads and close the sockets (the world communicator only)."""
        if self._owns_mesh:
            for peer in self._peers.values():
                peer.close()
            self._peers = {}


def _check_host(what, array):
    check_buffers("TCPCommunicator", what, (array,), np.ndarray, "NumPy host")
