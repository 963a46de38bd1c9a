"""MatMul and BatchMatMul: transpose flags, batch broadcasting, 1-D operands, gradients,
PyTorch parity and shape errors."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops
from minitorch_dist.testing import check_gradients

FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def operands(m, k, n, ta, tb, batch_a=(), batch_b=(), seed=0):
    """A and B stored so that op(A) is (..., m, k) and op(B) is (..., k, n)."""
    a = rand(*batch_a, *((k, m) if ta else (m, k)), seed=seed)
    b = rand(*batch_b, *((n, k) if tb else (k, n)), seed=seed + 1)
    return a, b


def op_t(a, flag):
    return np.swapaxes(a, -1, -2) if flag else a


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_matmul_forward_all_flags(ta, tb):
    a, b = operands(3, 4, 5, ta, tb)
    out = ops.MatMul(transpose_a=ta, transpose_b=tb)(Tensor(a), Tensor(b))
    assert out.shape == (3, 5) and out.dtype == np.float64
    np.testing.assert_allclose(out.asnumpy(), op_t(a, ta) @ op_t(b, tb), rtol=1e-12)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_matmul_gradients_all_flags(ta, tb):
    a, b = operands(3, 4, 2, ta, tb)
    check_gradients(lambda x, y: ops.MatMul(ta, tb)(x, y), a, b)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_matmul_float32_matches_float64_reference(ta, tb):
    a, b = operands(6, 7, 5, ta, tb, seed=4)
    out = ops.MatMul(ta, tb)(Tensor(a.astype(np.float32)), Tensor(b.astype(np.float32)))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), op_t(a, ta) @ op_t(b, tb), rtol=1e-4, atol=1e-5)


def test_matmul_non_contiguous_inputs():
    a, b = rand(4, 6), rand(3, 4, seed=1)
    check_gradients(lambda x, y: ops.MatMul()(x.T, y.T), a, b)
    check_gradients(lambda x, y: ops.MatMul(True, False)(x[:, ::2], y.T[:, :2]), a, b)
    np.testing.assert_allclose(ops.MatMul()(Tensor(a).T, Tensor(b).T).asnumpy(), a.T @ b.T)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_batch_matmul_all_flags(ta, tb):
    a, b = operands(3, 4, 2, ta, tb, batch_a=(2,), batch_b=(2,))
    out = ops.BatchMatMul(ta, tb)(Tensor(a), Tensor(b))
    np.testing.assert_allclose(out.asnumpy(), op_t(a, ta) @ op_t(b, tb), rtol=1e-12)
    check_gradients(lambda x, y: ops.BatchMatMul(ta, tb)(x, y), a, b)


@pytest.mark.parametrize("batch_a, batch_b", [((2, 1), (3,)), ((), (4,)), ((3,), ()), ((1, 2), (2, 1))])
def test_batch_matmul_broadcasts_batch_axes(batch_a, batch_b):
    a = rand(*batch_a, 3, 4)
    b = rand(*batch_b, 4, 2, seed=1)
    out = ops.batch_matmul(Tensor(a), Tensor(b))
    assert out.shape == (a @ b).shape
    np.testing.assert_allclose(out.asnumpy(), a @ b, rtol=1e-12)
    check_gradients(lambda x, y: ops.batch_matmul(x, y), a, b)


@pytest.mark.parametrize("shape_a, shape_b", [
    ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
    ((3, 4), (4, 2)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
])
def test_functional_matmul_follows_numpy(shape_a, shape_b):
    a, b = rand(*shape_a), rand(*shape_b, seed=1)
    out = ops.matmul(Tensor(a), Tensor(b))
    want = a @ b
    assert out.shape == want.shape
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)
    check_gradients(lambda x, y: ops.matmul(x, y), a, b)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).asnumpy(), want, rtol=1e-12)


def test_functional_matmul_transpose_flags():
    a, b = rand(4, 3), rand(5, 4, seed=1)
    out = ops.matmul(Tensor(a), Tensor(b), transpose_a=True, transpose_b=True)
    np.testing.assert_allclose(out.asnumpy(), a.T @ b.T, rtol=1e-12)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_functional_matmul_vectors_with_transpose_flags(ta, tb):
    """A 1-D operand is a vector whatever the flag says (transposing it changes nothing)."""
    v = rand(4)
    m = rand(*((3, 4) if tb else (4, 3)), seed=1)
    out = ops.matmul(Tensor(v), Tensor(m), transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(out.asnumpy(), v @ op_t(m, tb), rtol=1e-12)
    check_gradients(lambda x, y: ops.matmul(x, y, transpose_a=ta, transpose_b=tb), v, m)
    m2 = rand(*((4, 2) if ta else (2, 4)), seed=2)
    out2 = ops.matmul(Tensor(m2), Tensor(v), transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(out2.asnumpy(), op_t(m2, ta) @ v, rtol=1e-12)


def test_matmul_against_pytorch():
    torch = pytest.importorskip("torch")
    a, b = rand(2, 3, 4), rand(4, 5, seed=1)
    g = rand(2, 3, 5, seed=2)
    x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = ops.matmul(x, y)
    out.backward(g)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    t_out = torch.matmul(ta, tb)
    t_out.backward(torch.tensor(g))
    np.testing.assert_allclose(out.asnumpy(), t_out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.asnumpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.asnumpy(), tb.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("ta, tb", FLAGS)
def test_matmul_flags_against_pytorch(ta, tb):
    torch = pytest.importorskip("torch")
    a, b = operands(3, 4, 5, ta, tb, seed=7)
    x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    ops.MatMul(ta, tb)(x, y).backward(np.ones((3, 5)))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ((tx.T if ta else tx) @ (ty.T if tb else ty)).sum().backward()
    np.testing.assert_allclose(x.grad.asnumpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.asnumpy(), ty.grad.numpy(), rtol=1e-12)


def test_only_needed_gradients_are_computed():
    a, b = rand(3, 4), rand(4, 2, seed=1)
    x, y = Tensor(a, requires_grad=True), Tensor(b)
    ops.MatMul()(x, y).backward(np.ones((3, 2)))
    np.testing.assert_allclose(x.grad.asnumpy(), np.ones((3, 2)) @ b.T)
    assert y.grad is None


def test_matmul_mixed_dtypes_promote_like_numpy():
    out = ops.MatMul()(Tensor(np.ones((2, 2), np.float32)), Tensor(np.ones((2, 2), np.float64)))
    assert out.dtype == np.float64
    x = Tensor(np.ones((2, 2), np.float32), requires_grad=True)
    ops.MatMul()(x, Tensor(np.ones((2, 2), np.float64))).backward(np.ones((2, 2)))
    assert x.grad.dtype == np.float32


# ---- errors --------------------------------------------------------------------------
@pytest.mark.parametrize("ta, tb, shape_a, shape_b", [
    (False, False, (2, 3), (4, 5)),
    (True, False, (2, 3), (3, 5)),
    (False, True, (2, 3), (3, 5)),
])
def test_wrong_inner_dims_name_matmul_and_both_shapes(ta, tb, shape_a, shape_b):
    prim = ops.MatMul(ta, tb)
    with pytest.raises(ValueError) as info:
        prim(Tensor(np.ones(shape_a)), Tensor(np.ones(shape_b)))
    msg = str(info.value)
    assert msg.startswith(prim.name) and "MatMul" in msg
    assert str(shape_a) in msg and str(shape_b) in msg and "inner dimensions" in msg


def test_matmul_wants_two_dimensional_inputs():
    prim = ops.MatMul()
    with pytest.raises(ValueError, match=r"MatMul.*2-D.*\(2, 3, 4\) and \(4, 5\).*BatchMatMul"):
        prim(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((4, 5))))
    with pytest.raises(ValueError, match=r"MatMul.*\(3,\) and \(3, 2\)"):
        prim(Tensor(np.ones(3)), Tensor(np.ones((3, 2))))


def test_batch_matmul_errors():
    with pytest.raises(ValueError, match=r"BatchMatMul.*at least 2 dimensions.*\(3,\)"):
        ops.BatchMatMul()(Tensor(np.ones(3)), Tensor(np.ones((3, 2))))
    with pytest.raises(ValueError, match=r"BatchMatMul.*inner dimensions.*\(2, 3, 4\).*\(2, 5, 6\)"):
        ops.BatchMatMul()(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((2, 5, 6))))
    with pytest.raises(ValueError, match=r"BatchMatMul.*batch dimensions \(2,\) and \(3,\).*\(2, 3, 4\).*\(3, 4, 5\)"):
        ops.BatchMatMul()(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((3, 4, 5))))   # batch 2 vs 3


def test_functional_matmul_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"MatMul.*\(2, 3\).*\(4, 5\)"):
        ops.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((4, 5))))
    with pytest.raises(ValueError, match=r"BatchMatMul.*\(3,\) and b of shape \(4,\) \(3 != 4\)"):
        ops.matmul(Tensor(np.ones(3)), Tensor(np.ones(4)))       # the caller's shapes, not (1, 3)
    with pytest.raises(ValueError, match=r"\(2, 3\) and b of shape \(4,\)"):
        ops.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones(4)))


def test_functional_matmul_uses_one_shared_instance():
    ms.reset_placement_stats()
    for _ in range(3):
        ops.matmul(Tensor(np.ones((2, 2))), Tensor(np.ones((2, 2))))
    rows = [r for r in ms.placement_report() if r["op"] == "BatchMatMul"]
    assert len(rows) == 1 and rows[0]["calls"] == 3
