"""Backward writes each gradient straight into its slot of a fused bucket.

Packing gradients that backward already left in arrays of their own costs one more pass over
every byte, after backward, on memory that has gone cold. ``BucketFill`` is a backward
observer (``backward_observer.py``) that avoids it: the engine tells it when a parameter's
gradient is final (every node that consumes the parameter has run), and it hands the
gradient to its ``BucketExchange`` (``buckets.py``), which writes it (times the
pre-division, cast to float16 for an fp16 wire, clamped when clipping) into the parameter's
slot, a view of the bucket's flat buffer, while the array is still in cache. The slot is
handed out as the gradient, and a bucket's allreduce is launched when its last member
arrives, while backward goes on with earlier layers.

Where the slot is just the gradient times a power of two (fp32 on any number of ranks: the
pre-division is 1/world for a power-of-two world and none otherwise; a sparse option's
buffer), it is offered to backward itself (``gradient_slot``): a weight gradient that
``MatMul`` or ``Conv2D`` computes goes straight into the bucket, and nothing is copied.
Other primitives (biases among them) and fp16 wires take the copy.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist.autograd import run_backward
>>> from minitorch_dist.parallel.data_parallel.buckets import BucketedAllreduce, BucketExchange
>>> w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
>>> b = ms.Parameter(ms.Tensor(np.ones(1, np.float32)), name="b")
>>> exchange = BucketExchange(BucketedAllreduce(None, buff_size=64), [w, b], threshold=100,
...                           launch=False)              # fill only: no communicator needed
>>> loss = (w * 2.0).sum() + (b * b).sum()
>>> grads = run_backward([loss], [np.ones((), np.float32)], targets=[w, b],
...                      observer=BucketFill(exchange))
>>> [g.tolist() for g in grads], grads[0].base is grads[1].base     # slots of one buffer
([[2.0, 2.0, 2.0], [2.0]], True)
"""
from ...backward_observer import BackwardObserver

__all__ = ["BucketFill"]


class BucketFill(BackwardObserver):
    """Backward observer: each slotted parameter's final gradient goes to ``exchange.put``,
    and its slot is what backward hands out for it (memory of its own, so not copied).

    Parameters without a slot (a gradient sent alone from its own array) are left alone:
    ``exchange.launch_rest(grads)`` sends them, with everything still missing, after
    backward."""

    def __init__(self, exchange):
        self.exchange = exchange
        self.positions = {id(exchange.params[pos]): pos for pos in exchange.slots}

    def gradient_slot(self, target):
        pos = self.positions.get(id(target))
        return None if pos is None else self.exchange.slot_for(pos)

    def on_gradient_final(self, target, grad):
        pos = self.positions.get(id(target))
        return None if pos is None else self.exchange.put(pos, grad)
