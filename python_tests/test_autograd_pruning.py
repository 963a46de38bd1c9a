"""Gradients for a list of targets run only the backward that reaches them.

Wide&Deep's TrainStepWrap asks for the wide weights' gradients and the deep weights'
gradients separately; without pruning, each request ran the whole network's backward.
"""
import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn, ops


class TwoBranches(nn.Cell):
    def __init__(self):
        super().__init__()
        self.deep = nn.Dense(4, 3)
        self.head = nn.Dense(3, 1)
        self.wide = ms.Parameter(ms.Tensor(np.full((4, 1), 0.5, np.float32)), "wide")
        self.matmul = ops.MatMul()

    def construct(self, x):
        return self.matmul(x, self.wide) + self.head(self.deep(x))


def test_gradient_of_one_branch_skips_the_other_branch_backward():
    ms.set_seed(0)
    net = TwoBranches()
    x = ms.Tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    wide_only = ms.ParameterTuple([net.wide])
    grad_fn = ops.GradOperation(get_by_list=True)
    original = type(net.deep.matmul).backward
    calls = {"deep": 0}

    def counting(self, ctx, *g):
        if self is net.deep.matmul or self is net.head.matmul:
            calls["deep"] += 1
        return original(self, ctx, *g)

    type(net.deep.matmul).backward = counting
    try:
        (g_wide,) = grad_fn(net, wide_only)(x)
        assert calls["deep"] == 0
        grads_all = grad_fn(net, ms.ParameterTuple(net.trainable_params()))(x)
        assert calls["deep"] == 2
    finally:
        type(net.deep.matmul).backward = original
    # the pruned gradient equals the one computed with every parameter
    names = [p.name for p in net.trainable_params()]
    np.testing.assert_array_equal(g_wide.asnumpy(), grads_all[names.index("wide")].asnumpy())
    np.testing.assert_allclose(g_wide.asnumpy(), x.asnumpy().sum(0, keepdims=True).T, rtol=1e-6)


def test_pruned_branch_inputs_are_not_differentiated():
    """MatMul of x (no target below) and w (a target): x's gradient is not computed."""
    w = ms.Parameter(ms.Tensor(np.ones((3, 2), np.float32)), "w")
    x = ms.Tensor(np.ones((4, 3), np.float32))
    x.requires_grad = True
    y = ops.MatMul()(x, w).sum()
    from minitorch_dist.autograd import run_backward
    gx_none, gw = run_backward([y], [np.float32(1.0)], targets=[ms.Tensor(np.zeros(1)), w])
    assert gx_none is None
    np.testing.assert_array_equal(gw, np.full((3, 2), 4.0, np.float32))


def test_a_backward_that_communicates_runs_even_off_the_targets_path():
    """A pipeline Recv or a collective sends from its backward; skipping it on one rank
    would leave the other waiting, so it runs whether or not a target lies below it."""
    from minitorch_dist.ops.primitive import Primitive

    class Talks(Primitive):
        backward_communicates = True
        calls = 0

        def forward(self, ctx, x):
            return x.copy()

        def backward(self, ctx, g):
            type(self).calls += 1
            return (g,)

    w = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), "w")
    other = ms.Tensor(np.ones(3, np.float32))
    other.requires_grad = True
    y = (Talks()(other) + w).sum()
    from minitorch_dist.autograd import run_backward
    (gw,) = run_backward([y], [np.float32(1.0)], targets=[w])
    assert Talks.calls == 1
    np.testing.assert_array_equal(gw, np.ones(3, np.float32))
