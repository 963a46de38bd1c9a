"""``run_backward(observer=...)``: the ``BackwardObserver`` interface.

``on_gradient_final`` sees each target's gradient once, as soon as it is final (every consumer
has run) and not before; what it returns is handed out as is (not copied). ``deferred_inputs``
holds input gradients back until ``before_deferred`` has run; the results do not change."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.autograd import run_backward
from minitorch_dist.backward_observer import BackwardObserver, DeferGradients


def leaf(values):
    return ms.Tensor(np.asarray(values, np.float32), requires_grad=True)


def seed(loss):
    return np.ones(loss.shape, np.float32)


class Recorder(BackwardObserver):
    """Logs every call; hands out ``replace[id(target)]`` where given."""

    def __init__(self, events=None, replace=None, hold=()):
        self.events = [] if events is None else events
        self.replace = replace or {}
        self.hold = {id(t) for t in hold}

    def on_gradient_final(self, target, grad):
        self.events.append(("final", id(target), np.array(grad, copy=True)))
        slot = self.replace.get(id(target))
        if slot is not None:
            slot[...] = grad
        return slot

    def deferred_inputs(self, node):
        return tuple(i for i, t in enumerate(node.inputs) if t is not None and id(t) in self.hold)

    def before_deferred(self):
        self.events.append(("before_deferred",))


def finals(events):
    return [e for e in events if e[0] == "final"]


def test_each_final_gradient_is_seen_once_fully_accumulated_and_in_backward_order():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0, -1.0])
    x = ms.Tensor(np.array([0.5, 4.0], np.float32))
    loss = (w2 * (w1 * x + w1 * w1)).sum()       # w1 has three consumers, w2 one
    watch = Recorder()
    found = run_backward([loss], [seed(loss)], targets=[w1, w2], observer=watch)
    seen = finals(watch.events)
    assert [tid for _, tid, _ in seen] == [id(w2), id(w1)]     # w2's gradient is final first
    w1v, w2v, xv = w1.asnumpy(), w2.asnumpy(), x.asnumpy()
    # a call after w1's first consumer only would see a partial sum
    np.testing.assert_allclose(seen[1][2], w2v * (xv + 2 * w1v), rtol=1e-6)
    np.testing.assert_allclose(seen[0][2], xv * w1v + w1v * w1v, rtol=1e-6)
    # returning None keeps the engine's gradients: the same values as without an observer
    loss2 = (w2 * (w1 * x + w1 * w1)).sum()
    for got, want in zip(found, run_backward([loss2], [seed(loss2)], targets=[w1, w2])):
        np.testing.assert_array_equal(got, want)


def test_a_final_gradient_is_reported_before_earlier_layers_run():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0, -1.0])
    h = (w1 * 2.0).exp()                     # the node that makes w1's gradient runs last
    loss = (h * w2).sum()
    events = []
    exp_prim = h.grad_fn.prim
    original = type(exp_prim).backward

    def spy(self, ctx, *grads):
        events.append(("exp backward",))
        return original(self, ctx, *grads)

    type(exp_prim).backward = spy
    try:
        run_backward([loss], [seed(loss)], targets=[w1, w2], observer=Recorder(events))
    finally:
        type(exp_prim).backward = original
    assert [e[:2] for e in events] == [("final", id(w2)), ("exp backward",), ("final", id(w1))]


def test_what_the_observer_returns_is_handed_out_as_is_even_sharing_one_buffer():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0])
    loss = (w1 * 3.0).sum() + (w2 * w2).sum()
    flat = np.zeros(3, np.float32)                 # one buffer, two slots
    slots = [flat[0:2], flat[2:3]]
    found = run_backward([loss], [seed(loss)], targets=[w1, w2],
                         observer=Recorder(replace={id(w1): slots[0], id(w2): slots[1]}))
    assert found[0] is slots[0] and found[1] is slots[1]     # no ownership copy
    np.testing.assert_array_equal(flat, [3.0, 3.0, 6.0])


def test_no_call_for_a_target_without_gradient_and_a_root_target_is_reported():
    w, unused = leaf([2.0]), leaf([5.0])
    loss = (w * w).sum()
    watch = Recorder()
    found = run_backward([loss], [seed(loss)], targets=[w, unused, loss], observer=watch)
    assert [tid for _, tid, _ in finals(watch.events)] == [id(w), id(loss)]
    assert found[1] is None
    np.testing.assert_array_equal(found[0], [4.0])


def test_final_gradients_need_targets_but_deferring_alone_does_not():
    w = leaf([1.0])
    loss = (w * w).sum()
    with pytest.raises(ValueError, match="on_gradient_final needs targets"):
        run_backward([loss], [seed(loss)], observer=Recorder())
    loss = (w * w).sum()
    run_backward([loss], [seed(loss)], observer=DeferGradients([w]))   # into .grad
    np.testing.assert_array_equal(w.grad.asnumpy(), [2.0])


def test_deferred_inputs_run_after_before_deferred_with_the_same_results():
    """Any primitive can hold an input back (here Mul, not a split one): its gradient is
    computed after ``before_deferred``, and a deferred target is final only then."""
    x, w = leaf([1.0, -2.0]), leaf([3.0, 0.5])

    def loss():
        return ((x * w).tanh() * w).sum()        # w consumed twice; Tanh sits between

    plain = run_backward([loss()], [np.ones((), np.float32)], targets=[x, w])
    events = []
    tanh_prim = loss().grad_fn.inputs[0].grad_fn.inputs[0].grad_fn.prim
    original = type(tanh_prim).backward

    def spy(self, ctx, *grads):
        events.append(("tanh backward",))
        return original(self, ctx, *grads)

    type(tanh_prim).backward = spy
    try:
        held = run_backward([loss()], [np.ones((), np.float32)], targets=[x, w],
                            observer=Recorder(events, hold=[w]))
    finally:
        type(tanh_prim).backward = original
    for a, b in zip(plain, held):
        np.testing.assert_array_equal(a, b)
    order = [e[:2] for e in events]
    # x is final once the first pass is over; w only after the held-back half ran
    assert order == [("tanh backward",), ("final", id(x)), ("before_deferred",),
                     ("final", id(w))]
    np.testing.assert_array_equal(finals(events)[1][2], plain[1])


def test_before_deferred_is_not_called_when_nothing_was_held_back():
    w = leaf([1.0, 2.0])
    loss = (w * w).sum()                     # Mul has no split_backward: DeferGradients holds none
    called = []
    found = run_backward([loss], [seed(loss)], targets=[w],
                         observer=DeferGradients([w], before=lambda: called.append(1)))
    assert called == []
    np.testing.assert_array_equal(found[0], [2.0, 4.0])


def test_a_held_back_node_keeps_its_graph_until_the_second_half():
    """Without retain_graph the held node's saved context is freed only after its deferred
    half: a second backward through it still fails, as without an observer."""
    rng = np.random.default_rng(1)
    x = ms.Tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    w = ms.Tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    loss = ops.matmul(x, w).sum()
    gx, gw = run_backward([loss], [np.ones((), np.float32)], targets=[x, w],
                          observer=DeferGradients([w]))
    np.testing.assert_allclose(gw, np.repeat(x.asnumpy().sum(0)[:, None], 4, 1), rtol=1e-6)
    np.testing.assert_allclose(gx, np.repeat(w.asnumpy().sum(1)[None], 2, 0), rtol=1e-6)
    with pytest.raises(RuntimeError, match="second time"):
        run_backward([loss], [np.ones((), np.float32)], targets=[x, w])
