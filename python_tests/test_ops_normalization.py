"""BatchNorm / batch_norm: NumPy reference, moving statistics, central differences, PyTorch."""
import numpy as np
import pytest

from minitorch_dist import Tensor, ops
from minitorch_dist.testing.gradcheck import check_gradients


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def reference(x, gamma, beta, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) \
        + beta.reshape(shape)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5, 2), (2, 4, 3)])
def test_training_normalizes_with_batch_statistics_and_updates_moving_ones(shape):
    x = rand(*shape) * 3 + 1
    c = shape[1]
    gamma, beta = rand(c, seed=1), rand(c, seed=2)
    moving_mean, moving_var = Tensor(rand(c, seed=3)), Tensor(np.abs(rand(c, seed=4)) + 0.5)
    old_mean, old_var = moving_mean.asnumpy(), moving_var.asnumpy()
    out = ops.BatchNorm(is_training=True, epsilon=1e-3, momentum=0.25)(
        Tensor(x), Tensor(gamma), Tensor(beta), moving_mean, moving_var)
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    np.testing.assert_allclose(out.asnumpy(), reference(x, gamma, beta, mean, var, 1e-3), atol=1e-12)
    unbiased = x.var(axis=axes, ddof=1)
    np.testing.assert_allclose(moving_mean.asnumpy(), 0.75 * old_mean + 0.25 * mean, atol=1e-12)
    np.testing.assert_allclose(moving_var.asnumpy(), 0.75 * old_var + 0.25 * unbiased, atol=1e-12)


def test_eval_uses_moving_statistics_and_leaves_them_alone():
    x = rand(5, 3, 4, 4)
    gamma, beta = rand(3, seed=1), rand(3, seed=2)
    mean, var = rand(3, seed=3), np.abs(rand(3, seed=4)) + 0.5
    moving_mean, moving_var = Tensor(mean), Tensor(var)
    out = ops.batch_norm(Tensor(x), Tensor(gamma), Tensor(beta), moving_mean, moving_var, training=False)
    np.testing.assert_allclose(out.asnumpy(), reference(x, gamma, beta, mean, var, 1e-5), atol=1e-12)
    np.testing.assert_array_equal(moving_mean.asnumpy(), mean)
    np.testing.assert_array_equal(moving_var.asnumpy(), var)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 3, 2)])
def test_gradients_match_central_differences(training, shape):
    c = shape[1]
    mean, var = rand(c, seed=3), np.abs(rand(c, seed=4)) + 0.5

    def fn(x, gamma, beta):
        # fresh moving statistics every call: training mode updates them in place
        return ops.batch_norm(x, gamma, beta, Tensor(mean), Tensor(var), training=training)
    check_gradients(fn, rand(*shape, seed=5), rand(c, seed=6), rand(c, seed=7))


def test_non_contiguous_input():
    base = rand(4, 3, 6, 5, seed=8)
    x = base[:, :, ::2, :]
    gamma, beta = rand(3, seed=1), rand(3, seed=2)
    got = ops.batch_norm(Tensor._make(x, Tensor(base).device), Tensor(gamma), Tensor(beta),
                         Tensor(np.zeros(3)), Tensor(np.ones(3)))
    axes = (0, 2, 3)
    np.testing.assert_allclose(got.asnumpy(), reference(x, gamma, beta, x.mean(axes), x.var(axes), 1e-5),
                               atol=1e-12)


def test_moving_statistics_get_no_gradient():
    moving_mean = Tensor(np.zeros(2), requires_grad=True)
    x = Tensor(rand(4, 2), requires_grad=True)
    ops.batch_norm(x, Tensor(np.ones(2)), Tensor(np.zeros(2)), moving_mean, Tensor(np.ones(2))).sum().backward()
    assert x.grad is not None and moving_mean.grad is None


# ---- PyTorch ------------------------------------------------------------------------------

@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(8, 4), (4, 3, 5, 5)])
def test_matches_torch_including_running_statistics(training, shape):
    torch = pytest.importorskip("torch")
    x = (rand(*shape) * 2 + 0.5).astype(np.float32)
    c = shape[1]
    gamma, beta = rand(c, seed=1).astype(np.float32), rand(c, seed=2).astype(np.float32)
    mean, var = rand(c, seed=3).astype(np.float32), (np.abs(rand(c, seed=4)) + 0.5).astype(np.float32)
    g = rand(*shape, seed=5).astype(np.float32)

    t_mean, t_var = torch.tensor(mean), torch.tensor(var)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    expected = torch.nn.functional.batch_norm(tx, t_mean, t_var, tg, tb, training, 0.1, 1e-5)
    expected.backward(torch.tensor(g))

    m_mean, m_var = Tensor(mean), Tensor(var)
    mx, mg, mb = (Tensor(a, requires_grad=True) for a in (x, gamma, beta))
    out = ops.batch_norm(mx, mg, mb, m_mean, m_var, training=training, momentum=0.1, eps=1e-5)
    out.backward(Tensor(g))

    tol = {"rtol": 1e-4, "atol": 1e-5}
    np.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), **tol)
    np.testing.assert_allclose(m_mean.asnumpy(), t_mean.numpy(), **tol)
    np.testing.assert_allclose(m_var.asnumpy(), t_var.numpy(), **tol)
    for ours, theirs in ((mx, tx), (mg, tg), (mb, tb)):
        np.testing.assert_allclose(ours.grad.asnumpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert out.dtype == np.float32


# ---- bad input ----------------------------------------------------------------------------

def _params(c):
    return [Tensor(np.ones(c)) for _ in range(4)]


def test_wrong_parameter_shape_names_the_primitive_and_shapes():
    gamma, beta, mean, var = _params(3)
    with pytest.raises(ValueError, match=r"BatchNorm.*gamma.*\(4,\).*\(2, 4, 3, 3\).*\(3,\)"):
        ops.BatchNorm()(Tensor(np.zeros((2, 4, 3, 3))), gamma, beta, mean, var)


def test_other_bad_inputs():
    with pytest.raises(ValueError, match="BatchNorm.*more than one value per channel"):
        ops.BatchNorm()(Tensor(np.zeros((1, 3))), *_params(3))
    with pytest.raises(ValueError, match="BatchNorm.*shape"):
        ops.BatchNorm()(Tensor(np.zeros(3)), *_params(3))
    with pytest.raises(TypeError, match="BatchNorm.*floating"):
        ops.BatchNorm()(Tensor(np.zeros((2, 3), np.int64)), *_params(3))
    with pytest.raises(ValueError, match="momentum"):
        ops.BatchNorm(momentum=1.5)


# ---- devices ------------------------------------------------------------------------------

@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    import minitorch_dist as ms
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


def test_runs_on_a_gpu_and_updates_the_moving_statistics_there(gpu):
    import minitorch_dist as ms
    x, g = rand(4, 3, 5, 5), rand(4, 3, 5, 5, seed=1)
    results = []
    for device in (ms.get_device("CPU"), gpu):
        xt, gamma, beta = (Tensor(a, device=device, requires_grad=True)
                           for a in (x, rand(3, seed=2), rand(3, seed=3)))
        mean, var = Tensor(np.zeros(3), device=device), Tensor(np.ones(3), device=device)
        out = ops.batch_norm(xt, gamma, beta, mean, var)
        assert out.device is device
        out.backward(Tensor(g, device=device))
        results.append([out.asnumpy(), xt.grad.asnumpy(), gamma.grad.asnumpy(), mean.asnumpy(),
                        var.asnumpy()])
    assert not np.array_equal(results[1][3], np.zeros(3))
    for ours, host in zip(*results):
        np.testing.assert_allclose(ours, host, atol=1e-10)


# ---- channels-last row kernels (issue 18) ---------------------------------------------------

def _channels_last(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-12)])
def test_row_kernels_equal_numpy_path_and_torch(dtype, tol):
    from minitorch_dist import kernels
    torch = pytest.importorskip("torch")
    x = (rand(6, 8, 5, 7) * 3 + 1).astype(dtype)
    g = rand(6, 8, 5, 7, seed=4).astype(dtype)
    gamma, beta = rand(8, seed=5).astype(dtype), rand(8, seed=6).astype(dtype)
    results = []
    for layout in (_channels_last, np.ascontiguousarray):     # row kernels, then NumPy
        xt = Tensor(layout(x), requires_grad=True)
        gt, bt = Tensor(gamma, requires_grad=True), Tensor(beta, requires_grad=True)
        mean, var = Tensor(np.zeros(8, dtype)), Tensor(np.ones(8, dtype))
        out = ops.batch_norm(xt, gt, bt, mean, var, momentum=0.3)
        out.backward(Tensor(layout(g)))
        results.append([out.asnumpy(), xt.grad.asnumpy(), gt.grad.asnumpy(), bt.grad.asnumpy(),
                        mean.asnumpy(), var.asnumpy()])
    for rows, plain in zip(*results):
        np.testing.assert_allclose(rows, plain, rtol=tol * 10, atol=tol * 10)
    tx = torch.tensor(x, requires_grad=True)
    tg, tb = torch.tensor(gamma, requires_grad=True), torch.tensor(beta, requires_grad=True)
    rm, rv = torch.zeros(8, dtype=tx.dtype), torch.ones(8, dtype=tx.dtype)
    to = torch.nn.functional.batch_norm(tx, rm, rv, tg, tb, training=True, momentum=0.3)
    to.backward(torch.tensor(g))
    theirs = [to, tx.grad, tg.grad, tb.grad, rm, rv]
    for mine, t in zip(results[0], theirs):
        t = t.detach().numpy()
        np.testing.assert_allclose(mine, t, rtol=tol * 50, atol=tol * 50 * max(1, np.abs(t).max()))
    assert kernels.HAVE_CPP is False or results[0][0].dtype == dtype


def test_row_kernel_twins_agree_and_reject_bad_shapes():
    from minitorch_dist import kernels
    from minitorch_dist.kernels import reference
    x = (rand(300, 16) * 2 - 0.5).astype(np.float32)
    gamma, beta = rand(16, seed=1).astype(np.float32), rand(16, seed=2).astype(np.float32)
    mine, twin = kernels.batch_norm_rows(x, gamma, beta, 1e-5), \
        reference.batch_norm_rows(x, gamma, beta, 1e-5)
    for a, b in zip(mine, twin):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    g = rand(300, 16, seed=3).astype(np.float32)
    inv = (1 / np.sqrt(mine[3].astype(np.float64) + 1e-5)).astype(np.float32)
    for a, b in zip(kernels.batch_norm_rows_backward(g, mine[1], gamma, inv),
                    reference.batch_norm_rows_backward(g, mine[1], gamma, inv)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    dx, dgamma, dbeta = kernels.batch_norm_rows_backward(g, mine[1], gamma, inv, need_dx=False)
    assert dx is None and dbeta.shape == (16,)
    for impl in (kernels, reference):
        with pytest.raises(ValueError, match="gamma"):
            impl.batch_norm_rows(x, gamma[:3], beta, 1e-5)
        with pytest.raises(ValueError, match="xhat"):
            impl.batch_norm_rows_backward(g, mine[1][:5], gamma, inv)
        with pytest.raises(TypeError):
            impl.batch_norm_rows(x.astype(np.int32), gamma, beta, 1e-5)


def test_row_kernel_sums_do_not_depend_on_the_thread_count():
    from minitorch_dist import kernels
    from minitorch_dist.backend import threads
    if not kernels.HAVE_CPP:
        pytest.skip("C++ kernels not built")
    x = rand(70000, 32).astype(np.float32)
    gamma, beta = rand(32, seed=1).astype(np.float32), rand(32, seed=2).astype(np.float32)
    runs = []
    try:
        for count in (1, 2, 3):
            threads.set_num_threads(count)
            out, xhat, mean, var = kernels.batch_norm_rows(x, gamma, beta, 1e-5)
            back = kernels.batch_norm_rows_backward(x, xhat, gamma, var)
            runs.append([out, mean, var, *back])
    finally:
        threads.set_num_threads(None)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)
