"""How a caller watches or steers ``run_backward`` without living inside it.

The engine's loop stays the textbook one (topological order, each node's backward, gradients
delivered, leaves accumulated). Two features need more than the result, and both plug in
through a :class:`BackwardObserver` passed as ``run_backward(..., observer=...)``:

* gradient buckets (data parallel) want each target's gradient *as soon as it is final*,
  to copy it into a communication buffer and start sending while backward goes on
  (``on_gradient_final``);
* zero-bubble pipelines hold a stage's weight gradients back, send the input gradient to
  the previous stage, and only then compute them (``deferred_inputs``, ``before_deferred``;
  :class:`DeferGradients` does exactly that).

Buckets may also offer the memory a gradient is to end up in (``gradient_slot``): a
primitive that can write its product there (``MatMul``) then does, and no copy follows.

Every method has a no-op default, so an observer overrides only what it needs.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist.autograd import run_backward
>>> class Log(BackwardObserver):
...     def __init__(self):
...         self.seen = []
...     def on_gradient_final(self, target, grad):
...         self.seen.append(grad.tolist())
>>> w = ms.Tensor(np.array([2.0], np.float32), requires_grad=True)
>>> loss = (w * w).sum()
>>> log = Log()
>>> run_backward([loss], [np.ones((), np.float32)], targets=[w], observer=log)[0].tolist()
[4.0]
>>> log.seen
[[4.0]]
"""

__all__ = ["BackwardObserver", "DeferGradients", "FinalGradients"]


class BackwardObserver:
    """What ``run_backward`` tells an observer, and what it asks it. All no-ops by default."""

    def on_gradient_final(self, target, grad):
        """``target``'s gradient is final: every node that consumes it has run.

        Called once per target that got a gradient (only when ``run_backward`` has targets),
        while backward goes on with earlier nodes. Return an array to hand out instead of
        ``grad`` (it is handed out as is, so it must be memory of its own), or None.
        """
        return None

    def gradient_slot(self, target):
        """``(array, scale)``: memory that ``target``'s gradient times ``scale`` is to end up
        in, which the primitive producing the gradient may compute straight into (and return
        as the gradient); or None. Asked only where the gradient of one node is the whole of
        ``target``'s (a leaf, consumed once, with no gradient from a root) and that node's
        primitive writes slots (``writes_gradient_slots``). ``scale`` must be a power of two,
        so that the scaled product has the bits of the product, scaled.
        ``on_gradient_final`` then receives that array."""
        return None

    def deferred_inputs(self, node):
        """Positions of ``node``'s inputs whose gradients wait until every other gradient is
        computed and ``before_deferred`` has run (``needs_input_grad`` is narrowed to match,
        so a primitive with ``split_backward`` computes each part on its own)."""
        return ()

    def before_deferred(self):
        """Called once before the held-back gradients are computed (only if there are any)."""


class DeferGradients(BackwardObserver):
    """Zero-bubble's split of a backward: the gradients of ``tensors`` (e.g. a stage's
    weights) are computed last, after ``before()`` (e.g. sending the input gradient on).

    Only primitives with ``split_backward`` are split (for the others the two halves share
    the work, so nothing would be gained); the results are the same as without.
    """

    def __init__(self, tensors, before=None):
        self.ids = {id(t) for t in tensors}
        self.before = before

    def deferred_inputs(self, node):
        if not node.prim.split_backward:
            return ()
        return tuple(i for i, t in enumerate(node.inputs)
                     if t is not None and id(t) in self.ids and node.ctx.needs_input_grad[i])

    def before_deferred(self):
        if self.before is not None:
            self.before()


class FinalGradients:
    """The engine's side of ``on_gradient_final``: after which node each target's gradient
    is final (its last consumer in topological order), and the calls at that moment.

    ``leaves`` is the engine's ``{id(tensor): [tensor, gradient]}``; a gradient the observer
    replaces is replaced there and its id added to ``taken`` (it is handed out as is).
    Without an observer that overrides ``on_gradient_final`` this does nothing.
    """

    def __init__(self, observer, nodes, targets, leaves):
        self.observer, self.leaves = observer, leaves
        self.taken, self.reported, self.held = set(), set(), set()
        watching = type(observer).on_gradient_final is not BackwardObserver.on_gradient_final
        if watching and targets is None:
            raise ValueError("run_backward: an observer's on_gradient_final needs targets "
                             "(without them gradients go to .grad)")
        self.order = [id(t) for t in targets] if watching else []
        self.final_after, self.consumers = _last_consumers(nodes, set(self.order))
        self.slotting = watching and \
            type(observer).gradient_slot is not BackwardObserver.gradient_slot

    def slots(self, node, inputs):
        """``{input position: (array, scale)}``: the observer's slots for the targets whose
        gradient ``node`` alone produces (its only consumer, used once, nothing delivered
        yet), for its backward to write into (``Context.grad_slots``); None if there are
        none."""
        if not getattr(node.prim, "writes_gradient_slots", False):
            return None         # its backward would not use them (and its ctx may be bare)
        found = None
        for pos, inp in enumerate(inputs):
            tid = id(inp)
            if self.consumers.get(tid) != 1 or tid in self.leaves or inp.grad_fn is not None \
                    or not node.ctx.needs_input_grad[pos]:
                continue
            slot = self.observer.gradient_slot(inp)
            if slot is not None:
                found = {} if found is None else found
                found[pos] = slot
        return found

    def hold(self, node, positions):
        """These inputs' gradients are deferred: final only once the deferred half ran."""
        self.held.update(id(node.inputs[i]) for i in positions)

    def after(self, index):
        """Node ``index`` has run: report the targets it was the last consumer of."""
        for tid in self.final_after.pop(index, ()):
            if tid not in self.held:
                self._report(tid)

    def report_rest(self):
        """After backward: the targets no node consumes (a root, say) and the held ones."""
        for tid in self.order:
            self._report(tid)

    def _report(self, tid):
        entry = self.leaves.get(tid)
        if entry is None or tid in self.reported:     # no gradient, or reported already
            return
        self.reported.add(tid)
        replacement = self.observer.on_gradient_final(entry[0], entry[1])
        if replacement is not None:
            entry[1] = replacement
            self.taken.add(tid)


def _last_consumers(nodes, target_ids):
    """``({node index: [target ids]}, {target id: uses})``: after which node each target's
    gradient is final, and how many node inputs it is."""
    if not target_ids:
        return {}, {}
    last, uses = {}, {}
    for index, node in enumerate(nodes):
        for inp in node.inputs:
            if inp is not None and id(inp) in target_ids:
                last[id(inp)] = index
                uses[id(inp)] = uses.get(id(inp), 0) + 1
    by_index = {}
    for tid, index in last.items():
        by_index.setdefault(index, []).append(tid)
    return by_index, uses
