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
        self.final_after = _last_consumers(nodes, set(self.order))

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
    """``{node index: [target ids]}``: after which node each target's gradient is final."""
    if not target_ids:
        return {}
    last = {}
    for index, node in enumerate(nodes):
        for inp in node.inputs:
            if inp is not None and id(inp) in target_ids:
                last[id(inp)] = index
    by_index = {}
    for tid, index in last.items():
        by_index.setdefault(index, []).append(tid)
    return by_index
