"""MindSpore's point-to-point primitives: ``ops.Send``, ``ops.Receive`` and
``ops.NeighborExchange``.

``Send(sr_tag, dest_rank, group)`` sends its input to ``dest_rank`` and returns it unchanged
(MindSpore scripts write ``ops.Depend()(x, send(x))``); ``Receive(sr_tag, src_rank, shape,
dtype, group)`` takes no input and returns the tensor sent with the same tag. Ranks are
ranks of ``group`` (a name from ``communication.create_group``; default: the world), which
is resolved at the first call.

They are differentiable as MindSpore's are: ``Receive``'s backward sends the gradient of what
it received back to ``src_rank``, and ``Send``'s backward receives it from ``dest_rank`` (the
gradient of ``Send``'s own output is not used: that output stands for the message). The
backward messages travel over ``group_back`` (default: ``group``) under tags of their own, so
a gradient never meets a forward ``Receive``. The sender's backward starts from ``Send``'s
output: a rank whose step ends in a ``Send`` returns that output (or differentiates it), as
MindSpore's graph keeps it through ``Depend``. A received value that takes part in a backward
sends its gradient, so its sender must differentiate too (or the receiver stops the gradient:
``ops.stop_gradient``).

``NeighborExchange(send_rank_ids, recv_rank_ids, recv_shapes, send_shapes, recv_type,
group)`` sends input ``i`` to ``send_rank_ids[i]`` and returns one tensor per
``recv_rank_ids`` entry. Its backward is MindSpore's: the exchange reversed (each output's
gradient goes back to the rank it came from), so it trains like any primitive when every
rank's loss uses what it received.
"""
import numpy as np

from ...backend import dtypes, get_device
from ...backend.arrays import contiguous
from ...ops.primitive import Primitive
from ...tensor import Tensor
from . import collectives as _c

__all__ = ["Send", "Receive", "NeighborExchange"]

MAX_TAG = (1 << 14) - 1          # sr_tag + BACKWARD_TAG stays within MPI's smallest tag bound
BACKWARD_TAG = 1 << 14           # gradients travel under sr_tag + BACKWARD_TAG


def _rank_in(owner, what, rank, comm, group):
    rank = _c._check_int(owner, what, rank)
    if not 0 <= rank < comm.size:
        raise ValueError(f"{owner}: {what} {rank} is not a rank of group {group!r} (ranks "
                         f"0..{comm.size - 1})")
    return rank


def _shape(owner, what, shape):
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise TypeError(f"{owner}: {what} must be a list of non-negative ints, got {shape!r}")
    return tuple(shape)


def _tag(owner, tag):
    tag = _c._check_int(owner, "sr_tag", tag)
    if not 0 <= tag <= MAX_TAG:
        raise ValueError(f"{owner}: sr_tag must be in [0, {MAX_TAG}], got {tag}")
    return tag


class _Group:
    """Resolves ``group`` at the first call (a network may build the primitive anywhere)."""

    def _comm(self):
        if self.communicator is None:
            self.communicator = _c.resolve_communicator(self.group, type(self).__name__)
        return self.communicator

    def _back_comm(self):
        """The communicator of the backward message: ``group_back``, else ``group``."""
        if getattr(self, "group_back", None) is None:
            return self._comm()
        return _c.resolve_communicator(self.group_back, type(self).__name__)


class Send(_Group, Primitive):
    """``ops.Send(sr_tag, dest_rank, group, group_back)``: see the module docstring."""

    def __init__(self, sr_tag, dest_rank, group=None, group_back=None):
        self.tag = _tag("Send", sr_tag)
        self.dest = _c._check_int("Send", "dest_rank", dest_rank)
        self.group, self.group_back, self.communicator = group, group_back, None

    def __call__(self, x):
        comm = self._comm()
        _rank_in("Send", "dest_rank", self.dest, comm, self.group)
        return self.apply(x, comm=comm, dest=self.dest, tag=self.tag)

    def forward(self, ctx, x, comm, dest, tag):
        _c.communicator_for(comm, ctx.device).send(contiguous(x), dest, tag)
        ctx.shape, ctx.dtype = x.shape, x.dtype
        return x

    def backward(self, ctx, g):
        """The gradient of the input, from ``dest_rank`` (its ``Receive``'s backward)."""
        grad = ctx.xp.empty(ctx.shape, ctx.dtype)
        _c.communicator_for(self._back_comm(), ctx.device).recv(grad, self.dest,
                                                               self.tag + BACKWARD_TAG)
        return (grad,)


class Receive(_Group, Primitive):
    """``ops.Receive(sr_tag, src_rank, shape, dtype, group, group_back)``: called without
    arguments, returns the tensor ``src_rank`` sent with ``sr_tag``. The call is recorded on
    the tape through a 0-d anchor that wants a gradient (it has no input of its own), and its
    backward always runs: the sender waits for the gradient."""

    backward_always_runs = True

    def __init__(self, sr_tag, src_rank, shape, dtype, group=None, group_back=None):
        self.tag = _tag("Receive", sr_tag)
        self.src = _c._check_int("Receive", "src_rank", src_rank)
        self.shape = _shape("Receive", "shape", shape)
        self.dtype = dtypes.to_dtype(dtype)
        self.group, self.group_back, self.communicator = group, group_back, None

    def __call__(self, *unused):
        if unused:
            raise TypeError(f"Receive takes no inputs (MindSpore's Receive()()), got "
                            f"{len(unused)}")
        comm = self._comm()
        _rank_in("Receive", "src_rank", self.src, comm, self.group)
        floating = self.dtype.kind == "f"
        anchor = Tensor._make(np.zeros((), self.dtype if floating else np.float32),
                              get_device("CPU"), requires_grad=floating)
        # run, not apply: a message is received once, whatever hook (trace, sharded run) is on
        return self.run(anchor, comm=comm)

    def forward(self, ctx, anchor, comm):
        out = ctx.xp.empty(self.shape, self.dtype)
        _c.communicator_for(comm, ctx.device).recv(out, self.src, self.tag)
        return out

    def backward(self, ctx, grad):
        """Send the gradient of what was received back to ``src_rank``."""
        grad = contiguous(grad.astype(self.dtype, copy=False))
        _c.communicator_for(self._back_comm(), ctx.device).send(grad, self.src,
                                                               self.tag + BACKWARD_TAG)
        return (None,)


class NeighborExchange(_Group, Primitive):
    """``ops.NeighborExchange(send_rank_ids, recv_rank_ids, recv_shapes, send_shapes,
    recv_type, group)``: a tuple of tensors in, a tuple out (module docstring)."""

    def __init__(self, send_rank_ids, recv_rank_ids, recv_shapes, send_shapes, recv_type,
                 group=None):
        owner = "NeighborExchange"
        self.send_ids = [_c._check_int(owner, "send_rank_ids entry", r) for r in send_rank_ids]
        self.recv_ids = [_c._check_int(owner, "recv_rank_ids entry", r) for r in recv_rank_ids]
        self.recv_shapes = [_shape(owner, "recv_shapes entry", s) for s in recv_shapes]
        self.send_shapes = [_shape(owner, "send_shapes entry", s) for s in send_shapes]
        if len(self.recv_shapes) != len(self.recv_ids) or \
                len(self.send_shapes) != len(self.send_ids):
            raise ValueError(f"{owner}: one shape per rank: {len(self.send_ids)} send ranks with "
                             f"{len(self.send_shapes)} send_shapes, {len(self.recv_ids)} recv "
                             f"ranks with {len(self.recv_shapes)} recv_shapes")
        self.recv_type = dtypes.to_dtype(recv_type)
        self.group, self.communicator = group, None

    def __call__(self, inputs):
        owner = "NeighborExchange"
        if not isinstance(inputs, (tuple, list)):
            raise TypeError(f"{owner} takes a tuple of tensors, got {type(inputs).__name__}")
        if len(inputs) != len(self.send_ids):
            raise ValueError(f"{owner}: {len(inputs)} tensor(s) given for "
                             f"{len(self.send_ids)} send_rank_ids")
        for i, (x, shape) in enumerate(zip(inputs, self.send_shapes)):
            if tuple(x.shape) != shape:
                raise ValueError(f"{owner}: input {i} has shape {tuple(x.shape)}, but "
                                 f"send_shapes[{i}] is {shape}")
        comm = self._comm()
        for rank in self.send_ids + self.recv_ids:
            _rank_in(owner, "rank id", rank, comm, self.group)
        out = self.apply(*inputs, comm=comm)
        return out if isinstance(out, tuple) else (out,)

    def _exchange(self, comm, arrays, send_ids, recv_ids, shapes, dtypes_, tag):
        requests = [comm.isend(contiguous(a), r, tag) for a, r in zip(arrays, send_ids)]
        received = [comm.recv(np.empty(s, d), r, tag)
                    for s, d, r in zip(shapes, dtypes_, recv_ids)]
        for request in requests:
            request.wait()
        return received

    def forward(self, ctx, *arrays, comm):
        ctx.comm = _c.communicator_for(comm, ctx.device)
        ctx.dtypes = [a.dtype for a in arrays]
        received = self._exchange(ctx.comm, arrays, self.send_ids, self.recv_ids,
                                  self.recv_shapes, [self.recv_type] * len(self.recv_ids), 0)
        return tuple(received) if len(received) != 1 else received[0]

    def backward(self, ctx, *grads):
        back = self._exchange(ctx.comm, grads, self.recv_ids, self.send_ids, self.send_shapes,
                              ctx.dtypes, 1)
        return tuple(back)
