"""The reverse-mode engine: fan-out, un-broadcasting, no_grad, accumulation, graph freeing,
dtypes, multi-output primitives, RowTensor gradients and errors that name the primitive."""
import numpy as np
import pytest

try:
    from hypothesis import given
    from hypothesis.extra.numpy import mutually_broadcastable_shapes
except ImportError:   # a test extra: only the property test needs it
    given = None

import minitorch_dist as ms
from minitorch_dist import Tensor, RowTensor, ops
from minitorch_dist.autograd import unbroadcast
from minitorch_dist.ops import Primitive
from minitorch_dist.testing import check_gradients, GradientCheckError


def leaf(array, dtype=np.float64):
    return Tensor(np.asarray(array, dtype), requires_grad=True)


def ones_like(t):
    return np.ones(t.shape, t.dtype)


# ---- primitives written for these tests -------------------------------------------------
class SplitHalves(Primitive):
    """Two outputs: the first and the second half of a 1-D input."""

    def forward(self, ctx, x):
        n = x.shape[0] // 2
        ctx.n = n
        return x[:n] * 1.0, x[n:] * 1.0

    def backward(self, ctx, g_first, g_second):
        self.seen = (g_first.copy(), g_second.copy())
        return (ctx.xp.concatenate([g_first, g_second]),)


class TakeRows(Primitive):
    """``table[indices]`` whose table gradient is a RowTensor (what embedding lookups return)."""

    def forward(self, ctx, table, indices):
        ctx.indices, ctx.shape = indices, table.shape
        return table[indices]

    def backward(self, ctx, g):
        return RowTensor(Tensor._make(ctx.indices, ctx.device), Tensor._make(g, ctx.device), ctx.shape), None


class WrongShape(Primitive):
    def forward(self, ctx, x):
        return x * 2

    def backward(self, ctx, g):
        return (g.reshape(-1)[:4],)


class WrongCount(Primitive):
    def forward(self, ctx, x):
        return x * 2

    def backward(self, ctx, g):
        return g, g


class RecordsNeeds(Primitive):
    def forward(self, ctx, x, y):
        RecordsNeeds.needs = ctx.needs_input_grad
        return x + y

    def backward(self, ctx, g):
        return g, g


class BroadcastGrad(Primitive):
    """Returns a read-only broadcast view as the gradient (as a cheap Sum backward might)."""

    def forward(self, ctx, x):
        ctx.shape = x.shape
        return x.sum()

    def backward(self, ctx, g):
        return (ctx.xp.broadcast_to(g, ctx.shape),)


# ---- fan-out and accumulation -----------------------------------------------------------
def test_fan_out_of_one_tensor_into_one_op():
    x = leaf([1.0, -2.0, 3.0])
    (x * x).backward(np.ones(3))
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, -4.0, 6.0])


def test_fan_out_into_several_ops():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    z = x * x
    out = y + z + x - x * y          # d/dx = 3 + 2x + 1 - 6x
    out.backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), 4 - 4 * np.array([1.0, 2.0]))


def test_diamond_graph_visits_shared_node_once():
    x = leaf([2.0])
    h = x * x                        # used by two branches
    out = h * 3.0 + h * h
    out.backward(np.ones(1))
    np.testing.assert_allclose(x.grad.asnumpy(), [3 * 2 * 2 + 4 * 2 ** 3])


def test_matmul_with_the_same_tensor_on_both_sides():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = leaf(a)
    (x @ x).backward(np.ones((2, 2)))
    g = np.ones((2, 2))
    np.testing.assert_allclose(x.grad.asnumpy(), g @ a.T + a.T @ g)


def test_grad_accumulates_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3.0).backward(np.ones(2))
    (x * x).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), [3 + 2, 3 + 4])
    x.zero_grad()
    assert x.grad is None


def test_only_leaves_get_grad_and_constants_get_none():
    x = leaf([1.0])
    c = Tensor([5.0])
    h = x * c
    (h * 2.0).backward(np.ones(1))
    assert h.grad is None and c.grad is None
    np.testing.assert_allclose(x.grad.asnumpy(), [10.0])


def test_backward_of_a_leaf_itself():
    x = leaf([1.0, 2.0])
    x.backward(np.array([3.0, 4.0]))
    np.testing.assert_allclose(x.grad.asnumpy(), [3.0, 4.0])


def test_default_seed_for_one_element_outputs():
    x = leaf(3.0)
    (x * x).backward()
    assert x.grad.shape == () and x.grad.item() == 6.0
    y = leaf([[2.0]])
    (y * y).backward()
    assert y.grad.tolist() == [[4.0]]


def test_zero_dimensional_gradients_are_arrays():
    """Regression: 0-d gradients came back as NumPy scalars, which cannot be updated in place."""
    x = leaf(3.0)
    y = x * x
    (y * y + y).backward(retain_graph=True)
    assert isinstance(x.grad.data, np.ndarray) and x.grad.shape == ()
    assert x.grad.item() == 4 * 27 + 6
    (y * 1.0).backward()                       # accumulation of 0-d gradients
    assert isinstance(x.grad.data, np.ndarray) and x.grad.item() == 114 + 6
    x.grad.data[...] = 0.0
    assert x.grad.item() == 0.0
    _, g = ms.value_and_grad(lambda t: t * t)(Tensor(np.float64(2.0)))
    assert isinstance(g.data, np.ndarray) and g.item() == 4.0


def test_deep_graph_needs_no_recursion():
    x = leaf([1.0])
    y = x
    for _ in range(3000):
        y = y + 1.0
    y.backward()
    assert x.grad.item() == 1.0


def test_needs_input_grad_tells_which_inputs_want_gradients():
    RecordsNeeds()(leaf([1.0]), Tensor([1.0]))
    assert RecordsNeeds.needs == (True, False)
    RecordsNeeds()(Tensor([1.0]), 2.0)
    assert RecordsNeeds.needs == (False, False)
    with ms.no_grad():
        RecordsNeeds()(leaf([1.0]), leaf([1.0]))
    assert RecordsNeeds.needs == (False, False)


# ---- un-broadcasting -------------------------------------------------------------------
@pytest.mark.parametrize("shape_a, shape_b", [
    ((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), (4,)), ((), (3, 4)), ((2, 3), ()),
    ((2, 1, 3), (4, 1)), ((1,), (5,)), ((1, 1), (2, 3)), ((5, 1, 1), (1, 6, 1)),
])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_unbroadcast_gradients(shape_a, shape_b, op):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, shape_a)
    b = rng.uniform(0.5, 2.0, shape_b)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
          "mul": lambda x, y: x * y, "div": lambda x, y: x / y}[op]
    check_gradients(fn, a, b)
    x, y = leaf(a), leaf(b)
    out = fn(x, y)
    out.backward(np.ones(out.shape))
    assert x.grad.shape == shape_a and y.grad.shape == shape_b


def test_unbroadcast_by_hand():
    x, y = leaf(np.ones((3, 1))), leaf(np.full((1, 4), 2.0))
    (x * y).backward(np.ones((3, 4)))
    np.testing.assert_allclose(x.grad.asnumpy(), np.full((3, 1), 8.0))
    np.testing.assert_allclose(y.grad.asnumpy(), np.full((1, 4), 3.0))
    v = leaf(np.arange(4.0))
    (v + Tensor(np.zeros((3, 4)))).backward(np.ones((3, 4)))
    np.testing.assert_allclose(v.grad.asnumpy(), np.full(4, 3.0))


def test_gradient_with_python_scalar_operand():
    x = leaf([1.0, 2.0])
    (3.0 / x).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), -3.0 / np.array([1.0, 4.0]))


def _unbroadcast_property(shapes):
    shape_a, shape_b = shapes.input_shapes
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    g = rng.standard_normal(shapes.result_shape)
    x, y = leaf(a), leaf(b)
    (x * y).backward(g)
    # reference: sum the broadcast gradient over the axes that broadcasting added or stretched
    np.testing.assert_allclose(x.grad.asnumpy(), _reference_unbroadcast(g * np.broadcast_to(b, g.shape), shape_a))
    np.testing.assert_allclose(y.grad.asnumpy(), _reference_unbroadcast(g * np.broadcast_to(a, g.shape), shape_b))


if given is not None:
    test_unbroadcast_property = given(mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=3, max_side=3))(_unbroadcast_property)
else:
    def test_unbroadcast_property():
        pytest.skip("hypothesis is not installed")


def _reference_unbroadcast(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad.reshape(shape)


def test_unbroadcast_function():
    g = np.ones((2, 3, 4))
    assert unbroadcast(g, (3, 4)).shape == (3, 4)
    assert unbroadcast(g, (1, 4)).tolist() == [[6.0] * 4]
    assert unbroadcast(g, (2, 1, 1)).shape == (2, 1, 1)
    assert unbroadcast(g, ()).shape == () and unbroadcast(g, ()) == 24
    assert unbroadcast(g, (2, 3, 4)) is g
    assert unbroadcast(np.ones(3), (1, 3)).shape == (1, 3)


# ---- no_grad ---------------------------------------------------------------------------
def test_no_grad_records_nothing():
    x = leaf([1.0, 2.0])
    with ms.no_grad():
        assert not ms.is_grad_enabled()
        y = x * 2 + x
        with ms.enable_grad():
            z = x * 2
    assert ms.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward(np.ones(2))


def test_no_grad_as_decorator_and_after_an_exception():
    @ms.no_grad()
    def double(t):
        assert not ms.is_grad_enabled()
        return t * 2

    assert not double(leaf([1.0])).requires_grad
    assert ms.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with ms.no_grad():
            1 / 0
    assert ms.is_grad_enabled()


@pytest.mark.host_default
def test_to_under_no_grad_is_not_recorded(virtual_gpu):
    x = leaf([1.0])
    with ms.no_grad():
        y = x.to("GPU")
    assert not y.requires_grad and y.grad_fn is None


# ---- graph freeing ---------------------------------------------------------------------
def test_second_backward_through_a_freed_graph_raises():
    x = leaf([1.0, 2.0])
    y = x * x
    y.backward(np.ones(2))
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward(np.ones(2))


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = x * x
    y.backward(np.ones(2), retain_graph=True)
    y.backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), [4.0, 8.0])


# ---- dtypes ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_gradient_dtype_equals_input_dtype(dtype):
    x = Tensor(np.array([1.0, 2.0], dtype), requires_grad=True)
    wide = Tensor(np.array([3.0, 4.0], np.float64))         # promotes the forward to float64
    out = x * wide
    assert out.dtype == np.float64
    out.backward(np.ones(2))
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.asnumpy(), [3.0, 4.0])


def test_integer_and_bool_tensors_cannot_require_grad():
    for data in ([1, 2], np.array([1], np.int32), [True]):
        with pytest.raises(TypeError, match="floating-point"):
            Tensor(data, requires_grad=True)
        with pytest.raises(TypeError, match="floating-point"):
            Tensor(data).requires_grad_()


def test_integer_inputs_get_no_gradient():
    x = leaf([1.0, 2.0])
    n = Tensor([3, 4])
    out = x * n
    assert out.dtype == np.float64 and out.requires_grad
    out.backward(np.ones(2))
    assert n.grad is None
    np.testing.assert_allclose(x.grad.asnumpy(), [3.0, 4.0])


# ---- multi-output primitives -----------------------------------------------------------
def test_multi_output_with_one_output_unused():
    prim = SplitHalves()
    x = leaf([1.0, 2.0, 3.0, 4.0])
    first, second = prim(x)
    assert first.requires_grad and second.requires_grad
    assert first.grad_fn is second.grad_fn
    (first * 5.0).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), [5.0, 5.0, 0.0, 0.0])
    g_first, g_second = prim.seen    # the unused output's gradient arrived as zeros
    np.testing.assert_array_equal(g_first, [5.0, 5.0])
    np.testing.assert_array_equal(g_second, np.zeros(2))


def test_multi_output_with_both_outputs_used():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    first, second = SplitHalves()(x)
    (first * 2.0 + second * 3.0).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, 2.0, 3.0, 3.0])
    check_gradients(lambda t: SplitHalves()(t), np.arange(4.0))


# ---- RowTensor --------------------------------------------------------------------------
def _table():
    return leaf(np.arange(12.0).reshape(4, 3))


def test_row_tensor_gradient_reaches_the_leaf():
    table = _table()
    out = TakeRows()(table, Tensor([2, 0, 2]))
    out.backward(np.ones((3, 3)))
    assert isinstance(table.grad, RowTensor)
    assert table.grad.dense_shape == (4, 3) and table.grad.shape == (4, 3)
    assert table.grad.indices.tolist() == [2, 0, 2]
    np.testing.assert_allclose(table.grad.to_dense().asnumpy()[:, 0], [1.0, 0.0, 2.0, 0.0])


def test_row_tensor_plus_row_tensor_concatenates():
    table = _table()
    TakeRows()(table, Tensor([1])).backward(np.ones((1, 3)))
    TakeRows()(table, Tensor([3, 1])).backward(np.full((2, 3), 2.0))
    g = table.grad
    assert isinstance(g, RowTensor)
    assert g.indices.tolist() == [1, 3, 1] and g.values.shape == (3, 3)
    np.testing.assert_allclose(g.to_dense().asnumpy()[:, 0], [0.0, 3.0, 0.0, 2.0])


def test_row_tensor_plus_dense_is_dense():
    table = _table()
    (table * 1.0).backward(np.ones((4, 3)))
    TakeRows()(table, Tensor([0, 0])).backward(np.ones((2, 3)))
    assert not isinstance(table.grad, RowTensor)
    np.testing.assert_allclose(table.grad.asnumpy()[:, 0], [3.0, 1.0, 1.0, 1.0])


def test_sparse_and_dense_paths_in_one_backward():
    table = _table()
    out = TakeRows()(table, Tensor([3])) + (table * 2.0)[1:2]
    out.backward(np.ones((1, 3)))
    expected = np.zeros((4, 3))
    expected[3] += 1
    expected[1] += 2
    grad = table.grad.to_dense() if isinstance(table.grad, RowTensor) else table.grad
    np.testing.assert_allclose(grad.asnumpy(), expected)


def test_row_tensor_add_and_validation():
    a = RowTensor(Tensor([0, 2]), Tensor(np.ones((2, 2))), (3, 2))
    b = RowTensor(Tensor([2]), Tensor(np.full((1, 2), 5.0)), (3, 2))
    both = RowTensor.add(a, b)
    assert isinstance(both, RowTensor) and both.indices.tolist() == [0, 2, 2]
    dense = RowTensor.add(np.zeros((3, 2)), a)
    np.testing.assert_allclose(dense, [[1, 1], [0, 0], [1, 1]])
    assert "RowTensor(rows=2" in repr(a)
    with pytest.raises(ValueError, match="1-D"):
        RowTensor(Tensor([[0]]), Tensor(np.ones((1, 2))), (3, 2))
    with pytest.raises(ValueError, match="one row per index"):
        RowTensor(Tensor([0, 1]), Tensor(np.ones((3, 2))), (3, 2))


# ---- gradients handed out own their memory (regression) ---------------------------------
def test_leaf_gradients_never_share_memory():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    seed = Tensor(np.array([1.0, 1.0]))
    (x + y).backward(seed)            # Add gives the very same array to both inputs
    assert not np.shares_memory(x.grad.data, y.grad.data)
    assert not np.shares_memory(x.grad.data, seed.data)
    x.grad.data *= 10                 # an optimizer scaling one gradient in place
    assert y.grad.tolist() == [1.0, 1.0] and seed.tolist() == [1.0, 1.0]


def test_leaf_gradients_are_writable():
    x = leaf(np.ones((2, 3)))
    BroadcastGrad()(x).backward()
    assert x.grad.data.flags.writeable
    x.grad.data += 1.0
    np.testing.assert_allclose(x.grad.asnumpy(), np.full((2, 3), 2.0))


# ---- errors that name the primitive ----------------------------------------------------
def test_wrong_shaped_gradient_names_the_primitive():
    prim = WrongShape()
    x = leaf(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match=rf"{prim.name}.backward returned a gradient of shape \(4,\) "
                                           r"for an input of shape \(2, 3\)"):
        prim(x).backward(np.ones((2, 3)))


def test_wrong_number_of_gradients_names_the_primitive():
    prim = WrongCount()
    with pytest.raises(RuntimeError, match=rf"{prim.name}.backward returned 2 gradients for 1 inputs"):
        prim(leaf([1.0])).backward()


def test_sparse_gradient_of_the_wrong_dense_shape():
    class BadRows(TakeRows):
        def backward(self, ctx, g):
            return RowTensor(Tensor._make(ctx.indices, ctx.device), Tensor._make(g, ctx.device), (9, 3)), None

    prim = BadRows()
    with pytest.raises(RuntimeError, match=rf"{prim.name}: sparse gradient of shape \(9, 3\)"):
        prim(_table(), Tensor([0])).backward(np.ones((1, 3)))


def test_backward_seed_errors():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="one-element"):
        (x * 2).backward()
    with pytest.raises(ValueError, match=r"grad has shape \(3,\), expected \(2,\)"):
        (x * 2).backward(np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor([1.0]).backward()


def test_gradient_checker_catches_a_wrong_gradient():
    class WrongSquare(Primitive):
        def forward(self, ctx, x):
            ctx.save_for_backward(x)
            return x * x

        def backward(self, ctx, g):
            (x,) = ctx.saved
            return (g * x,)           # should be 2 * g * x

    with pytest.raises(GradientCheckError, match="input 0"):
        check_gradients(lambda t: WrongSquare()(t), np.array([1.0, 2.0]))
    check_gradients(lambda t: t * t, np.array([1.0, 2.0]))


def test_gradient_check_of_the_arithmetic_primitives():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 2.0, (3, 4))
    b = rng.uniform(0.5, 2.0, (4,))
    check_gradients(lambda x, y: x ** y, a, b)
    check_gradients(lambda x: -x, a)
    check_gradients(lambda x, y: ops.maximum(x, y), a, b)
    check_gradients(lambda x, y: ops.minimum(x, y), a, b)
    check_gradients(lambda x, y: x.T * y[:3], a, b)          # non-contiguous operand
    check_gradients(lambda x, y: x[:, ::2] / y[::2], a, b)


def test_maximum_splits_ties_evenly():
    x, y = leaf([1.0, 2.0]), leaf([1.0, 0.0])
    ops.maximum(x, y).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), [0.5, 1.0])
    np.testing.assert_allclose(y.grad.asnumpy(), [0.5, 0.0])


def test_pow_gradient_at_zero_base_is_finite():
    x, p = leaf([0.0, 2.0]), leaf([2.0, 3.0])
    (x ** p).backward(np.ones(2))
    assert np.isfinite(p.grad.asnumpy()).all()
    np.testing.assert_allclose(p.grad.asnumpy(), [0.0, 8 * np.log(2.0)])


# ---- split backward (zero-bubble pipelines: input gradients first, weights after) -----------
def test_split_backward_gives_the_same_gradients_and_calls_before_first():
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import ops
    from minitorch_dist.autograd import run_backward
    from minitorch_dist.backward_observer import DeferGradients
    from minitorch_dist.ops.matmul import BatchMatMul

    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    w1 = ms.Parameter(ms.Tensor(rng.standard_normal((3, 5)).astype(np.float32)), name="w1")
    w2 = ms.Parameter(ms.Tensor(rng.standard_normal((5, 2)).astype(np.float32)), name="w2")

    def loss():
        return ops.relu(ops.matmul(ops.relu(ops.matmul(x, w1)), w2)).sum()

    plain = run_backward([loss()], [np.ones((), np.float32)], targets=[x, w1, w2])
    events = []
    original = BatchMatMul.backward

    def spy(self, ctx, g):
        events.append(tuple(ctx.needs_input_grad))
        return original(self, ctx, g)

    BatchMatMul.backward = spy
    try:
        split = run_backward([loss()], [np.ones((), np.float32)], targets=[x, w1, w2],
                             observer=DeferGradients([w1, w2],
                                                     before=lambda: events.append("between")))
    finally:
        BatchMatMul.backward = original
    for a, b in zip(plain, split):
        np.testing.assert_array_equal(a, b)
    # input gradients only, then before(), then weight gradients only
    assert events == [(True, False), (True, False), "between", (False, True), (False, True)]
