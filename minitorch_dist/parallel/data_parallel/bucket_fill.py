"""Backward writes each gradient straight into its slot of a fused bucket.

``BucketedAllreduce.start`` packs gradients that backward already left in arrays of their
own: one more pass over every byte, after backward, on memory that has gone cold. A
``BucketFill`` instead gives the autograd engine one *sink* per parameter
(``run_backward(sinks=...)``): as soon as a parameter's gradient is final, the sink writes it
(times the pre-division, cast to float16 for an fp16 wire, clamped when clipping) into the
parameter's slot, a view of the bucket's flat buffer, while the array is still in cache, and
hands that view out as the gradient. When the last member of a bucket arrives the bucket's
allreduce is launched (``launch_allreduce``), while backward goes on with earlier layers.

Launch order is the same on every rank whatever the timing: buckets go out in one fixed
sequence (last layers first, the order backward usually completes them), and a full bucket
waits for the ones before it. A rank where a parameter got no gradient (its slot is zeroed
at the end) therefore launches late, never in another order.

A gradient sent alone (``threshold`` elements or more) is not copied: it keeps its own array,
as ``start`` sends it, and goes out after backward (it may still be shared with the
computation of other gradients until then). The same slots serve top-K and threshold
selection (``launch=False``: the buffer is only filled).
"""
import numpy as np

from .buckets import cast_to_half, launch_allreduce, launch_bucket
from .grad_arrays import gradient_array

__all__ = ["BucketFill"]


class BucketFill:
    """One backward's gradients written into ``fused``'s buffers (tagged ``tag``).

    ``half``/``prescale``/``clip`` mean what they mean for ``BucketedAllreduce.start``.
    ``sinks`` is the ``run_backward`` argument; after backward, ``launch_rest(grads)``
    launches what has not gone out and returns the pending list for ``finish``.
    """

    def __init__(self, fused, params, threshold, half=False, prescale=1.0, clip=None,
                 launch=True, tag="send"):
        self.fused, self.params, self.half = fused, params, half
        self.prescale, self.launch, self.tag = prescale, launch, tag
        self.bound = None if clip is None else float(np.float16(min(float(clip), 65504.0)))
        self.plan = fused.plan(params, threshold, half)
        self.order = self._launch_order()
        self.missing = [len(entry[0].members) for entry in self.plan]
        self.filled = set()        # positions whose gradient is in its slot
        self.pending = {}          # plan index -> pending item of ``start``'s format
        self.next = 0              # position in ``order`` of the next bucket to launch
        self.sinks = {}
        for index, (bucket, device, wire, _) in enumerate(self.plan):
            if not self._slotted(bucket):
                continue
            views = fused.views(tag, bucket, device, wire, [p.shape for p in params])
            for pos in bucket.members:
                self.sinks[id(params[pos])] = self._sink(index, pos, views[pos])

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
        and launched by this fill keeps its own array)."""
        return bucket.fused or self.half or not self.launch

    def _sink(self, index, pos, view):
        def sink(grad):
            g = gradient_array(grad, self.params[pos], "DistOpt")
            xp = self.plan[index][1].xp
            if self.half:
                cast_to_half(xp, g, view, self.prescale)
                if self.bound is not None:
                    xp.clip(view, -self.bound, self.bound, out=view)
            elif self.prescale == 1.0:
                view[...] = g
            else:
                xp.multiply(g, self.prescale, out=view, casting="unsafe")
            self.filled.add(pos)
            self.missing[index] -= 1
            if self.launch:
                self._launch_ready()
            return view
        return sink

    def _launch_ready(self):
        """Launch, in the fixed order, every bucket whose members have all arrived."""
        while self.next < len(self.order) and self.missing[self.order[self.next]] == 0:
            self._launch(self.order[self.next], None)

    def _launch(self, index, grads):
        bucket, device, wire, dtype = self.plan[index]
        send = self.fused.buffer(self.tag, bucket, device, wire)
        if self._slotted(bucket):
            request, owed = launch_allreduce(self.fused.comm, send, send), 1.0
        else:
            request, owed = launch_bucket(self.fused.comm, bucket, grads, send, self.prescale)
        self.pending[index] = (bucket, device, dtype, self.half, request, owed)
        self.next += 1

    def complete(self, grads):
        """Zero the slots of parameters that got no gradient; ``grads`` (what backward
        returned, aligned with the parameters) as arrays, every slotted one its view."""
        out = [None if pos in self.filled else gradient_array(g, p, "DistOpt")
               for pos, (g, p) in enumerate(zip(grads, self.params))]
        for index, (bucket, device, wire, _) in enumerate(self.plan):
            if not self._slotted(bucket):
                continue
            views = self.fused.views(self.tag, bucket, device, wire,
                                     [p.shape for p in self.params])
            for pos in bucket.members:
                if pos not in self.filled:
                    views[pos][...] = 0
                    self.filled.add(pos)
                    self.missing[index] -= 1
                out[pos] = views[pos]
        return out

    def launch_rest(self, grads):
        """After backward: complete the slots, launch every bucket not yet launched (in the
        fixed order) and return the pending list, in launch order."""
        grads = self.complete(grads)
        while self.next < len(self.order):
            self._launch(self.order[self.next], grads)
        return [self.pending[index] for index in self.order]
