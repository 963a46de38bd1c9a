"""Primitives and helpers that model-zoo code reaches for: Sin, Cos, Erf, Log1p, Fill, Ones,
Zeros, DType, Shape, Rank, Size, Depend, StopGradient, HyperMap, Partial,
MultitypeFuncGraph, and MindSpore's module paths (P, F, C, mstype, ...)."""
import math

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.sharding.scope import sharding_world
from minitorch_dist.testing import check_gradients

rng = np.random.default_rng(3)
_erf = np.vectorize(math.erf)

# name, class, NumPy reference (float64), input sampler
UNARY = [
    ("sin", ops.Sin, np.sin, lambda s: rng.uniform(-3, 3, s)),
    ("cos", ops.Cos, np.cos, lambda s: rng.uniform(-3, 3, s)),
    ("erf", ops.Erf, _erf, lambda s: rng.uniform(-2, 2, s)),
    ("log1p", ops.Log1p, np.log1p, lambda s: rng.uniform(-0.5, 3, s)),
]


@pytest.mark.parametrize("name, cls, ref, sample", UNARY, ids=[u[0] for u in UNARY])
def test_unary_forward_gradient_and_dtypes(name, cls, ref, sample):
    x = sample((3, 4))
    np.testing.assert_allclose(cls()(ms.Tensor(x)).asnumpy(), ref(x), rtol=1e-13, atol=1e-15)
    check_gradients(lambda t: cls()(t), x)
    check_gradients(lambda t: cls()(t), x[:, ::2].T.copy())      # another layout
    assert cls()(ms.Tensor(x.astype(np.float32))).dtype == np.float32
    assert cls()(ms.Tensor(np.array([1, 2], np.int32))).dtype == np.float32
    assert getattr(ops, name)(ms.Tensor(x)).shape == (3, 4)


@pytest.mark.parametrize("name, cls, ref, sample", UNARY, ids=[u[0] for u in UNARY])
def test_unary_against_pytorch(name, cls, ref, sample):
    torch = pytest.importorskip("torch")
    x = sample((5,))
    t = torch.tensor(x, requires_grad=True)
    getattr(torch, name)(t).sum().backward()
    mine = ms.Tensor(x, requires_grad=True)
    cls()(mine).sum().backward()
    np.testing.assert_allclose(mine.grad.asnumpy(), t.grad.numpy(), rtol=1e-12)


def test_a_wrong_gradient_is_caught():
    class WrongSin(ops.Sin):
        def backward(self, ctx, g):
            return (g,)
    with pytest.raises(AssertionError):
        check_gradients(lambda t: WrongSin()(t), rng.uniform(-1, 1, (4,)))


def test_creation_and_introspection():
    x = ms.Tensor(np.zeros((2, 3), np.float16))
    assert ops.Shape()(x) == (2, 3) and ops.Rank()(x) == 2 and ops.Size()(x) == 6
    assert ops.DType()(x) == ms.float16
    filled = ops.Fill()(ms.float32, (2, 2), 1024.0)
    assert filled.dtype == np.float32 and filled.asnumpy().tolist() == [[1024.0] * 2] * 2
    assert ops.Ones()((3,), ms.int32).asnumpy().tolist() == [1, 1, 1]
    assert ops.Zeros()(2, ms.float32).asnumpy().tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="Fill: shape must be a tuple of non-negative ints"):
        ops.Fill()(ms.float32, (2, -1), 0.0)
    with pytest.raises(TypeError, match="Shape: expected a Tensor"):
        ops.Shape()([1, 2])


def test_depend_and_stop_gradient():
    x = ms.Tensor([3.0], requires_grad=True)
    y = ops.Depend()(x * 2, ops.Print())
    (y * ops.stop_gradient(x)).sum().backward()
    assert x.grad.asnumpy().tolist() == [6.0]          # d(2x * const)/dx = 2 * 3


def test_hyper_map_partial_and_multitype_func_graph():
    from minitorch_dist.ops import composite as C
    scale = C.MultitypeFuncGraph("scale")

    @scale.register("Number", "Tensor")
    def _scale(factor, grad):
        return grad * factor

    grads = (ms.Tensor([5.0]), ms.Tensor([-4.0]))
    out = C.HyperMap()(ops.Partial()(scale, 0.5), grads)
    assert [g.asnumpy().tolist() for g in out] == [[2.5], [-2.0]]
    with pytest.raises(TypeError, match="no implementation for argument types \\('String', 'Tensor'\\)"):
        scale("a", grads[0])
    with pytest.raises(ValueError, match="differ in length"):
        C.HyperMap(lambda a, b: a)((1, 2), (1,))
    assert C.HyperMap(lambda a, b: a + b)((1, (2, 3)), (10, (20, 30))) == (11, (22, 33))


def test_module_paths_are_the_same_objects():
    from minitorch_dist.ops import operations as P, functional as F, composite as C
    import minitorch_dist.common.dtype as mstype
    from minitorch_dist.common.parameter import Parameter, ParameterTuple
    from minitorch_dist.common.tensor import Tensor
    from minitorch_dist.nn.wrap.grad_reducer import DistributedGradReducer
    from minitorch_dist.nn.metrics import Metric, Accuracy
    from minitorch_dist.train.callback import LossMonitor
    from minitorch_dist import context, log
    from minitorch_dist.profiler import Profiler
    assert P.MatMul is ops.MatMul and P.Sin is ops.Sin and P.Gelu is ops.GeLU
    assert F.sin is ops.sin and F.depend is ops.depend
    assert C.GradOperation is ops.GradOperation and C.HyperMap is ops.HyperMap
    assert mstype.float16 is ms.float16 and Parameter is ms.Parameter and Tensor is ms.Tensor
    assert ParameterTuple is ms.ParameterTuple
    assert DistributedGradReducer is nn.DistributedGradReducer
    assert Metric is ms.train.metrics.Metric and Accuracy is ms.train.metrics.Accuracy
    assert LossMonitor is ms.train.LossMonitor and context.ParallelMode is ms.ParallelMode
    assert log.get_level() in "0123" and callable(Profiler)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchPrimitive'"):
        P.NoSuchPrimitive  # noqa: B018


def test_new_unary_primitives_shard_like_the_others():
    x = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    want = np.sin(np.cos(x))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cos = ops.Cos().shard(((4, 1),))
            self.sin = ops.Sin().shard(((2, 2),))

        def construct(self, a):
            return self.sin(self.cos(a))

    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    try:
        def rank(comm):
            with sharding_world(comm):
                return Net()(ms.Tensor(x[2 * comm.rank:2 * comm.rank + 2])).asnumpy()
        got = run_ranks(4, rank)
    finally:
        ms.reset_auto_parallel_context()
    np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-6)
