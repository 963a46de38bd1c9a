"""EmbeddingLookup / embedding_lookup: gather, sparse and dense gradients, PyTorch, errors."""
import numpy as np
import pytest

from minitorch_dist import RowTensor, Tensor, ops
from minitorch_dist.ops import embedding as embedding_module
from minitorch_dist.testing.gradcheck import check_gradients

TABLE = np.random.default_rng(0).standard_normal((7, 3))
IDS = np.array([[1, 4, 1], [6, 0, 4]])


@pytest.mark.parametrize("ids", [IDS, IDS.astype(np.int32), IDS[0], IDS.T])
def test_forward_gathers_rows(ids):
    out = ops.EmbeddingLookup()(Tensor(TABLE), Tensor(ids))
    assert out.shape == ids.shape + (3,)
    np.testing.assert_array_equal(out.asnumpy(), TABLE[ids])


def test_sparse_gradient_is_a_row_tensor_of_the_looked_up_rows():
    table = Tensor(TABLE, requires_grad=True)
    g = np.random.default_rng(1).standard_normal(IDS.shape + (3,))
    ops.EmbeddingLookup(sparse=True)(table, Tensor(IDS)).backward(Tensor(g))
    grad = table.grad
    assert isinstance(grad, RowTensor) and grad.dense_shape == (7, 3)
    np.testing.assert_array_equal(grad.indices.asnumpy(), IDS.reshape(-1))
    np.testing.assert_array_equal(grad.values.asnumpy(), g.reshape(-1, 3))


def test_dense_gradient_adds_up_repeated_ids_and_equals_the_densified_sparse_one():
    g = np.random.default_rng(2).standard_normal(IDS.shape + (3,))
    expected = np.zeros_like(TABLE)
    np.add.at(expected, IDS.reshape(-1), g.reshape(-1, 3))
    grads = {}
    for sparse in (True, False):
        table = Tensor(TABLE, requires_grad=True)
        ops.embedding_lookup(table, Tensor(IDS), sparse=sparse).backward(Tensor(g))
        grads[sparse] = table.grad.to_dense() if sparse else table.grad
    assert not isinstance(grads[False], RowTensor)
    np.testing.assert_allclose(grads[False].asnumpy(), expected, atol=1e-12)
    np.testing.assert_allclose(grads[True].asnumpy(), expected, atol=1e-12)


@pytest.mark.parametrize("sparse", [True, False])
def test_gradients_match_central_differences(sparse):
    check_gradients(lambda t, i: ops.embedding_lookup(t, i, sparse=sparse), TABLE, IDS)


def test_device_fallback_path_agrees_with_the_kernels(monkeypatch):
    """xp.take / add.at (used on CuPy), run on NumPy, give the same results."""
    g = np.random.default_rng(3).standard_normal(IDS.shape + (3,))
    results = []
    for use in (True, False):
        monkeypatch.setattr(embedding_module, "_use_kernels", lambda xp, a, use=use: use)
        table = Tensor(TABLE, requires_grad=True)
        out = ops.embedding_lookup(table, Tensor(IDS))
        out.backward(Tensor(g))
        results.append((out.asnumpy(), table.grad.asnumpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_non_contiguous_table_and_ids():
    import minitorch_dist as ms
    table_f = np.asfortranarray(TABLE)
    ids = np.array([[3, 0, 5, 1], [6, 2, 6, 4]])[:, ::2]
    g = np.random.default_rng(6).standard_normal(ids.shape + (3,))
    table = Tensor._make(table_f, ms.get_device("CPU"), requires_grad=True)
    out = ops.embedding_lookup(table, Tensor._make(ids, ms.get_device("CPU")))
    np.testing.assert_array_equal(out.asnumpy(), TABLE[ids])
    out.backward(Tensor(g))
    expected = np.zeros_like(TABLE)
    np.add.at(expected, ids.reshape(-1), g.reshape(-1, 3))
    np.testing.assert_allclose(table.grad.asnumpy(), expected, atol=1e-12)


def test_float32_table_keeps_its_dtype():
    table = Tensor(TABLE.astype(np.float32), requires_grad=True)
    out = ops.embedding_lookup(table, Tensor(IDS))
    out.sum().backward()
    assert out.dtype == np.float32 and table.grad.dtype == np.float32


def test_matches_torch():
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(4).standard_normal(IDS.shape + (3,))
    t_table = torch.tensor(TABLE, requires_grad=True)
    expected = torch.nn.functional.embedding(torch.tensor(IDS), t_table)
    expected.backward(torch.tensor(g))
    for sparse in (True, False):
        table = Tensor(TABLE, requires_grad=True)
        out = ops.embedding_lookup(table, Tensor(IDS), sparse=sparse)
        out.backward(Tensor(g))
        grad = table.grad.to_dense() if sparse else table.grad
        np.testing.assert_array_equal(out.asnumpy(), expected.detach().numpy())
        np.testing.assert_allclose(grad.asnumpy(), t_table.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("bad_id", [7, -1, 100])
def test_out_of_range_ids_name_the_id_and_the_vocabulary(bad_id):
    ids = np.array([0, bad_id, 2])
    with pytest.raises(IndexError, match=rf"EmbeddingLookup.*id {bad_id}\b.*vocabulary of 7"):
        ops.EmbeddingLookup()(Tensor(TABLE), Tensor(ids))


def test_float_ids_are_rejected():
    with pytest.raises(TypeError, match="EmbeddingLookup.*integers"):
        ops.embedding_lookup(Tensor(TABLE), Tensor(np.array([0.0, 1.0])))


# ---- devices ------------------------------------------------------------------------------

@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    import minitorch_dist as ms
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


@pytest.mark.parametrize("sparse", [True, False])
def test_runs_on_a_gpu_like_on_the_host(gpu, sparse):
    g = np.random.default_rng(5).standard_normal(IDS.shape + (3,))
    table = Tensor(TABLE, device=gpu, requires_grad=True)
    out = ops.embedding_lookup(table, Tensor(IDS, device=gpu), sparse=sparse)
    assert out.device is gpu
    out.backward(Tensor(g, device=gpu))
    grad = table.grad.to_dense() if sparse else table.grad
    assert grad.device is gpu
    expected = np.zeros_like(TABLE)
    np.add.at(expected, IDS.reshape(-1), g.reshape(-1, 3))
    np.testing.assert_array_equal(out.asnumpy(), TABLE[IDS])
    np.testing.assert_allclose(grad.asnumpy(), expected, atol=1e-12)
    with pytest.raises(IndexError, match="id 9"):
        ops.embedding_lookup(table, Tensor(np.array([9]), device=gpu))
