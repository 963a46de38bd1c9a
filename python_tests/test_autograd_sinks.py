"""``run_backward(sinks=...)``: a target's gradient is handed to its sink once, as soon as it
is final, and what the sink returns is what backward returns (not copied)."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.autograd import run_backward


def leaf(values):
    return ms.Tensor(np.asarray(values, np.float32), requires_grad=True)


def seed(loss):
    return np.ones(loss.shape, np.float32)


def test_a_sink_gets_the_final_accumulated_gradient_once_and_in_backward_order():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0, -1.0])
    x = ms.Tensor(np.array([0.5, 4.0], np.float32))
    loss = (w2 * (w1 * x + w1 * w1)).sum()       # w1 is used twice, before w2 in forward
    log = []

    def sink(name):
        return lambda g: log.append((name, g.copy())) or None

    found = run_backward([loss], [seed(loss)], targets=[w1, w2],
                         sinks={id(w1): sink("w1"), id(w2): sink("w2")})
    assert [name for name, _ in log] == ["w2", "w1"]    # w2's gradient is final first
    w1v, w2v, xv = w1.asnumpy(), w2.asnumpy(), x.asnumpy()
    np.testing.assert_allclose(log[1][1], w2v * (xv + 2 * w1v), rtol=1e-6)
    np.testing.assert_allclose(log[0][1], xv * w1v + w1v * w1v, rtol=1e-6)
    # returning None keeps the engine's gradient: the same values as without sinks
    loss2 = (w2 * (w1 * x + w1 * w1)).sum()
    plain = run_backward([loss2], [seed(loss2)], targets=[w1, w2])
    for got, want in zip(found, plain):
        np.testing.assert_array_equal(got, want)


def test_a_sink_fires_before_the_gradients_of_earlier_layers_are_computed():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0, -1.0])
    h = (w1 * 2.0).exp()                     # the node that makes w1's gradient runs last
    loss = (h * w2).sum()
    events = []
    exp_prim = h.grad_fn.prim
    original = type(exp_prim).backward

    def spy(self, ctx, *grads):
        events.append("exp backward")
        return original(self, ctx, *grads)

    type(exp_prim).backward = spy
    try:
        run_backward([loss], [seed(loss)], targets=[w1, w2],
                     sinks={id(w2): lambda g: events.append("w2 sink")})
    finally:
        type(exp_prim).backward = original
    assert events == ["w2 sink", "exp backward"]


def test_what_a_sink_returns_is_handed_out_as_is_even_sharing_one_buffer():
    w1, w2 = leaf([1.0, 2.0]), leaf([3.0])
    loss = (w1 * 3.0).sum() + (w2 * w2).sum()
    flat = np.zeros(3, np.float32)                 # one buffer, two slots

    def into(view):
        def sink(g):
            view[...] = g
            return view
        return sink

    slots = [flat[0:2], flat[2:3]]
    found = run_backward([loss], [seed(loss)], targets=[w1, w2],
                         sinks={id(w1): into(slots[0]), id(w2): into(slots[1])})
    assert found[0] is slots[0] and found[1] is slots[1]     # no ownership copy
    np.testing.assert_array_equal(flat, [3.0, 3.0, 6.0])


def test_no_sink_call_for_a_target_without_gradient_and_a_root_target_is_flushed():
    w, unused = leaf([2.0]), leaf([5.0])
    loss = (w * w).sum()
    called = []
    found = run_backward([loss], [seed(loss)], targets=[w, unused, loss],
                         sinks={id(unused): lambda g: called.append("unused"),
                                id(loss): lambda g: called.append("loss")})
    assert called == ["loss"] and found[1] is None
    np.testing.assert_array_equal(found[0], [4.0])


def test_sinks_need_targets_and_refuse_defer():
    w = leaf([1.0])
    loss = (w * w).sum()
    with pytest.raises(ValueError, match="sinks need targets"):
        run_backward([loss], [seed(loss)], sinks={id(w): lambda g: None})
    with pytest.raises(ValueError, match="defer"):
        run_backward([loss], [seed(loss)], targets=[w], defer={id(w)},
                     sinks={id(w): lambda g: None})
