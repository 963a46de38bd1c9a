"""Shape primitives: forward against NumPy, gradients by central differences, PyTorch parity,
views instead of copies, and errors that name the primitive and the shapes."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.testing.gradcheck import GradientCheckError, check_gradients


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def tensor(array, grad=False):
    return ms.Tensor(array, requires_grad=grad)


def backward_ones(out):
    """Back-propagate d(sum(out))/d(out) without depending on the reduction primitives."""
    out.backward(np.ones(out.shape))


# ---- Reshape / Flatten ------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 4), (-1, 3), (2, -1, 2), (24,), (1, 24, 1)])
def test_reshape_forward_and_gradient(shape):
    a = rand(2, 3, 4)
    np.testing.assert_array_equal(ops.Reshape()(tensor(a), shape).asnumpy(), a.reshape(shape))
    np.testing.assert_array_equal(tensor(a).reshape(*shape).asnumpy(), a.reshape(shape))
    check_gradients(lambda x: ops.reshape(x, shape), a)


def test_reshape_of_non_contiguous_input():
    a = rand(4, 6)
    np.testing.assert_array_equal(ops.reshape(tensor(a).T, (3, 8)).asnumpy(), a.T.reshape(3, 8))
    check_gradients(lambda x: ops.reshape(x.T, (3, 8)), a)
    check_gradients(lambda x: ops.reshape(x[:, ::2], (-1,)), a)


def test_reshape_flatten_transpose_are_views():
    x = tensor(rand(8, 3, 4, 4))
    for out in (ops.reshape(x, (8, -1)), ops.flatten(x), ops.transpose(x, (0, 2, 3, 1)),
                ops.squeeze(ops.expand_dims(x, 1), 1)):
        assert np.shares_memory(out.data, x.data)


def test_reshape_size_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"Reshape.*\(2, 3\).*\(4,\)"):
        ops.Reshape()(tensor(rand(2, 3)), (4,))
    with pytest.raises(ValueError, match="Reshape"):
        ops.reshape(tensor(rand(2, 3)), (-1, -1))


def test_flatten_forward_gradient_and_scalar_error():
    a = rand(3, 2, 2, 2)
    out = ops.Flatten()(tensor(a))
    np.testing.assert_array_equal(out.asnumpy(), a.reshape(3, 8))
    assert ops.flatten(tensor(np.zeros((0, 4)))).shape == (0, 4)
    check_gradients(lambda x: ops.flatten(ops.transpose(x, (1, 0, 2, 3))), a)
    with pytest.raises(ValueError, match="Flatten"):
        ops.flatten(tensor(np.float64(1.0)))


# ---- Transpose -------------------------------------------------------------------------
@pytest.mark.parametrize("perm", [(2, 0, 1), (-1, -3, -2), (0, 1, 2), None])
def test_transpose_forward_and_gradient(perm):
    a = rand(2, 3, 4)
    np.testing.assert_array_equal(ops.Transpose()(tensor(a), perm).asnumpy(), np.transpose(a, perm))
    check_gradients(lambda x: ops.transpose(x, perm), a)


def test_tensor_T_and_transpose_method():
    a = rand(3, 5)
    np.testing.assert_array_equal(tensor(a).T.asnumpy(), a.T)
    np.testing.assert_array_equal(tensor(rand(2, 3, 4)).transpose(1, 2, 0).asnumpy(),
                                  rand(2, 3, 4).transpose(1, 2, 0))


@pytest.mark.parametrize("perm", [(0, 0, 1), (0, 1), (0, 1, 3)])
def test_transpose_bad_perm(perm):
    with pytest.raises(ValueError, match=r"Transpose.*perm"):
        ops.transpose(tensor(rand(2, 3, 4)), perm)


# ---- Squeeze / ExpandDims --------------------------------------------------------------
@pytest.mark.parametrize("axis, expected", [((), (3, 4)), (0, (3, 1, 4)), ((-2, 0), (3, 4)), (-2, (1, 3, 4))])
def test_squeeze_forward_and_gradient(axis, expected):
    a = rand(1, 3, 1, 4)
    out = ops.Squeeze(axis)(tensor(a))
    assert out.shape == expected
    np.testing.assert_array_equal(out.asnumpy(), a.reshape(expected))
    check_gradients(lambda x: ops.Squeeze(axis)(x), a)


def test_squeeze_functional_default_removes_all_unit_axes():
    assert ops.squeeze(tensor(rand(1, 3, 1))).shape == (3,)
    assert tensor(rand(1, 3, 1)).squeeze(-1).shape == (1, 3)


def test_squeeze_of_non_unit_axis_is_an_error():
    with pytest.raises(ValueError, match=r"Squeeze.*axis 1 of size 3.*\(1, 3\)"):
        ops.Squeeze(1)(tensor(rand(1, 3)))
    with pytest.raises(ValueError, match=r"Squeeze.*axis 5 is out of range"):
        ops.squeeze(tensor(rand(1, 3)), 5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_expand_dims_forward_and_gradient(axis):
    a = rand(2, 3)
    np.testing.assert_array_equal(ops.ExpandDims()(tensor(a), axis).asnumpy(), np.expand_dims(a, axis))
    check_gradients(lambda x: ops.expand_dims(x[:, ::-1], axis), a)


def test_expand_dims_axis_out_of_range():
    with pytest.raises(ValueError, match="ExpandDims"):
        ops.expand_dims(tensor(rand(2, 3)), 3)


# ---- BroadcastTo -----------------------------------------------------------------------
@pytest.mark.parametrize("in_shape, target", [((3,), (2, 3)), ((2, 1), (2, 4)), ((1, 3), (-1, 3)),
                                              ((1, 3), (4, 2, -1)), ((), (2, 2))])
def test_broadcast_to_forward_and_gradient(in_shape, target):
    a = rand(*in_shape)
    expected_shape = tuple(in_shape[i - (len(target) - len(in_shape))] if n == -1 else n
                           for i, n in enumerate(target))
    out = ops.BroadcastTo(target)(tensor(a))
    np.testing.assert_array_equal(out.asnumpy(), np.broadcast_to(a, expected_shape))
    check_gradients(lambda x: ops.broadcast_to(x, target), a)


def test_broadcast_to_gradient_sums():
    x = tensor(np.ones((1, 3)), grad=True)
    backward_ones(ops.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((1, 3), 8.0))


def test_broadcast_to_bad_shapes():
    with pytest.raises(ValueError, match=r"BroadcastTo.*\(2, 3\).*\(2, 4\)"):
        ops.broadcast_to(tensor(rand(2, 3)), (2, 4))
    with pytest.raises(ValueError, match="BroadcastTo.*shorter"):
        ops.broadcast_to(tensor(rand(2, 3)), (3,))


# ---- Concat / Stack --------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_forward_and_gradient(axis):
    shapes = {0: [(1, 3), (2, 3), (4, 3)], 1: [(2, 1), (2, 2), (2, 4)], -1: [(2, 1), (2, 2), (2, 4)]}[axis]
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    out = ops.Concat(axis)(tuple(tensor(a) for a in arrays))
    np.testing.assert_array_equal(out.asnumpy(), np.concatenate(arrays, axis))
    check_gradients(lambda *xs: ops.concat(xs, axis), *arrays)


def test_concat_non_contiguous_inputs_and_varargs_call():
    a, b = rand(3, 4), rand(2, 3, seed=1)
    out = ops.Concat(0)(tensor(a)[:, ::2].T, tensor(b))
    np.testing.assert_array_equal(out.asnumpy(), np.concatenate([a[:, ::2].T, b]))
    check_gradients(lambda x, y: ops.concat([x[:, ::2].T, y]), a, b)


def test_concat_each_input_gets_its_own_gradient():
    x, y = tensor(np.ones((2, 2)), grad=True), tensor(np.ones((1, 2)), grad=True)
    backward_ones(ops.concat([x, y, x]) * ms.Tensor(np.arange(10.0).reshape(5, 2)))
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0 + 6, 1 + 7], [2 + 8, 3 + 9]])
    np.testing.assert_array_equal(y.grad.asnumpy(), [[4, 5]])


def test_concat_with_a_constant_input_skips_its_gradient():
    x = tensor(rand(2, 2), grad=True)
    out = ops.concat([x, np.zeros((1, 2))])
    backward_ones(out)
    np.testing.assert_array_equal(x.grad.asnumpy(), np.ones((2, 2)))


def test_concat_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"Concat.*except along axis 0.*\(2, 3\), \(2, 4\)"):
        ops.concat([tensor(rand(2, 3)), tensor(rand(2, 4))])
    with pytest.raises(ValueError, match="Concat.*at least one"):
        ops.concat([])
    with pytest.raises(ValueError, match="Concat.*axis 2 is out of range"):
        ops.concat([tensor(rand(2, 3))], axis=2)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_forward_and_gradient(axis):
    arrays = [rand(2, 3, seed=i) for i in range(3)]
    out = ops.Stack(axis)([tensor(a) for a in arrays])
    np.testing.assert_array_equal(out.asnumpy(), np.stack(arrays, axis))
    check_gradients(lambda x, y, z: ops.stack((x.T, y.T, z.T), axis), *arrays)


def test_stack_shape_mismatch():
    with pytest.raises(ValueError, match=r"Stack.*same shape.*\(2, 3\), \(3, 2\)"):
        ops.stack([tensor(rand(2, 3)), tensor(rand(3, 2))])


# ---- Split -----------------------------------------------------------------------------
@pytest.mark.parametrize("axis, num", [(0, 2), (1, 3), (-1, 1), (-2, 4)])
def test_split_equal_parts(axis, num):
    a = rand(4, 6)
    parts = ops.Split(axis, num)(tensor(a))
    assert isinstance(parts, tuple) and len(parts) == num
    for got, want in zip(parts, np.split(a, num, axis)):
        np.testing.assert_array_equal(got.asnumpy(), want)
    check_gradients(lambda x: ops.Split(axis, num)(x), a)


def test_split_by_size_and_sections():
    a = rand(7, 2)
    parts = ops.split(tensor(a), 3)
    assert [p.shape for p in parts] == [(3, 2), (3, 2), (1, 2)]
    parts = ops.split(tensor(a), [2, 0, 5], axis=0)
    for got, want in zip(parts, np.split(a, [2, 2])):
        np.testing.assert_array_equal(got.asnumpy(), want)
    check_gradients(lambda x: ops.split(x.T, [1, 4, 2], axis=1), a)


def test_split_gradient_with_an_unused_output():
    x = tensor(rand(4, 2), grad=True)
    first, _ = ops.Split(0, 2)(x)
    backward_ones(first * 3.0)
    np.testing.assert_array_equal(x.grad.asnumpy(), [[3, 3], [3, 3], [0, 0], [0, 0]])


def test_split_bad_sizes():
    with pytest.raises(ValueError, match=r"Split.*size 5.*2 equal parts"):
        ops.Split(0, 2)(tensor(rand(5)))
    with pytest.raises(ValueError, match=r"Split.*\[1, 2\].*axis size 5"):
        ops.split(tensor(rand(5)), [1, 2])
    with pytest.raises(ValueError, match="Split.*positive"):
        ops.split(tensor(rand(5)), 0)


# ---- safety, the checker itself, PyTorch -----------------------------------------------
def test_backward_leaves_inputs_untouched():
    a = rand(3, 4)
    x = tensor(a, grad=True)
    out = ops.concat([ops.reshape(x, (4, 3)), ops.transpose(x, (1, 0))], 1)
    parts = ops.split(ops.broadcast_to(out, (2, 4, 6)), 2, axis=2)
    backward_ones(ops.concat(parts, axis=2))
    np.testing.assert_array_equal(x.asnumpy(), a)
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((3, 4), 4.0))


def test_gradient_checker_catches_a_wrong_reshape_gradient():
    class BadReshape(ops.Reshape):
        def backward(self, ctx, g):
            return (2 * g.reshape(ctx.in_shape),)

    with pytest.raises(GradientCheckError):
        check_gradients(lambda x: BadReshape()(x, (-1,)), rand(2, 3))


def test_shapes_match_pytorch():
    torch = pytest.importorskip("torch")
    a, b = rand(2, 3, 4), rand(2, 5, 4, seed=1)
    w = rand(2, 8, 4, seed=2)

    xa, xb = tensor(a, grad=True), tensor(b, grad=True)
    out = ops.concat([ops.transpose(ops.reshape(xa, (2, 4, 3)), (0, 2, 1)), xb], axis=1)
    out.backward(w)

    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    tout = torch.cat([ta.reshape(2, 4, 3).permute(0, 2, 1), tb], dim=1)
    tout.backward(torch.tensor(w))
    np.testing.assert_allclose(out.asnumpy(), tout.detach().numpy())
    np.testing.assert_allclose(xa.grad.asnumpy(), ta.grad.numpy())
    np.testing.assert_allclose(xb.grad.asnumpy(), tb.grad.numpy())

    parts = ops.split(tensor(b), [1, 3, 1], axis=1)
    tparts = torch.split(torch.tensor(b), [1, 3, 1], dim=1)
    for got, want in zip(parts, tparts):
        np.testing.assert_array_equal(got.asnumpy(), want.numpy())
    np.testing.assert_array_equal(ops.stack([tensor(a), tensor(a)], -1).asnumpy(),
                                  torch.stack([torch.tensor(a)] * 2, -1).numpy())
