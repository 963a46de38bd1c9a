"""A sharded network's last all-reduce, deferred until after backward under compute slots.

Under ``--compute-slots`` a rank gives its slot back whenever it waits for other ranks, so
that only K ranks hold activations at once. An operator-sharded loss averaged over the
global batch defeats that: its forward ends with an all-reduce of the ranks' partial sums,
and every rank would wait there holding all of its activations (ResNet-50 at 224x224: about
7 GiB a rank). When that all-reduce is the network's last primitive call inside a
differentiation that allows it (``FusedMirrors`` under slots, power-of-two groups),
``DeferredAllReduce`` runs in its place:

* forward hands on this rank's partial sum in an array of its own, which later receives
  the total;
* backward needs not the total but the adjoint all-reduce of the gradient arriving there.
  That gradient is the seed (ones) through ``_ReplicaShare``, the same on every rank, so
  its sum over the group is the group size times it: computed without waiting, and kept;
* after backward, ``FinalReductions.finish`` all-reduces the partials into the outputs in
  place (the same collective on the same arrays as without deferral, so the same bits),
  then all-reduces the kept gradients and compares them, bit for bit, with what backward
  used: a difference is an error, never a silently different gradient.

Anything that needs the total earlier (a redistribution of the output, in
``ShardedCall``) calls ``settle``, which all-reduces at once; backward then all-reduces its
gradient as an ordinary all-reduce does.
"""
from ...backend.arrays import contiguous
from ...ops.primitive import Primitive
from .collectives import _deferral, communicator_for

__all__ = ["FinalReductions", "DeferredAllReduce", "final_reductions", "settle"]


class FinalReductions:
    """The all-reduces one differentiation deferred: ``defer`` in forward, ``finish`` after
    backward (in the same order on every rank: each rank defers the same calls)."""

    def __init__(self):
        self.pending = []               # [_Pending], in the order forward made them

    @staticmethod
    def accepts(comm):
        """Only over a power-of-two group is n copies of a seed gradient (a power of two
        over the copies) exactly their sum in any order, as the check expects."""
        return comm.size & (comm.size - 1) == 0

    def defer(self, tensor, comm, op="sum"):
        """``tensor``'s sum (or mean) over ``comm``, as a Tensor that holds this rank's part
        until ``finish`` (differentiable: see the module docstring)."""
        if op not in ("sum", "mean"):
            raise ValueError(f"a deferred all-reduce sums or averages, got op {op!r}")
        return _deferred.run(tensor, comm=comm, op=op, finals=self)

    def settle(self, array):
        """All-reduce now the deferred output whose array is ``array`` (if it is one)."""
        for item in self.pending:
            if item.out is array and not item.reduced:
                item.reduce()

    def finish(self):
        """The deferred totals, in place; then the check of the seed gradients used."""
        pending, self.pending = self.pending, []
        for item in pending:
            if not item.reduced:
                item.reduce()
        for item in pending:
            item.check_seed()


class _Pending:
    """One deferred all-reduce: the output array, its communicator and op, and the seed
    gradient with its reduction as backward computed it."""

    def __init__(self, out, comm, op):
        self.out, self.comm, self.op = out, comm, op
        self.reduced = False
        self.seed = self.seed_sum = None

    def reduce(self):
        self.out[...] = self.comm.allreduce(contiguous(self.out.copy()), self.op)
        self.reduced = True

    def backward(self, g):
        if self.reduced:        # settled in forward: an ordinary all-reduce's backward
            return self.comm.allreduce(contiguous(g), self.op)
        size = g.dtype.type(self.comm.size)
        total = g * size
        self.seed, self.seed_sum = g, total / size if self.op == "mean" else total
        return self.seed_sum

    def check_seed(self):
        if self.seed is None:       # backward never reached it, or it was settled first
            return
        total = self.comm.allreduce(contiguous(self.seed), self.op)
        if not bool((total == self.seed_sum).all()):
            raise RuntimeError(
                "compute slots deferred the sharded network's final all-reduce until after "
                "backward, assuming every rank's loss gradient is the same; the ranks' "
                f"gradients reduce ({self.op}) to {total!r}, not the {self.seed_sum!r} used. Run without "
                "--compute-slots (the gradients of this step are not the network's)")


class DeferredAllReduce(Primitive):
    """AllReduce("sum" or "mean") whose forward leaves the total for later
    (``FinalReductions``)."""

    def forward(self, ctx, x, comm, op, finals):
        ctx.pending = _Pending(contiguous(x).copy(), communicator_for(comm, ctx.device), op)
        finals.pending.append(ctx.pending)
        return ctx.pending.out

    def backward(self, ctx, g):
        return (ctx.pending.backward(g),)


_deferred = DeferredAllReduce()


def final_reductions():
    """The running differentiation's ``FinalReductions`` on this thread, or None where its
    last all-reduce must run at once."""
    current = _deferral.current
    return getattr(current, "final_reductions", None)


def settle(tensor):
    """``tensor`` holds its total from here on, if it was a deferred all-reduce's output."""
    finals = final_reductions()
    if finals is not None and finals.pending:
        finals.settle(tensor.data)
