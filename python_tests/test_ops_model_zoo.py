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


def test_select_where_forward_and_gradients():
    cond = rng.random((3, 4)) > 0.5
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    out = ops.Select()(ms.Tensor(cond), ms.Tensor(x), ms.Tensor(y))
    np.testing.assert_array_equal(out.asnumpy(), np.where(cond, x, y))
    assert ops.Where is ops.Select and ops.where is ops.select
    check_gradients(lambda a, b: ops.Select()(ms.Tensor(cond), a, b), x, y)
    with pytest.raises(TypeError, match="cond must be a bool tensor"):
        ops.Select()(ms.Tensor(x), ms.Tensor(x), ms.Tensor(y))


def test_topk_and_argmax_with_value():
    x = rng.standard_normal((3, 6))
    values, indices = ops.TopK()(ms.Tensor(x), 3)
    want = np.sort(x, axis=-1)[:, ::-1][:, :3]
    np.testing.assert_array_equal(values.asnumpy(), want)
    np.testing.assert_array_equal(np.take_along_axis(x, indices.asnumpy(), -1), want)
    assert indices.dtype == np.int32
    check_gradients(lambda t: ops.TopK()(t, 3)[0], x)
    index, value = ops.ArgMaxWithValue(axis=1)(ms.Tensor(x))
    np.testing.assert_array_equal(index.asnumpy(), x.argmax(1))
    np.testing.assert_array_equal(value.asnumpy(), x.max(1))
    check_gradients(lambda t: ops.ArgMaxWithValue(axis=0, keep_dims=True)(t)[1], x)
    with pytest.raises(ValueError, match="k=7 exceeds the last axis"):
        ops.TopK()(ms.Tensor(x), 7)


def test_unique_keeps_first_appearance_order():
    values, idx = ops.Unique()(ms.Tensor(np.array([[5, 1], [5, 9]], np.int32)))
    assert values.asnumpy().tolist() == [5, 1, 9]
    assert idx.asnumpy().tolist() == [[0, 1], [0, 2]]


def test_tile_and_cumsum():
    x = rng.standard_normal((2, 3))
    np.testing.assert_array_equal(ops.Tile()(ms.Tensor(x), (2, 1, 2)).asnumpy(), np.tile(x, (2, 1, 2)))
    check_gradients(lambda t: ops.Tile()(t, (2, 1, 2)), x)
    np.testing.assert_allclose(ops.CumSum()(ms.Tensor(x), 1).asnumpy(), np.cumsum(x, 1))
    ex = ops.CumSum(exclusive=True, reverse=True)(ms.Tensor(x), 1).asnumpy()
    np.testing.assert_allclose(ex, np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x)
    for kwargs in ({}, {"exclusive": True}, {"reverse": True}):
        check_gradients(lambda t: ops.CumSum(**kwargs)(t, 0), x)
    assert ops.Cumsum is ops.CumSum
    with pytest.raises(ValueError, match="multiples must be a tuple of positive ints"):
        ops.Tile()(ms.Tensor(x), (0, 1))


def test_gather_nd_and_scatter_nd_are_adjoint():
    x = rng.standard_normal((4, 3, 2))
    idx = np.array([[1, 2], [3, 0], [1, 2]])
    got = ops.GatherNd()(ms.Tensor(x), ms.Tensor(idx))
    np.testing.assert_array_equal(got.asnumpy(), x[idx[:, 0], idx[:, 1]])
    check_gradients(lambda t: ops.GatherNd()(t, ms.Tensor(idx)), x)     # a repeated index adds
    updates = rng.standard_normal((3, 2))
    out = ops.ScatterNd()(ms.Tensor(idx), ms.Tensor(updates), (4, 3, 2)).asnumpy()
    want = np.zeros((4, 3, 2))
    np.add.at(want, (idx[:, 0], idx[:, 1]), updates)
    np.testing.assert_allclose(out, want)
    check_gradients(lambda u: ops.ScatterNd()(ms.Tensor(idx), u, (4, 3, 2)), updates)
    with pytest.raises(IndexError, match="index 4 is out of range for axis 0 of size 4"):
        ops.GatherNd()(ms.Tensor(x), ms.Tensor(np.array([[4, 0]])))
    with pytest.raises(ValueError, match="updates must have shape"):
        ops.ScatterNd()(ms.Tensor(idx), ms.Tensor(updates[:2]), (4, 3, 2))


def test_against_pytorch_topk_cumsum_gather():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 5))
    t = torch.tensor(x, requires_grad=True)
    (torch.topk(t, 2).values * torch.arange(2.0)).sum().backward()
    mine = ms.Tensor(x, requires_grad=True)
    (ops.TopK()(mine, 2)[0] * ms.Tensor(np.arange(2.0))).sum().backward()
    np.testing.assert_allclose(mine.grad.asnumpy(), t.grad.numpy())
    np.testing.assert_allclose(ops.CumSum()(ms.Tensor(x), 0).asnumpy(), torch.cumsum(t, 0).detach().numpy())


def test_layer_norm_against_pytorch_and_central_differences():
    x = rng.standard_normal((4, 3, 5))
    gamma, beta = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    ln = ops.LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-5)
    y, mean, var = ln(ms.Tensor(x), ms.Tensor(gamma), ms.Tensor(beta))
    assert mean.shape == (4, 1, 1) and var.shape == (4, 1, 1)
    check_gradients(lambda a, b, c: ln(a, b, c)[0], x, gamma, beta)
    check_gradients(lambda a: ln(a, ms.Tensor(gamma), ms.Tensor(beta))[1], x)
    check_gradients(lambda a: ln(a, ms.Tensor(gamma), ms.Tensor(beta))[2], x)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.layer_norm(torch.tensor(x), (3, 5), torch.tensor(gamma),
                                          torch.tensor(beta), eps=1e-5)
    np.testing.assert_allclose(y.asnumpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="gamma and beta must have shape"):
        ln(ms.Tensor(x), ms.Tensor(gamma[0]), ms.Tensor(beta))


def test_l2_normalize():
    x = rng.standard_normal((3, 4))
    out = ops.L2Normalize(axis=1)(ms.Tensor(x)).asnumpy()
    np.testing.assert_allclose(out, x / np.linalg.norm(x, axis=1, keepdims=True))
    check_gradients(lambda t: ops.L2Normalize(axis=1)(t), x)
    tiny = np.full((1, 2), 1e-3)                     # below epsilon: the norm is clipped
    check_gradients(lambda t: ops.L2Normalize(axis=1)(t), tiny)
    np.testing.assert_allclose(ops.L2Normalize(axis=1)(ms.Tensor(tiny)).asnumpy(), tiny / 1e-2)


@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


DEVICE_CASES = {
    "sin": (lambda a: ops.sin(a), [(3, 4)]),
    "erf": (lambda a: ops.erf(a), [(3, 4)]),
    "log1p": (lambda a: ops.log1p(a * a), [(3, 4)]),
    "select": (lambda a, b: ops.Select()(ms.Tensor(np.array([True, False, True, False]), device=a.device), a, b),
               [(3, 4), (1, 4)]),
    "topk": (lambda a: ops.TopK()(a, 2)[0], [(3, 4)]),
    "argmax_with_value": (lambda a: ops.ArgMaxWithValue(axis=1)(a)[1], [(3, 4)]),
    "tile": (lambda a: ops.Tile()(a, (2, 1)), [(3, 4)]),
    "cumsum": (lambda a: ops.CumSum(reverse=True)(a, 1), [(3, 4)]),
    "gather_nd": (lambda a: ops.GatherNd()(a, ms.Tensor(np.array([[1, 2], [1, 2]]), device=a.device)), [(3, 4)]),
    "scatter_nd": (lambda a: ops.ScatterNd()(ms.Tensor(np.array([[1], [1], [0]]), device=a.device), a, (3, 4)),
                   [(3, 4)]),
    "layer_norm": (lambda a, g, b: ops.LayerNorm(epsilon=1e-5)(a, g, b)[0], [(3, 4), (4,), (4,)]),
    "l2_normalize": (lambda a: ops.L2Normalize(axis=1)(a), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(DEVICE_CASES))
def test_new_primitives_run_on_a_gpu_like_on_the_host(gpu, name):
    fn, shapes = DEVICE_CASES[name]
    arrays = [np.random.default_rng(k).uniform(-1, 1, s) for k, s in enumerate(shapes)]
    results = []
    for device in (ms.get_device("CPU"), gpu):
        ts = [ms.Tensor(a, device=device, requires_grad=True) for a in arrays]
        out = fn(*ts)
        assert out.device is device
        (out * out).sum().backward()
        results.append([out.asnumpy()] + [t.grad.asnumpy() for t in ts])
    for ours, host in zip(*results):
        np.testing.assert_allclose(ours, host, rtol=1e-10, atol=1e-12)


def test_unique_runs_on_a_gpu(gpu):
    values, idx = ops.Unique()(ms.Tensor(np.array([4, 2, 4, 7], np.int32), device=gpu))
    assert values.asnumpy().tolist() == [4, 2, 7] and idx.asnumpy().tolist() == [0, 1, 0, 2]


def test_select_cumsum_topk_l2normalize_run_sharded_like_one_process():
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.standard_normal((8, 6)).astype(np.float32)

    class Net(nn.Cell):
        def __init__(self, sharded):
            super().__init__()
            self.greater = ops.Greater()
            self.select = ops.Select()
            self.cumsum = ops.CumSum()
            self.norm = ops.L2Normalize(axis=1)
            self.topk = ops.TopK()
            if sharded:
                self.select.shard(((2, 2), (2, 2), (2, 2)))
                self.cumsum.shard(((4, 1),))
                self.norm.shard(((2, 1),))
                self.topk.shard(((4, 1),))

        def construct(self, a, b):
            picked = self.select(self.greater(a, b), a, b)
            return self.topk(self.norm(self.cumsum(picked, 1)), 2)[0]

    want = Net(False)(ms.Tensor(x), ms.Tensor(y)).asnumpy()
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    try:
        def rank(comm):
            rows = slice(2 * comm.rank, 2 * comm.rank + 2)
            with sharding_world(comm):
                return Net(True)(ms.Tensor(x[rows]), ms.Tensor(y[rows])).asnumpy()
        got = np.concatenate(run_ranks(4, rank))
        bad = Net(True)
        bad.cumsum.shard(((1, 2),))

        def bad_rank(comm):
            with sharding_world(comm):
                bad(ms.Tensor(x[:2]), ms.Tensor(y[:2]))

        with pytest.raises(Exception, match=r"splits axis 1 2 ways; that axis must be whole"):
            run_ranks(4, bad_rank)
    finally:
        ms.reset_auto_parallel_context()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_common_namespace_names_the_top_level_objects():
    """``from mindspore.common import set_seed`` (upstream Wide&Deep) and the lazily
    reached Tensor/Parameter/ParameterTuple are the top level's objects."""
    import minitorch_dist.common as common
    assert common.set_seed is ms.set_seed and common.get_seed is ms.get_seed
    assert common.Tensor is ms.Tensor and common.Parameter is ms.Parameter
    assert common.ParameterTuple is ms.ParameterTuple and common.dtype.float16 == ms.float16
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        common.nothing


def test_add_prim_attr_acts_or_says_why_not(caplog):
    """A MindSpore primitive attribute is never dropped in silence: primitive_target and the
    primitive's own attributes act; compiler hints are recorded with a one-time note."""
    from minitorch_dist.ops import prim_attrs
    prim_attrs._noted.clear()           # notes are once per process; start this test afresh
    mm = ops.MatMul()
    assert mm.add_prim_attr("transpose_b", True) is mm and mm.transpose_b is True
    np.testing.assert_array_equal(mm(ms.Tensor(np.eye(2, dtype=np.float32)),
                                     ms.Tensor(np.array([[1, 2], [3, 4]], np.float32))).asnumpy(),
                                  [[1, 3], [2, 4]])
    assert ops.Mul().add_prim_attr("primitive_target", "CPU").primitive_target == "CPU"
    with caplog.at_level("WARNING", logger="minitorch_dist"):
        r = ops.ReduceMean().add_prim_attr("cross_batch", True)
        ops.ReduceMean().add_prim_attr("cross_batch", True)
        ops.Reshape().add_prim_attr("not_a_mindspore_attr", 1)
    assert r.attrs == {"cross_batch": True}
    notes = [m.getMessage() for m in caplog.records]
    assert sum("'cross_batch'" in n for n in notes) == 1
    assert any("prints the global value" in n for n in notes)
    assert any("'not_a_mindspore_attr'" in n and "does not use it" in n for n in notes)
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        ops.Add().add_prim_attr(3, True)


def test_parameter_server_mode_is_refused_with_what_to_use():
    with pytest.raises(NotImplementedError, match="parameter-server training is not supported"):
        ms.Parameter(ms.Tensor([1.0]), "table").set_param_ps()
