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

``BucketedAllreduce`` keeps the plans and the buffers between steps. ``BucketExchange`` is
the one path every dense bucketed allreduce takes (DistOpt's options, the
``DistributedGradReducer`` and so ``TrainOneStepCell``): each gradient is written into its
slot of its bucket's flat buffer, and a bucket's nonblocking allreduce is launched as soon as
its last member is in, so the network works on bucket ``j`` while the host fills bucket
``j + 1`` and updates the parameters of bucket ``j - 1`` (where the communicator cannot
progress in the background, MPI, each bucket is reduced by the faster blocking call instead:
see ``launch_allreduce``). The slots can be filled during backward, as each gradient becomes
final (``bucket_fill.BucketFill``, a backward observer), or from arrays afterwards
(``BucketedAllreduce.start``); both give the same bits.

>>> [b.members for b in plan_buckets([3, 5, 100, 2], itemsize=4, buff_size=32, threshold=50)]
[(0, 1), (2,), (3,)]
"""
import bisect
import math

import numpy as np

from ... import kernels
from ...communication import hooks
from ...communication.reduction import array_module
from ...communication.communicator import Request
from .grad_arrays import gradient_array

__all__ = ["Bucket", "FusionGroups", "plan_buckets", "pack", "unpack", "write_slot", "wire_bound", "HALF_MAX",
           "cast_to_half", "cast_from_half", "launch_allreduce", "launch_alone",
           "BucketedAllreduce", "BucketExchange", "fused_broadcast"]

HALF_MAX = float(np.finfo(np.float16).max)      # 65504, the largest finite float16


class FusionGroups(tuple):
    """One fusion id per parameter (MindSpore's ``Parameter.comm_fusion``): the gradients of
    one id share one bucket, the ids travel in separate allreduces."""


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
    xp = array_module(out)
    for pos, start, stop in bucket.slices():
        a = arrays[pos]
        # a view shaped like the array: no temporary even for non-contiguous input
        write_slot(xp, a, out[start:stop] if a is None else out[start:stop].reshape(a.shape),
                   scale)
    return out


def write_slot(xp, grad, slot, scale=1.0, half=False, bound=None):
    """``slot[...] = grad * scale``, the one way a gradient enters a bucket (None -> zeros).

    ``half``: ``slot`` is float16 (the wire) and is then clamped to ``±bound`` when a bound
    is given (``wire_bound``)."""
    if grad is None:
        slot[...] = 0
    elif half:
        cast_to_half(xp, grad, slot, scale)
        if bound is not None:
            xp.clip(slot, -bound, bound, out=slot)
    elif scale == 1.0:
        slot[...] = grad
    else:
        xp.multiply(grad, scale, out=slot, casting="unsafe")
    return slot


def _power_of_two(scale):
    """Whether multiplying by ``scale`` is exact (barring overflow and subnormals)."""
    return scale > 0 and math.frexp(scale)[0] == 0.5


def wire_bound(clip):
    """The float16 clamp for ``clip`` (in wire units): rounded to float16 and never past the
    largest finite float16 (so clipping never produces inf); None stays None."""
    return None if clip is None else float(np.float16(min(float(clip), HALF_MAX)))


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


def launch_alone(comm, grad, out, scale=1.0):
    """Allreduce one gradient sent alone into the flat ``out``: ``(request, owed)``.

    It goes on the wire unscaled (as it is when contiguous: no packing copy) and ``owed`` is
    the ``scale`` still to apply to the result. Unscaled whatever the rank's own array looks
    like: a missing or non-contiguous gradient on one rank must not change what the others
    owe.
    """
    if grad is not None and grad.flags.c_contiguous:
        return launch_allreduce(comm, grad.reshape(-1), out), scale
    write_slot(array_module(out), grad, out if grad is None else out.reshape(grad.shape))
    return launch_allreduce(comm, out, out), scale


class BucketedAllreduce:
    """Fused, nonblocking sum-allreduce of one gradient per parameter: plans and buffers.

    ``start`` fills and launches every bucket (through a ``BucketExchange``); ``finish``
    waits for one bucket and returns ``(flat result, [(position, view)])``. Plans and buffers
    are cached per (threshold, wire dtype, splits): parameter shapes do not change between
    steps. Gradients are grouped by (device, dtype) first, since one buffer holds one dtype.
    ``comm_for(device)`` picks the communicator for a device's buckets (default: ``comm``).
    """

    def __init__(self, comm, buff_size, comm_for=None):
        self.comm = comm
        self.buff_size = buff_size
        self._comm_for = comm_for
        self._plans = {}
        self._buffers = {}
        self._views = {}

    def communicator(self, device):
        """The communicator that carries the buckets of gradients living on ``device``."""
        return self.comm if self._comm_for is None else self._comm_for(device)

    def plan(self, params, threshold, half=False, splits=()):
        """``[(bucket, device, wire dtype, result dtype)]`` for these parameters.

        ``splits`` (MindSpore's ``all_reduce_fusion_config``, parameter positions such as
        ``[20, 35]``) fixes the groups instead: parameters ``[0, 20)``, ``[20, 35)`` and
        ``[35, end)`` each travel in one bucket (per device and dtype), whatever their size.
        ``FusionGroups`` (one fusion id per parameter, ``Cell.set_comm_fusion``) instead puts
        the parameters of one id in one bucket, wherever they are in the list."""
        key = (threshold, half, type(splits).__name__, tuple(splits))
        if key not in self._plans:
            groups = {}
            by_id = isinstance(splits, FusionGroups)
            for pos, p in enumerate(params):
                segment = splits[pos] if by_id else bisect.bisect_right(splits, pos)
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
            # the slots are reduced in place: on the host, in memory the communicator
            # reduces fastest (shared between the ranks of one machine over MPI)
            comm = self.communicator(device) if tag == "send" and device.is_host else None
            buf = self._buffers[key] = (device.xp.empty(bucket.size, dtype) if comm is None
                                        else comm.allreduce_buffer(bucket.size, dtype))
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

    def start(self, params, grads, threshold, half=False, prescale=1.0, clip=None, splits=(),
              fresh=False, owner="DistOpt"):
        """Fill and launch every bucket of ``grads`` (aligned with ``params``); returns the
        pending list for ``finish``. The arguments are ``BucketExchange``'s.

        ``half``: the wire carries ``float16(grad * prescale)``, clamped to ``±clip`` (in
        wire units) when ``clip`` is given. Otherwise the wire carries ``grad * prescale``
        for packed buckets and the gradient itself for one sent alone (``finish`` applies
        the prescale it still owes).
        """
        exchange = BucketExchange(self, params, threshold, half, prescale, clip, splits=splits,
                                  fresh=fresh, owner=owner)
        return exchange.launch_rest(grads)

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


class BucketExchange:
    """One step's bucketed allreduce of ``params``' gradients: the one dense bucket path.

    ``put(position, grad)`` writes a gradient into its slot (times ``prescale``; float16 on a
    ``half`` wire, clamped to ``±clip`` wire units when given) and launches every bucket that
    is complete. During backward a ``BucketFill`` observer calls it as soon as each gradient
    is final, while the array is still in cache; ``launch_rest(grads)`` then writes what is
    missing (gradients passed as arrays, or zeros) and launches the rest, returning the
    pending list for ``BucketedAllreduce.finish``.

    Launch order is the same on every rank whatever the timing: one fixed sequence (slotted
    buckets by their last member from the end, the order backward usually completes them,
    then the gradients sent alone), and a complete bucket waits for the ones before it. A
    rank where a parameter got no gradient therefore launches late, never in another order.

    A gradient sent alone (``threshold`` elements or more, fp32, ``launch``) gets no slot: it
    goes out from its own array after backward (until then it may still be shared with the
    computation of other gradients). ``launch=False`` only fills (every bucket gets slots:
    top-K and threshold selection read the buffers); ``launch_rest`` still launches.
    Buffers are ``fused``'s, kept under ``tag``, or new ones with ``fresh`` (the reducer
    hands its results out). Gradients go through ``gradient_array`` (``owner`` names the
    caller in its errors).
    """

    def __init__(self, fused, params, threshold, half=False, prescale=1.0, clip=None,
                 launch=True, tag="send", splits=(), fresh=False, owner="DistOpt"):
        self.fused, self.params, self.half, self.prescale = fused, params, half, prescale
        self.launch, self.owner = launch, owner
        self.bound = wire_bound(clip)
        self.plan = fused.plan(params, threshold, half, splits)
        self.order = self._launch_order()
        self.missing = [len(entry[0].members) for entry in self.plan]
        self.filled = set()        # positions whose gradient is in its slot
        self.pending = {}          # plan index -> pending item for ``finish``
        self.next = 0              # position in ``order`` of the next bucket to launch
        self.buffers, self.slots = [], {}    # slots: position -> (plan index, view)
        shapes = [p.shape for p in params]
        for index, (bucket, device, wire, _) in enumerate(self.plan):
            flat = (device.xp.empty(bucket.size, wire) if fresh else
                    fused.buffer(tag, bucket, device, wire))
            self.buffers.append(flat)
            if self._slotted(bucket):
                views = (dict(unpack(bucket, flat, shapes)) if fresh else
                         fused.views(tag, bucket, device, wire, shapes))
                for pos in bucket.members:
                    self.slots[pos] = (index, views[pos])

    def _launch_order(self):
        """Plan indices in launch order, the same on every rank: slotted buckets first, by
        their last member from the end (backward completes the last layers first), then the
        ones sent alone (those go out only after backward, so they must not hold up the
        rest)."""
        def key(index):
            bucket = self.plan[index][0]
            return (not self._slotted(bucket), -max(bucket.members))
        return sorted(range(len(self.plan)), key=key)

    def _slotted(self, bucket):
        """Whether the bucket's members are written into its buffer (one sent alone in fp32
        and launched keeps its own array)."""
        return bucket.fused or self.half or not self.launch

    def slot_for(self, pos):
        """``(slot, prescale)`` for a primitive to compute parameter ``pos``'s gradient
        straight into (``BackwardObserver.gradient_slot``), or None: where the slot is a
        plain ``prescale`` times the gradient in the parameter's dtype, and ``prescale`` a
        power of two (then the product scaled has the bits ``write_slot`` would give)."""
        entry = self.slots.get(pos)
        if entry is None or pos in self.filled or self.half or not _power_of_two(self.prescale) \
                or entry[1].dtype != self.params[pos].dtype:
            return None
        return entry[1], self.prescale

    def put(self, pos, grad):
        """Write parameter ``pos``'s gradient (None: zeros) into its slot, launch what is
        ready, and return the slot (the gradient's new home). A gradient computed in the
        slot already (``slot_for``) is not written again."""
        index, slot = self.slots[pos]
        if grad is not slot:
            g = gradient_array(grad, self.params[pos], self.owner)
            write_slot(self.plan[index][1].xp, g, slot, self.prescale, self.half, self.bound)
        self.filled.add(pos)
        self.missing[index] -= 1
        # under --compute-slots a launch would wait for the other ranks mid-backward while
        # this rank still holds its activations: then everything goes out in launch_rest
        if self.launch and hooks.overlap_allowed():
            self._launch_ready()
        return slot

    def _launch_ready(self):
        """Launch, in the fixed order, every bucket whose members have all arrived."""
        while self.next < len(self.order) and self.missing[self.order[self.next]] == 0:
            self._launch(self.order[self.next], None)

    def _launch(self, index, grads):
        bucket, device, _, dtype = self.plan[index]
        comm, flat = self.fused.communicator(device), self.buffers[index]
        if self._slotted(bucket):
            request, owed = launch_allreduce(comm, flat, flat), 1.0
        else:
            request, owed = launch_alone(comm, grads[bucket.members[0]], flat, self.prescale)
        self.pending[index] = (bucket, device, dtype, self.half, request, owed)
        self.next += 1

    def complete(self, grads):
        """Write every slot still empty from ``grads`` (aligned with the parameters; None:
        zeros), bucket by bucket in launch order, so each goes out as soon as it is full.
        Returns the gradients as arrays, every slotted one its slot."""
        for index in self.order:
            bucket = self.plan[index][0]
            if self._slotted(bucket):
                for pos in bucket.members:
                    if pos not in self.filled:
                        self.put(pos, grads[pos])
        return [self.slots[pos][1] if pos in self.slots else
                gradient_array(g, p, self.owner)
                for pos, (g, p) in enumerate(zip(grads, self.params))]

    def launch_rest(self, grads):
        """``complete(grads)``, then launch every bucket not launched yet (in the fixed
        order); returns the pending list, in launch order."""
        grads = self.complete(grads)
        while self.next < len(self.order):
            self._launch(self.order[self.next], grads)
        return [self.pending[index] for index in self.order]


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
