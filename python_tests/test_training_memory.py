"""A training step keeps only what backward reads.

The tape links to intermediate inputs without holding their values (autograd.InputLink), so
after the forward of a conv + BatchNorm + ReLU stack the live memory is what the backwards
saved: per layer, the normalised values BatchNorm keeps and the ReLU output (which is also the
next convolution's input). Holding each node's input tensors used to keep the convolution and
BatchNorm outputs too: 4 activations a layer instead of 2.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn

LAYERS, BATCH, CHANNELS, SIDE = 4, 8, 16, 32
ACTIVATION = BATCH * CHANNELS * SIDE * SIDE * 4          # bytes of one float32 activation


class Block(nn.Cell):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, pad_mode="pad", padding=1, has_bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


def stack():
    ms.set_seed(0)
    return nn.SequentialCell([Block(3 if i == 0 else CHANNELS, CHANNELS) for i in range(LAYERS)])


def data():
    rng = np.random.default_rng(0)
    return ms.Tensor(rng.standard_normal((BATCH, 3, SIDE, SIDE)).astype(np.float32))


def live_after(fn):
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0], result
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("algorithm", ["auto", "im2col"])
def test_forward_keeps_two_activations_a_layer(monkeypatch, algorithm):
    from minitorch_dist.ops import conv
    monkeypatch.setattr(conv, "ALGORITHM", algorithm)
    net, x = stack(), data()
    net(x).sum().backward()          # warm: pools and caches filled outside the measurement
    for p in net.trainable_params():
        p.grad = None
    live, out = live_after(lambda: net(x).sum())
    # 2 activations a layer, plus one for slack (the im2col path's pooled patch buffers are
    # reused, not counted again)
    assert live <= (2 * LAYERS + 1) * ACTIVATION, (live / ACTIVATION, "activations live")
    out.backward()


def test_nothing_is_left_after_backward():
    net, x = stack(), data()
    net(x).sum().backward()

    def step():
        net(x).sum().backward()
    live, _ = live_after(step)
    assert live < ACTIVATION, (live / ACTIVATION, "activations left after the step")


def test_an_intermediate_target_still_gets_its_gradient():
    """A tensor the caller still holds is found by identity through the link."""
    from minitorch_dist.autograd import run_backward
    w = ms.Tensor(np.array([2.0, 3.0], np.float32), requires_grad=True)
    h = w * w                      # an intermediate, held by the caller
    y = (h * 3.0).sum()
    (gh,) = run_backward([y], [np.ones((), np.float32)], targets=[h])
    assert gh.tolist() == [3.0, 3.0]


def test_a_dropped_intermediate_reads_as_its_link():
    w = ms.Tensor(np.array([2.0], np.float32), requires_grad=True)
    y = (w * w) * 3.0
    link = y.grad_fn.inputs[0]
    assert link.grad_fn is not None and link.shape == (1,) and link.dtype == np.float32
    y.backward()
    assert w.grad.asnumpy().tolist() == [12.0]
