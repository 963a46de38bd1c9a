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


def test_a_backward_that_always_runs_runs_even_off_the_targets_path():
    """A pipeline Recv sends from its backward to a peer running another program; skipping
    it would leave the peer waiting, so it runs whether or not a target lies below it.
    (Collectives may be pruned: every rank of an SPMD program prunes the same nodes.)"""
    from minitorch_dist.ops.primitive import Primitive

    class Talks(Primitive):
        backward_always_runs = True
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


def test_sharded_ranks_prune_the_same_nodes_mirrors_included():
    """Under semi-auto parallel every parameter enters through a Mirror (a collective in
    backward). Asking for the wide weight's gradient prunes the deep branch, mirrors
    included, on every rank alike: no rank waits in a collective the other skipped."""
    from minitorch_dist.communication import run_ranks
    from minitorch_dist.parallel.sharding.scope import sharding_world
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    x = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    calls = {"deep": 0}
    original = ops.MatMul.backward

    def counting(self, ctx, *g):
        if self.name.startswith(("deep", "head")):
            calls["deep"] += 1
        return original(self, ctx, *g)

    def rank(comm):
        with sharding_world(comm):
            ms.set_seed(0)
            net = TwoBranches()
            net.deep.matmul.shard(((2, 1), (1, 1)))
            (g,) = ops.GradOperation(get_by_list=True)(net, ms.ParameterTuple([net.wide]))(
                ms.Tensor(x[2 * comm.rank:2 * comm.rank + 2]))
            return g.asnumpy()

    ops.MatMul.backward = counting
    try:
        grads = run_ranks(2, rank, timeout=60)
    finally:
        ops.MatMul.backward = original
        ms.reset_auto_parallel_context()
    assert calls["deep"] == 0
    for g in grads:
        np.testing.assert_allclose(g, x.sum(0, keepdims=True).T, rtol=1e-5)
