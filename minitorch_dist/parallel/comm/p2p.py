"""Point-to-point messages between pipeline stages, and Send/Recv as autograd functions.

**Messages.** Stage ``s`` sends the activations of micro-batch ``i`` to stage ``s+1`` and
gets their gradients back. Every message between two ranks carries a tag made of
(micro-batch, boundary, kind, tensor index), so nonblocking sends and receives of
different micro-batches can be in flight together and never match the wrong partner. Kinds:
a header, an activation, a gradient. The header (a small int64 array sent before the
activations) gives their count, dtypes and shapes, so users never declare shapes; the
gradients need no header: their sender received the activations and knows the shapes.

**Autograd.** ``Send`` and ``Recv`` are primitives like any other, so backward needs no
special case. ``Send(x)`` hands ``x`` to the outbox (the schedule's SEND_F action posts it)
and returns a 0-d token; the stage's backward starts from the tokens, and ``Send.backward``
returns the gradient that the next stage sent back. ``Recv`` turns a received array into a
tensor of this stage's graph; its backward puts the input gradient in the outbox for SEND_B.
"""
import numpy as np

from ...backend import get_device
from ...backend.arrays import contiguous
from ...backend.dtypes import WIRE_DTYPES, dtype_code, dtype_from_code
from ...communication.communicator import Request
from ...ops.primitive import Primitive
from ...tensor import Tensor
from .p2p_watch import watched_request

__all__ = ["Channel", "Mailbox", "Send", "Recv"]

MAX_TENSORS = 8          # activations crossing one stage border
MAX_DIMS = 8
HEADER_LEN = 1 + MAX_TENSORS * (3 + MAX_DIMS)
_KIND_HEADER, _KIND_ACTIVATION, _KIND_GRADIENT = range(3)


class Mailbox:
    """Arrays handed between the Send/Recv primitives and the runtime's SEND/RECV actions,
    keyed by ``(stage, micro-batch, tensor index)``."""

    def __init__(self):
        self.activations_out = {}    # filled by Send.forward, sent by SEND_F
        self.gradients_in = {}       # filled by the runtime before B, read by Send.backward
        self.gradients_out = {}      # filled by Recv.backward, sent by SEND_B

    def clear(self):
        self.activations_out.clear()
        self.gradients_in.clear()
        self.gradients_out.clear()


class Send(Primitive):
    """Forward: post ``x`` for the next stage, return a 0-d token. Backward: the gradient of
    ``x`` received from the next stage (times the token's gradient, normally 1)."""

    backward_always_runs = True

    def __init__(self, mailbox):
        self.mailbox = mailbox
        self.instance_name = "pipeline.send"

    def forward(self, ctx, x, key):
        ctx.key = key
        self.mailbox.activations_out[key] = contiguous(x)
        return ctx.xp.zeros((), x.dtype)

    def backward(self, ctx, grad):
        received = self.mailbox.gradients_in.pop(ctx.key)
        return received if float(grad) == 1.0 else received * grad


class Recv(Primitive):
    """Forward: the activation received from the previous stage, as part of this stage's
    graph (``anchor`` is a 0-d tensor that requires grad, so the call is recorded).
    Backward: the input gradient goes to the outbox for the previous stage."""

    backward_always_runs = True

    def __init__(self, mailbox):
        self.mailbox = mailbox
        self.instance_name = "pipeline.recv"

    def forward(self, ctx, anchor, payload, key):
        ctx.key = key
        return payload

    def backward(self, ctx, grad):
        self.mailbox.gradients_out[ctx.key] = contiguous(grad)
        return (None,)


class Channel:
    """Tagged nonblocking messages over a communicator (world ranks) for ``num_stages``."""

    def __init__(self, communicator, num_stages):
        self.comm = communicator
        # Headers, and any array staged through host memory, go over the host communicator.
        self.host = communicator.host_communicator
        self.num_stages = num_stages

    def _tag(self, boundary, microbatch, kind, index):
        return ((microbatch * self.num_stages + boundary) * 3 + kind) * MAX_TENSORS + index

    # ---- one tagged message -------------------------------------------------------------
    def _staged(self, device):
        """Device arrays travel through host memory unless the communicator moves them
        with tags: NCCL has no tags and runs a pair's messages in posting order on one
        stream, where a schedule's early receives would deadlock; MPI takes only NumPy
        buffers (the virtual GPU's arrays are NumPy, so they go directly)."""
        return not device.is_host and (self.host is not self.comm or not device.virtual)

    def _isend(self, array, device, dest, tag):
        if self._staged(device):
            array = get_device("CPU").copy_from(array, device)
        return self._post_send(array, dest, tag)

    def _post_send(self, array, dest, tag):
        return watched_request(self.host, self.host.isend(array, dest, tag), "send", dest)

    def _post_recv(self, out, source, tag):
        return watched_request(self.host, self.host.irecv(out, source, tag), "recv", source)

    def _irecv(self, shape, dtype, device, source, tag):
        """A request whose ``wait()`` gives the received array on ``device``."""
        if not self._staged(device):
            return self._post_recv(device.xp.empty(shape, dtype), source, tag)
        request = self._post_recv(np.empty(shape, dtype), source, tag)
        return Request(lambda: device.copy_from(request.wait(), get_device("CPU")))

    # ---- activations ----------------------------------------------------------------
    def send_activations(self, arrays, devices, dest, boundary, microbatch):
        """Post the header and the activations; returns the requests to wait on later."""
        header = pack_header(arrays, devices, f"the border after stage {boundary}")
        requests = [self._post_send(header, dest,
                                    self._tag(boundary, microbatch, _KIND_HEADER, 0))]
        for i, (array, device) in enumerate(zip(arrays, devices)):
            tag = self._tag(boundary, microbatch, _KIND_ACTIVATION, i)
            requests.append(self._isend(array, device, dest, tag))
        return requests

    def post_header(self, source, boundary, microbatch):
        header = np.empty(HEADER_LEN, np.int64)
        return self._post_recv(header, source, self._tag(boundary, microbatch, _KIND_HEADER, 0))

    def receive_activations(self, header_request, source, boundary, microbatch):
        """Wait for the header, then receive the activations it announces: ``[(array, device)]``."""
        out = []
        for i, (shape, dtype, device) in enumerate(unpack_header(header_request.wait())):
            tag = self._tag(boundary, microbatch, _KIND_ACTIVATION, i)
            out.append((self._irecv(shape, dtype, device, source, tag).wait(), device))
        return out

    # ---- gradients ------------------------------------------------------------------
    def send_gradients(self, arrays, devices, dest, boundary, microbatch):
        return [self._isend(array, device, dest,
                            self._tag(boundary, microbatch, _KIND_GRADIENT, i))
                for i, (array, device) in enumerate(zip(arrays, devices))]

    def post_gradients(self, like, source, boundary, microbatch):
        """Post receives for the gradients of the activations ``like`` ([(array, device)])."""
        return [(self._irecv(array.shape, array.dtype, device, source,
                             self._tag(boundary, microbatch, _KIND_GRADIENT, i)), device)
                for i, (array, device) in enumerate(like)]


def pack_header(arrays, devices, where):
    """The int64 header announcing ``arrays``: their count, then per array its dtype, whether
    it lives on the host, and its shape. ``where`` names the crossing for errors."""
    if len(arrays) > MAX_TENSORS:
        raise ValueError(f"{len(arrays)} tensors cross {where}; at most {MAX_TENSORS} may")
    header = np.zeros(HEADER_LEN, np.int64)
    header[0] = len(arrays)
    for i, (array, device) in enumerate(zip(arrays, devices)):
        code = dtype_code(array.dtype, default=None)
        if array.ndim > MAX_DIMS or code is None:
            raise TypeError(f"a tensor of dtype {array.dtype} and {array.ndim} dims cannot "
                            f"cross {where} (at most {MAX_DIMS} dims, dtypes "
                            f"{[str(d) for d in WIRE_DTYPES]})")
        base = 1 + i * (3 + MAX_DIMS)
        header[base:base + 3] = (code, int(device.is_host), array.ndim)
        header[base + 3:base + 3 + array.ndim] = array.shape
    return header


def unpack_header(header):
    """``[(shape, dtype, device)]`` announced by ``header``: host arrays land on the host,
    device arrays on this process's device."""
    out = []
    for i in range(int(header[0])):
        base = 1 + i * (3 + MAX_DIMS)
        code, on_host, ndim = (int(v) for v in header[base:base + 3])
        device = get_device("CPU") if on_host else get_device(None)
        if not on_host and device.is_host:
            device = get_device("GPU")
        out.append((tuple(int(v) for v in header[base + 3:base + 3 + ndim]),
                    dtype_from_code(code), device))
    return out


def anchor_on(device, cache):
    """A 0-d tensor that requires grad on ``device``: Recv's input, so the call is taped."""
    if device not in cache:
        cache[device] = Tensor._make(device.xp.zeros((), np.float32), device, requires_grad=True)
    return cache[device]
