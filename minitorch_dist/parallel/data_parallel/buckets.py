"""Gradient fusion: many small gradients share one flat buffer and one allreduce.

An allreduce has a fixed cost per call (latency, launching, MPI bookkeeping) on top of its
per-byte cost, so sending fifty bias vectors one by one is much slower than sending them
together. ``plan_buckets`` decides which gradients share a buffer (SINGA's ``fusedSynch``,
Horovod's tensor fusion, PyTorch DDP's buckets):

* a gradient with ``threshold`` elements or more is sent alone, straight from its own array;
* smaller ones are packed, in order, into a flat buffer of at most ``buff_size`` bytes; one
  that does not fit in the open bucket starts a new one (a bucket is never split);
* a gradient bigger than a whole bucket is also sent alone, so no buffer can overflow (SINGA
  copied such tensors into a fixed ``maxSize`` buffer in its fp16 and sparse paths).

``BucketedAllreduce`` keeps the plans and the buffers between steps and launches one
nonblocking allreduce per bucket as soon as it is packed, so the network works on bucket
``j`` while the host packs bucket ``j + 1`` and updates the parameters of bucket ``j - 1``
(where the communicator cannot progress in the background, MPI, each bucket is reduced by
the faster blocking call instead: see ``launch_allreduce``).

>>> [b.members for b in plan_buckets([3, 5, 100, 2], itemsize=4, buff_size=32, threshold=50)]
[(0, 1), (2,), (3,)]
"""
import bisect

import numpy as np

from ... import kernels
from ...communication.reduction import array_module
from ...communication.communicator import Request

__all__ = ["Bucket", "plan_buckets", "pack", "unpack", "cast_to_half", "cast_from_half",
           "launch_allreduce", "launch_bucket", "BucketedAllreduce", "fused_broadcast"]


class Bucket:
    """Gradients (by position in the parameter list) that share one flat buffer.

    ``offsets[j]`` is where member ``j`` starts (in elements), ``size`` the filled length;
    ``fused`` is False for a gradient sent alone.
    """

    __slots__ = ("members", "sizes", "offsets", "size", "fused")

    def __init__(self, members, sizes, fused=True):
        self.members, self.sizes, self.fused = tuple(members), tuple(sizes), fused
        offsets, total = [], 0
        for n in self.sizes:
            offsets.append(total)
            total += n
        self.offsets, self.size = tuple(offsets), total

    def slices(self):
        """``(position, start, stop)`` of every member in the flat buffer."""
        return [(pos, off, off + n) for pos, off, n in zip(self.members, self.offsets, self.sizes)]

    def __repr__(self):
        kind = "fused" if self.fused else "alone"
        return f"Bucket({kind}, members={self.members}, offsets={self.offsets}, size={self.size})"


def plan_buckets(sizes, itemsize, buff_size, threshold, members=None):
    """Split gradients of ``sizes`` elements (``itemsize`` bytes each) into buckets.

    ``members`` names the gradients (default ``0..len-1``); the order is kept.
    """
    for name, value in (("buff_size", buff_size), ("threshold", threshold), ("itemsize", itemsize)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"plan_buckets: {name} must be a positive int, got {value!r}")
    members = range(len(sizes)) if members is None else members
    capacity = int(buff_size) // int(itemsize)      # elements per bucket
    buckets, open_members, open_sizes, used = [], [], [], 0

    def close():
        nonlocal open_members, open_sizes, used
        if open_members:
            buckets.append(Bucket(open_members, open_sizes))
        open_members, open_sizes, used = [], [], 0

    for pos, n in zip(members, sizes):
        n = int(n)
        if n >= threshold or n > capacity:
            buckets.append(Bucket([pos], [n], fused=False))
            continue
        if used + n > capacity:
            close()
        open_members.append(pos)
        open_sizes.append(n)
        used += n
        if used == capacity:
            close()
    close()
    return buckets


def pack(bucket, arrays, out, scale=1.0):
    """Copy ``arrays[position] * scale`` of every member into its slice of the flat ``out``
    (None -> 0). Scaling while copying saves a separate pass over the buffer."""
    for pos, start, stop in bucket.slices():
        a = arrays[pos]
        if a is None:
            out[start:stop] = 0
            continue
        view = out[start:stop].reshape(a.shape)   # no temporary even for non-contiguous input
        if scale == 1.0:
            view[...] = a
        else:
            array_module(out).multiply(a, scale, out=view, casting="unsafe")
    return out


def unpack(bucket, flat, shapes):
    """``[(position, view of flat shaped like shapes[position])]`` for every member."""
    return [(pos, flat[start:stop].reshape(shapes[pos])) for pos, start, stop in bucket.slices()]


def cast_to_half(xp, src, dst, scale=1.0):
    """``dst[...] = float16(src * scale)``; ``dst`` is float16 and shaped like ``src``."""
    if xp is np and src.dtype in (np.float32, np.float64):
        kernels.fp16_pack(src, scale, out=dst)
    elif scale == 1.0:
        dst[...] = src
    else:
        xp.multiply(src, scale, out=dst, casting="unsafe")
    return dst


def cast_from_half(xp, src, dst, scale=1.0):
    """``dst[...] = src / scale`` from float16 ``src`` into a float ``dst``."""
    if xp is np and dst.dtype == np.float32 and dst.flags.c_contiguous:
        kernels.fp16_unpack(src, scale, out=dst)
    else:
        dst[...] = src
        if scale != 1.0:
            dst /= scale
    return dst


def launch_allreduce(comm, array, out):
    """Start a sum-allreduce of ``array`` into ``out``; a ``Request`` either way.

    Nonblocking where the communicator progresses in the background; otherwise the blocking
    call, which is faster there and lets nothing overlap that could have overlapped.
    """
    if comm.progresses_in_background:
        return comm.iallreduce(array, out=out)
    return Request.completed(comm.allreduce(array, out=out))


def launch_bucket(comm, bucket, arrays, out, scale=1.0):
    """Allreduce one bucket of ``arrays`` into the flat ``out``: ``(request, owed)``.

    A gradient sent alone goes on the wire unscaled (as it is when contiguous: no packing
    copy) and ``owed`` is the ``scale`` still to apply to the result; packed members are
    multiplied by ``scale`` while packing and ``owed`` is 1. Which one depends only on the
    plan, never on a rank's own array (a missing or non-contiguous gradient on one rank
    must not change what the others owe).
    """
    g = arrays[bucket.members[0]]
    if bucket.fused:
        return launch_allreduce(comm, pack(bucket, arrays, out, scale), out), 1.0
    if g is not None and g.flags.c_contiguous:
        return launch_allreduce(comm, g.reshape(-1), out), scale
    return launch_allreduce(comm, pack(bucket, arrays, out), out), scale


class BucketedAllreduce:
    """Fused, nonblocking sum-allreduce of one gradient per parameter.

    ``start`` packs every bucket and launches its allreduce right away; ``finish`` waits
    for one bucket and returns ``(flat result, [(position, view)])``. Plans and buffers are
    cached per (threshold, wire dtype): parameter shapes do not change between steps.
    Gradients are grouped by (device, dtype) first, since one buffer holds one dtype.
    """

    def __init__(self, comm, buff_size):
        self.comm = comm
        self.buff_size = buff_size
        self._plans = {}
        self._buffers = {}
        self._views = {}

    def plan(self, params, threshold, half=False, splits=()):
        """``[(bucket, device, wire dtype, result dtype)]`` for these parameters.

        ``splits`` (MindSpore's ``all_reduce_fusion_config``, parameter positions such as
        ``[20, 35]``) fixes the groups instead: parameters ``[0, 20)``, ``[20, 35)`` and
        ``[35, end)`` each travel in one bucket (per device and dtype), whatever their size."""
        key = (threshold, half, tuple(splits))
        if key not in self._plans:
            groups = {}
            for pos, p in enumerate(params):
                segment = bisect.bisect_right(splits, pos)
                groups.setdefault((segment, p.device, np.dtype(p.dtype)), []).append(pos)
            plan = []
            for (_, device, dtype), members in groups.items():
                wire = np.dtype(np.float16) if half else dtype
                sizes = [params[pos].size for pos in members]
                buckets = ([Bucket(members, sizes)] if splits else
                           plan_buckets(sizes, wire.itemsize, self.buff_size, threshold, members))
                for bucket in buckets:
                    plan.append((bucket, device, wire, dtype))
            self._plans[key] = plan
        return self._plans[key]

    def buffer(self, tag, bucket, device, dtype):
        """A flat buffer for ``bucket`` kept between steps (contents undefined)."""
        key = (tag, bucket.members, device, np.dtype(dtype))
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = device.xp.empty(bucket.size, dtype)
        return buf

    def views(self, tag, bucket, device, dtype, shapes):
        """``{position: view}`` of every member's slot in ``buffer(tag, ...)``, shaped like
        ``shapes[position]``; kept between steps, so a slot is recognised by identity."""
        key = (tag, bucket.members, device, np.dtype(dtype))
        views = self._views.get(key)
        if views is None:
            flat = self.buffer(tag, bucket, device, dtype)
            views = self._views[key] = dict(unpack(bucket, flat, shapes))
        return views

    def start(self, params, grads, threshold, half=False, prescale=1.0, clip=None):
        """Pack and launch every bucket; returns the pending list for ``finish``.

        ``half``: the wire carries ``float16(grad * prescale)``, clamped to ``±clip`` (in
        wire units) when ``clip`` is given. Otherwise the wire carries ``grad * prescale``
        for packed buckets and the gradient itself for one sent alone (``finish`` applies
        the prescale it still owes).
        """
        pending = []
        for bucket, device, wire, dtype in self.plan(params, threshold, half):
            xp = device.xp
            send = self.buffer("send", bucket, device, wire)
            if half:
                for pos, start, stop in bucket.slices():
                    g = grads[pos]
                    if g is None:
                        send[start:stop] = 0
                    else:
                        cast_to_half(xp, g, send[start:stop].reshape(g.shape), prescale)
                if clip is not None:
                    bound = float(np.float16(min(float(clip), 65504.0)))
                    xp.clip(send, -bound, bound, out=send)
                request, owed = launch_allreduce(self.comm, send, send), 1.0
            else:
                request, owed = launch_bucket(self.comm, bucket, grads, send, prescale)
            pending.append((bucket, device, dtype, half, request, owed))
        return pending

    def finish(self, params, item, divisor):
        """Wait for one pending bucket; the result (sum / ``divisor``) and per-parameter views."""
        bucket, device, dtype, half, request, owed = item
        reduced = request.wait()
        if half:
            flat = cast_from_half(device.xp, reduced, self.buffer("recv", bucket, device, dtype),
                                  divisor)
        else:
            flat = reduced
            if owed != 1.0:
                flat *= owed
            if divisor != 1:
                flat /= divisor
        return flat, unpack(bucket, flat, [p.shape for p in params])


def fused_broadcast(comm, arrays_by_device, root=0):
    """Broadcast many arrays from ``root`` with one call per (device, dtype) group, in place.

    ``arrays_by_device`` is a list of ``(device, array)``; every rank must pass arrays of the
    same shapes and dtypes in the same order.
    """
    groups = {}
    for device, a in arrays_by_device:
        groups.setdefault((device, np.dtype(a.dtype)), []).append(a)
    for (device, dtype), arrays in groups.items():
        bucket = Bucket(range(len(arrays)), [a.size for a in arrays])
        flat = pack(bucket, arrays, device.xp.empty(bucket.size, dtype))
        comm.broadcast(flat, root)
        for pos, view in unpack(bucket, flat, [a.shape for a in arrays]):
            arrays[pos][...] = view
