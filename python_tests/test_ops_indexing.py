"""Indexing primitives: x[...], Slice, StridedSlice, Gather (dense and RowTensor gradients),
OneHot. Forward against NumPy, gradients by central differences, PyTorch parity, errors."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.testing.gradcheck import check_gradients


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def tensor(array, grad=False):
    return ms.Tensor(array, requires_grad=grad)


def backward_ones(out):
    out.backward(np.ones(out.shape))


MASK = np.array([True, False, True])
INDICES = [
    1, -1, (0, 2), (0, -1, 3),
    np.s_[1:], np.s_[::-1], np.s_[:, ::2], np.s_[:, 3:0:-2, ::-3], np.s_[-2:, 1:3, 4:],
    np.s_[None, 0], np.s_[..., 1], np.s_[1, ..., None, 2:],
    MASK, np.s_[:, [True, False, True, True]],
    [2, 0, 2], np.s_[:, [1, 1, 3]], np.s_[[0, 2], :, [4, 4]], np.s_[[[0], [2]], 1:3, [1, 0]],
    np.s_[np.array([2, 2, 2]), ..., None], np.s_[:, [-1, 0], None, ::2],
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_getitem_forward_and_gradient(index):
    a = rand(3, 4, 5)
    out = tensor(a)[index]
    np.testing.assert_array_equal(out.asnumpy(), a[index])
    check_gradients(lambda x: x[index], a)


@pytest.mark.parametrize("index", [np.s_[1, ::-1], np.s_[[2, 2, 0]], np.s_[:, [True, False, True, True]]])
def test_getitem_of_non_contiguous_input(index):
    a = rand(4, 3)
    np.testing.assert_array_equal(tensor(a).T[::-1][index].asnumpy(), a.T[::-1][index])
    check_gradients(lambda x: x.T[::-1][index], a)
    check_gradients(lambda x: x[:, ::2][index], rand(3, 8))


def test_getitem_with_tensor_indices_and_masks():
    a = rand(3, 4)
    idx = ms.Tensor(np.array([2, 0, 2]))
    mask = ms.Tensor(a > 0)
    np.testing.assert_array_equal(tensor(a)[idx].asnumpy(), a[[2, 0, 2]])
    np.testing.assert_array_equal(tensor(a)[mask].asnumpy(), a[a > 0])
    np.testing.assert_array_equal(tensor(a)[ms.Tensor(np.array(1)), 1:].asnumpy(), a[1, 1:])
    np.testing.assert_array_equal(tensor(a)[:ms.Tensor(np.array(2))].asnumpy(), a[:2])
    check_gradients(lambda x: x[idx, 1:], a)
    check_gradients(lambda x: x[mask], a)


def test_repeated_advanced_indices_accumulate():
    x = tensor(np.zeros((4, 2)), grad=True)
    backward_ones(x[[0, 3, 0, 0], 1])
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0, 3], [0, 0], [0, 0], [0, 1]])


def test_getitem_scalar_result_and_empty_selection():
    a = rand(3, 4)
    out = tensor(a)[1, 2]
    assert out.shape == () and out.item() == a[1, 2]
    assert tensor(a)[[]].shape == (0, 4)
    check_gradients(lambda x: x[1, 2], a)


def test_getitem_backward_leaves_input_untouched():
    a = rand(3, 4)
    x = tensor(a, grad=True)
    backward_ones(x[::-1, [0, 0]])
    np.testing.assert_array_equal(x.asnumpy(), a)


def test_getitem_errors():
    x = tensor(rand(3, 4))
    with pytest.raises(IndexError, match="GetItem"):
        x[3]
    with pytest.raises(IndexError, match=r"GetItem.*integers or booleans.*float"):
        x[ms.Tensor([0.5])]


def test_getitem_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, w = rand(4, 5), rand(3, 2, seed=1)
    index = (torch.tensor([3, 0, 3]), slice(1, 5, 2))
    x = tensor(a, grad=True)
    out = x[np.array([3, 0, 3]), 1:5:2]
    out.backward(w)
    t = torch.tensor(a, requires_grad=True)
    tout = t[index]
    tout.backward(torch.tensor(w))
    np.testing.assert_array_equal(out.asnumpy(), tout.detach().numpy())
    np.testing.assert_allclose(x.grad.asnumpy(), t.grad.numpy())


# ---- Slice / StridedSlice --------------------------------------------------------------
@pytest.mark.parametrize("begin, size", [((0, 1, 2), (3, 2, 3)), ((1, 0, 0), (-1, -1, 1)), ((2, 3, 4), (1, 1, 1)),
                                         ((0, 0, 0), (0, 4, 5))])
def test_slice_forward_and_gradient(begin, size):
    a = rand(3, 4, 5)
    stops = [n if s == -1 else b + s for b, s, n in zip(begin, size, a.shape)]
    want = a[tuple(slice(b, e) for b, e in zip(begin, stops))]
    np.testing.assert_array_equal(ops.Slice()(tensor(a), begin, size).asnumpy(), want)
    check_gradients(lambda x: ops.slice(x, begin, size), a)


@pytest.mark.parametrize("begin, size", [((0, 0), (3, 1)), ((-1, 0), (1, 1)), ((0,), (1,)), ((1, 1), (-2, 1))])
def test_slice_out_of_bounds(begin, size):
    with pytest.raises(ValueError, match=r"Slice.*\(2, 4\)"):
        ops.slice(tensor(rand(2, 4)), begin, size)


STRIDED = [
    (dict(), (0, 1), (3, 4), (1, 2), np.s_[0:3, 1:4:2]),
    (dict(begin_mask=1, end_mask=3), (2, 1), (0, 0), (-1, 1), np.s_[::-1, 1:]),
    (dict(begin_mask=2), (2, 1), (0, 3), (-1, 1), np.s_[2:0:-1, :3]),
    (dict(shrink_axis_mask=2), (0, 2, 1), (2, 3, 5), (1, 1, 2), np.s_[0:2, 2, 1:5:2]),
    (dict(new_axis_mask=1, ellipsis_mask=2), (0, 0, 1), (0, 0, 3), (1, 1, 1), np.s_[None, ..., 1:3]),
]


@pytest.mark.parametrize("masks, begin, end, strides, index", STRIDED)
def test_strided_slice_forward_and_gradient(masks, begin, end, strides, index):
    a = rand(3, 4, 5)
    out = ops.StridedSlice(**masks)(tensor(a), begin, end, strides)
    np.testing.assert_array_equal(out.asnumpy(), a[index])
    check_gradients(lambda x: ops.strided_slice(x, begin, end, strides, **masks), a)


def test_strided_slice_zero_stride():
    with pytest.raises(ValueError, match="StridedSlice.*0"):
        ops.StridedSlice()(tensor(rand(3)), (0,), (3,), (0,))


# ---- Gather ----------------------------------------------------------------------------
@pytest.mark.parametrize("axis, indices", [(0, [2, 0, 2, 3]), (1, [[1, 1], [0, 2]]), (-1, [3, -1]),
                                           (2, 1), (0, np.zeros((0,), np.int64))])
def test_gather_forward_and_gradient(axis, indices):
    a = rand(4, 4, 4)
    idx = np.asarray(indices)
    out = ops.Gather()(tensor(a), ms.Tensor(idx), axis)
    np.testing.assert_array_equal(out.asnumpy(), np.take(a, idx, axis=axis))
    np.testing.assert_array_equal(ops.gather(tensor(a), indices, axis).asnumpy(), np.take(a, idx, axis=axis))
    check_gradients(lambda x: ops.gather(x, ms.Tensor(idx), axis), a)
    check_gradients(lambda x: ops.gather(x.transpose(1, 0, 2)[:, ::-1], idx, axis), a)


def test_gather_repeated_indices_accumulate():
    x = tensor(np.zeros((3, 2)), grad=True)
    backward_ones(ops.gather(x, [1, 1, 1, 0], 0))
    np.testing.assert_array_equal(x.grad.asnumpy(), [[1, 1], [3, 3], [0, 0]])


@pytest.mark.parametrize("indices", [[0, 2, 2, -1], [[1, 0], [1, 1]], 2])
def test_sparse_gather_gives_row_tensor_equal_to_dense(indices):
    a, idx = rand(4, 3), np.asarray(indices)
    w = rand(*np.take(a, idx, axis=0).shape, seed=1)
    dense_x, sparse_x = tensor(a, grad=True), tensor(a, grad=True)
    ops.gather(dense_x, idx).backward(w)
    ops.Gather(sparse_grad=True)(sparse_x, ms.Tensor(idx), 0).backward(w)
    assert isinstance(sparse_x.grad, ms.RowTensor)
    assert sparse_x.grad.dense_shape == (4, 3)
    assert sparse_x.grad.indices.shape == (idx.size,) and int(sparse_x.grad.indices.asnumpy().min()) >= 0
    np.testing.assert_allclose(sparse_x.grad.to_dense().asnumpy(), dense_x.grad.asnumpy())
    check_gradients(lambda x: ops.gather(x, idx, sparse_grad=True), a)


def test_sparse_gather_on_another_axis_stays_dense():
    x = tensor(rand(2, 3), grad=True)
    backward_ones(ops.Gather(sparse_grad=True)(x, [0, 0], 1))
    assert isinstance(x.grad, ms.Tensor)
    np.testing.assert_array_equal(x.grad.asnumpy(), [[2, 0, 0], [2, 0, 0]])


def test_gather_out_of_range_names_index_and_axis_size():
    with pytest.raises(IndexError, match=r"Gather.*index 5 .*axis 0 of size 4"):
        ops.gather(tensor(rand(4, 2)), [0, 5])
    with pytest.raises(IndexError, match=r"Gather.*index -3 .*axis 1 of size 2"):
        ops.gather(tensor(rand(4, 2)), [-3], axis=-1)


def test_gather_bad_inputs():
    with pytest.raises(TypeError, match="Gather.*integers.*float"):
        ops.gather(tensor(rand(4, 2)), ms.Tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"Gather.*axis 2 .*\(4, 2\)"):
        ops.gather(tensor(rand(4, 2)), [0], axis=2)
    with pytest.raises(ValueError, match="batch_dims"):
        ops.Gather(1)


def test_gather_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, idx = rand(5, 3), np.array([[4, 0], [4, 4]])
    w = rand(2, 2, 3, seed=1)
    x = tensor(a, grad=True)
    ops.gather(x, idx).backward(w)
    t = torch.tensor(a, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor(idx), t)
    out.backward(torch.tensor(w))
    np.testing.assert_allclose(x.grad.asnumpy(), t.grad.numpy())
    np.testing.assert_array_equal(ops.gather(tensor(a), idx).asnumpy(), out.detach().numpy())


# ---- OneHot ----------------------------------------------------------------------------
def test_one_hot_forward():
    idx = np.array([[0, 3], [2, 1]])
    out = ops.OneHot()(ms.Tensor(idx), 4, 1.0, 0.0)
    np.testing.assert_array_equal(out.asnumpy(), np.eye(4)[idx])
    assert out.dtype == ms.float32
    out = ops.one_hot(ms.Tensor(idx), 4, on_value=5.0, off_value=-1.0, dtype=ms.float64, axis=0)
    assert out.dtype == ms.float64 and out.shape == (4, 2, 2)
    np.testing.assert_array_equal(out.asnumpy(), np.moveaxis(np.where(np.eye(4, dtype=bool)[idx], 5.0, -1.0), -1, 0))
    np.testing.assert_array_equal(ops.OneHot(axis=1)([1, 0], 2, 1, 0).asnumpy(), [[0, 1], [1, 0]])


def test_one_hot_out_of_range_row_is_off_and_not_differentiable():
    on = tensor(np.array(2.0), grad=True)
    out = ops.OneHot()(ms.Tensor([1, 3, -1]), 3, on, tensor(np.array(0.0)))
    np.testing.assert_array_equal(out.asnumpy(), [[0, 2, 0], [0, 0, 0], [0, 0, 0]])
    assert not out.requires_grad


def test_one_hot_matches_pytorch():
    torch = pytest.importorskip("torch")
    idx = np.array([3, 0, 2, 2])
    np.testing.assert_array_equal(ops.one_hot(idx, 5).asnumpy(),
                                  torch.nn.functional.one_hot(torch.tensor(idx), 5).numpy())


def test_one_hot_bad_inputs():
    with pytest.raises(TypeError, match="OneHot.*integers"):
        ops.one_hot(ms.Tensor([0.0]), 3)
    with pytest.raises(ValueError, match="OneHot.*depth"):
        ops.one_hot(ms.Tensor([0]), -1)
    with pytest.raises(ValueError, match="OneHot.*scalars"):
        ops.OneHot()(ms.Tensor([0]), 2, ms.Tensor([1.0, 2.0]), 0.0)


# ---- index arrays on another device ----------------------------------------------------
@pytest.mark.host_default
def test_index_tensors_follow_the_data_to_its_device(virtual_gpu):
    a = rand(3, 4)
    x = ms.Tensor(a, device="GPU", requires_grad=True)
    ids = ms.Tensor(np.array([2, 2, 0]))
    ms.reset_transfer_stats()
    out = x[ids, 1:]                                      # index on the host, data on the device
    assert out.device == "GPU"
    assert ms.transfer_stats()["host_to_device"] == ids.nbytes   # only the index travelled
    np.testing.assert_array_equal(out.asnumpy(), a[[2, 2, 0], 1:])
    backward_ones(out)
    assert x.grad.device == "GPU"
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0, 1, 1, 1], [0, 0, 0, 0], [0, 2, 2, 2]])

    table = tensor(a, grad=True)                          # a host table looked up with device ids
    rows = ops.Gather(sparse_grad=True).set_device("CPU")(table, ms.Tensor(np.array([0, 2]), device="GPU"), 0)
    assert rows.device == "CPU"
    backward_ones(rows)
    assert isinstance(table.grad, ms.RowTensor) and table.grad.device == "CPU"
    np.testing.assert_array_equal(table.grad.to_dense().asnumpy(), [[1] * 4, [0] * 4, [1] * 4])


def test_sparse_gradient_owns_its_memory():
    ids = np.array([1, 0, 1])
    table, w = tensor(rand(3, 2), grad=True), rand(3, 2, seed=1)
    ops.gather(table, ms.Tensor(ids), sparse_grad=True).backward(w)
    table.grad.values.data *= 0          # an optimizer scaling the rows in place
    table.grad.indices.data[:] = 2
    np.testing.assert_array_equal(ids, [1, 0, 1])
    np.testing.assert_array_equal(w, rand(3, 2, seed=1))
