"""Host kernels: the C++ versions equal their NumPy twins, and the twins equal naive formulas.

Covered here: backend selection, im2col/col2im, embedding rows (gather, scatter-add, unique
merge) and the sparse optimizer updates (SGD, lazy Adam, FTRL); the gradient-compression
kernels (top-K, threshold, fp16 pack/unpack) are in ``test_kernels_compression.py``.

The C++ side is reached through ``minitorch_dist.kernels.native`` (skipped when the extension
was not built); the twins through ``minitorch_dist.kernels.reference``.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from minitorch_dist import kernels
from minitorch_dist.kernels import reference as ref

FLOATS = [np.float32, np.float64]


@pytest.fixture(scope="module")
def cpp():
    """The C++-backed wrappers (skips the test when the extension is missing)."""
    pytest.importorskip("minitorch_dist._C")
    from minitorch_dist.kernels import native
    return native


@pytest.fixture(params=["reference", "cpp"])
def impl(request):
    """Each implementation in turn, for properties both must have."""
    if request.param == "reference":
        return ref
    return request.getfixturevalue("cpp")


def rng(seed=0):
    return np.random.default_rng(seed)


# --- backend selection ---------------------------------------------------------------------

def test_extension_was_built_when_required():
    if os.environ.get("MINITORCH_DIST_REQUIRE_CPP") != "1":
        pytest.skip("set MINITORCH_DIST_REQUIRE_CPP=1 to insist on the C++ extension")
    assert kernels.HAVE_CPP, f"C++ kernels unavailable: {kernels.CPP_IMPORT_ERROR}"


def test_public_names_and_reference_module():
    for name in kernels.__all__:
        assert hasattr(kernels, name), name
    assert kernels.reference is ref
    assert isinstance(kernels.HAVE_CPP, bool)
    expected = "native" if kernels.HAVE_CPP else "reference"
    assert kernels.im2col.__module__.endswith(expected)


def test_env_var_forces_the_numpy_twins():
    code = ("from minitorch_dist import kernels as k; "
            "assert not k.HAVE_CPP and k.im2col is k.reference.im2col; print(k.CPP_IMPORT_ERROR)")
    env = dict(os.environ, MINITORCH_DIST_NO_CPP="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "MINITORCH_DIST_NO_CPP" in done.stdout


# --- im2col / col2im -------------------------------------------------------------------------

# (x shape, kh, kw, sh, sw, ph, pw, dh, dw): valid, strided, padded, dilated, 1x1, windows
# entirely in the padding, widths with and without a compile-time specialisation.
GEOMETRIES = [
    ((2, 3, 7, 8), 3, 3, 1, 1, 0, 0, 1, 1),
    ((2, 3, 7, 8), 3, 2, 2, 1, 1, 2, 2, 1),
    ((1, 2, 5, 5), 5, 5, 1, 1, 2, 2, 1, 1),
    ((2, 1, 9, 6), 2, 3, 3, 2, 0, 1, 1, 3),
    ((3, 2, 4, 4), 1, 1, 1, 1, 0, 0, 1, 1),
    ((1, 1, 3, 3), 3, 3, 1, 1, 3, 3, 1, 1),
    ((2, 2, 8, 9), 2, 6, 1, 1, 1, 0, 1, 1),
    ((1, 2, 16, 16), 3, 7, 2, 1, 3, 3, 1, 2),
    ((2, 3, 12, 12), 5, 5, 1, 1, 0, 0, 1, 1),
    ((1, 2, 6, 7), 4, 2, 3, 3, 2, 1, 2, 1),
]


def output_size(x_shape, kh, kw, sh, sw, ph, pw, dh, dw):
    n, c, h, w = x_shape
    return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1


def patch_taps(x_shape, kh, kw, sh, sw, ph, pw, dh, dw):
    """Every (cols row, cols column, image index) of an im2col, by explicit loops over the
    definition; taps that fall in the padding are left out."""
    n, c, h, w = x_shape
    oh, ow = output_size(x_shape, kh, kw, sh, sw, ph, pw, dh, dw)
    for b, p, q, ch, i, j in np.ndindex(n, oh, ow, c, kh, kw):
        r, s = p * sh - ph + i * dh, q * sw - pw + j * dw
        if 0 <= r < h and 0 <= s < w:
            yield (b * oh + p) * ow + q, (ch * kh + i) * kw + j, (b, ch, r, s)


def naive_im2col(x, *args):
    oh, ow = output_size(x.shape, *args)
    cols = np.zeros((x.shape[0] * oh * ow, x.shape[1] * args[0] * args[1]), x.dtype)
    for row, col, pixel in patch_taps(x.shape, *args):
        cols[row, col] = x[pixel]
    return cols


def naive_col2im(cols, x_shape, *args):
    x = np.zeros(x_shape, cols.dtype)
    for row, col, pixel in patch_taps(x_shape, *args):
        x[pixel] += cols[row, col]
    return x


@pytest.mark.parametrize("geometry", GEOMETRIES[:6])
def test_reference_im2col_and_col2im_match_explicit_loops(geometry):
    shape, *args = geometry
    x = rng(1).standard_normal(shape)
    cols = ref.im2col(x, *args)
    np.testing.assert_array_equal(cols, naive_im2col(x, *args))
    c = rng(2).standard_normal(cols.shape)
    np.testing.assert_allclose(ref.col2im(c, shape, *args), naive_col2im(c, shape, *args),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_cpp_im2col_col2im_match_reference(cpp, geometry, dtype):
    shape, *args = geometry
    x = rng(3).standard_normal(shape).astype(dtype)
    cols = cpp.im2col(x, *args)
    assert cols.dtype == dtype
    np.testing.assert_array_equal(cols, ref.im2col(x, *args))
    c = rng(4).standard_normal(cols.shape).astype(dtype)
    back = cpp.col2im(c, shape, *args)
    assert back.dtype == dtype and back.shape == shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(back, ref.col2im(c, shape, *args), rtol=tol, atol=tol)


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_col2im_is_the_adjoint_of_im2col(impl, geometry):
    shape, *args = geometry
    x = rng(5).standard_normal(shape)
    c = rng(6).standard_normal(impl.im2col(x, *args).shape)
    lhs = np.vdot(impl.im2col(x, *args), c)
    rhs = np.vdot(x, impl.col2im(c, shape, *args))
    assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12)


def test_im2col_out_argument_and_strided_input(impl):
    base = rng(7).standard_normal((2, 3, 10, 10)).astype(np.float32)
    x = base[:, :, ::2, ::2]                       # not contiguous
    out = np.full((2 * 5 * 5, 3 * 9), np.nan, np.float32)
    got = impl.im2col(x, 3, 3, 1, 1, 1, 1, 1, 1, out=out)
    assert got is out
    expected = naive_im2col(np.ascontiguousarray(x), 3, 3, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(out, expected)
    dx = np.full(x.shape, np.nan, np.float32)
    assert impl.col2im(out, x.shape, 3, 3, 1, 1, 1, 1, 1, 1, out=dx) is dx
    assert np.isfinite(dx).all()


def test_im2col_bad_arguments(impl):
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"kernel 5x5 .* does not fit in the 4x4 image"):
        impl.im2col(x, 5, 5)
    with pytest.raises(ValueError, match="sh must be an integer >= 1"):
        impl.im2col(x, 2, 2, 0, 1)
    with pytest.raises(ValueError, match="pw must be an integer >= 0"):
        impl.im2col(x, 2, 2, 1, 1, 0, -1)
    with pytest.raises(ValueError, match=r"\(N, C, H, W\) image, got shape \(4, 4\)"):
        impl.im2col(x[0, 0], 2, 2)
    with pytest.raises(TypeError, match="x must be float32 or float64, got int64"):
        impl.im2col(np.zeros((1, 1, 4, 4), np.int64), 2, 2)
    with pytest.raises(ValueError, match=r"out must be a C-contiguous float32 array of shape"):
        impl.im2col(x, 2, 2, out=np.zeros((9, 5), np.float32))
    with pytest.raises(ValueError, match=r"cols must have shape \(9, 4\)"):
        impl.col2im(np.zeros((9, 5), np.float32), x.shape, 2, 2)


# --- embedding rows ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_cpp_gather_equals_reference_and_indexing(cpp, dtype, id_dtype):
    table = rng(8).standard_normal((50, 7)).astype(dtype)
    ids = rng(9).integers(0, 50, (4, 6)).astype(id_dtype)
    got = cpp.embedding_gather(table, ids)
    assert got.shape == (4, 6, 7) and got.dtype == dtype
    np.testing.assert_array_equal(got, ref.embedding_gather(table, ids))
    np.testing.assert_array_equal(ref.embedding_gather(table, ids), table[ids])


def test_gather_strided_table_and_row_blocks(impl):
    table = rng(10).standard_normal((9, 4, 6))
    ids = np.array([8, 0, 8, 3])
    np.testing.assert_array_equal(impl.embedding_gather(table, ids), table[ids])
    strided = table[:, :, ::2]
    np.testing.assert_array_equal(impl.embedding_gather(strided, ids), strided[ids])
    assert impl.embedding_gather(table, np.zeros((0,), np.int64)).shape == (0, 4, 6)


@pytest.mark.parametrize("bad", [50, -1, 1000])
def test_out_of_range_ids_name_the_id_and_table_size(impl, bad):
    table = np.zeros((50, 3), np.float32)
    ids = np.array([[1, 2], [bad, 7]])
    message = f"id {bad} is out of range for a table of 50 rows"
    with pytest.raises(IndexError, match=message):
        impl.embedding_gather(table, ids)
    target = table.copy()
    with pytest.raises(IndexError, match=message):
        impl.scatter_add_rows(target, ids.reshape(-1), np.ones((4, 3), np.float32))
    assert not target.any(), "a failed scatter must not change the target"
    with pytest.raises(IndexError, match=message):
        impl.sparse_sgd(target, ids.reshape(-1), np.ones((4, 3), np.float32), 0.1)
    assert not target.any()


def naive_scatter_add(target, ids, values):
    out = target.copy()
    for k, i in enumerate(ids):
        out[i] += values[k]
    return out


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_add_rows_adds_duplicates(impl, dtype):
    target = rng(11).standard_normal((20, 5)).astype(dtype)
    ids = np.array([3, 7, 3, 19, 0, 3, 7], np.int32)
    values = rng(12).standard_normal((7, 5)).astype(dtype)
    expected = naive_scatter_add(target, ids, values)
    result = impl.scatter_add_rows(target, ids, values)
    assert result is target
    np.testing.assert_allclose(target, expected, rtol=1e-6)


def test_cpp_scatter_add_equals_reference_on_strided_target(cpp):
    base = rng(13).standard_normal((30, 8))
    ids = rng(14).integers(0, 30, 100)
    values = rng(15).standard_normal((100, 4))
    a, b = base.copy(), base.copy()
    cpp.scatter_add_rows(a[:, ::2], ids, values)       # updated in place through a copy
    ref.scatter_add_rows(b[:, ::2], ids, values)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a[:, 1::2], base[:, 1::2])


def test_scatter_add_rejects_bad_shapes_and_readonly(impl):
    target = np.zeros((5, 3))
    with pytest.raises(ValueError, match=r"values must have shape \(2, 3\)"):
        impl.scatter_add_rows(target, np.array([0, 1]), np.ones((2, 4)))
    frozen = np.zeros((5, 3))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="target is updated in place and must be writeable"):
        impl.scatter_add_rows(frozen, np.array([0]), np.ones((1, 3)))
    with pytest.raises(TypeError, match="ids must be an integer array"):
        impl.scatter_add_rows(target, np.array([0.0]), np.ones((1, 3)))


def naive_unique_merge(ids, values):
    sums = {}
    for i, row in zip(ids.tolist(), values):
        sums[i] = sums.get(i, 0) + row
    keys = sorted(sums)
    return np.array(keys, np.int64), np.array([sums[k] for k in keys])


@pytest.mark.parametrize("dtype", FLOATS)
def test_unique_merge_matches_dictionary_sum(impl, dtype):
    ids = rng(16).integers(0, 15, 40).astype(np.int32)
    values = rng(17).standard_normal((40, 3)).astype(dtype)
    got_ids, got_values = impl.unique_merge(ids, values)
    want_ids, want_values = naive_unique_merge(ids, values)
    assert got_ids.dtype == np.int64 and got_values.dtype == dtype
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_allclose(got_values, want_values, rtol=1e-5)


def test_cpp_unique_merge_edge_cases(cpp):
    ids, values = cpp.unique_merge(np.arange(5), np.arange(10.0).reshape(5, 2))  # already unique
    np.testing.assert_array_equal(ids, np.arange(5))
    np.testing.assert_array_equal(values, np.arange(10.0).reshape(5, 2))
    ids, values = cpp.unique_merge(np.zeros(0, np.int64), np.zeros((0, 4), np.float32))
    assert ids.shape == (0,) and values.shape == (0, 4) and values.dtype == np.float32
    ids, values = cpp.unique_merge(np.array([[2, 2], [-3, 2]]), np.ones((2, 2, 3)))
    np.testing.assert_array_equal(ids, [-3, 2])
    np.testing.assert_array_equal(values, [[1.0] * 3, [3.0] * 3])
    r_ids, r_values = ref.unique_merge(np.array([[2, 2], [-3, 2]]), np.ones((2, 2, 3)))
    np.testing.assert_array_equal(values, r_values)


# --- sparse optimizer updates -------------------------------------------------------------------

def sparse_problem(dtype, seed, rows=12, width=4, n=9):
    r = rng(seed)
    param = r.standard_normal((rows, width)).astype(dtype)
    ids = r.integers(0, rows, n)
    ids[1] = ids[0]                                  # a guaranteed duplicate
    grads = r.standard_normal((n, width)).astype(dtype)
    return param, ids, grads


def dense_grad(shape, ids, grads):
    dense = np.zeros(shape, grads.dtype)
    np.add.at(dense, ids, grads)
    return dense


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_sparse_sgd_updates_each_touched_row_once(impl, dtype, weight_decay):
    param, ids, grads = sparse_problem(dtype, 20)
    expected = param.astype(np.float64)
    g = dense_grad(param.shape, ids, grads.astype(np.float64))
    touched = np.unique(ids)
    expected[touched] -= 0.5 * (g[touched] + weight_decay * expected[touched])
    impl.sparse_sgd(param, ids, grads, 0.5, weight_decay)
    np.testing.assert_allclose(param, expected, rtol=1e-5, atol=1e-6)


def dense_adam_rows(param, m, v, dense_g, rows, lr, b1, b2, eps, t, wd):
    """Textbook dense Adam (float64), then only `rows` are kept."""
    w, m2, v2 = (a.astype(np.float64) for a in (param, m, v))
    g = dense_g + wd * w
    m_new = b1 * m2 + (1 - b1) * g
    v_new = b2 * v2 + (1 - b2) * g * g
    w_new = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m_new / (np.sqrt(v_new) + eps)
    for old, new in ((w, w_new), (m2, m_new), (v2, v_new)):
        old[rows] = new[rows]
    return w, m2, v2


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lazy_adam_equals_dense_adam_on_touched_rows(impl, dtype, weight_decay):
    param, ids, grads = sparse_problem(dtype, 21)
    r = rng(22)
    m = r.standard_normal(param.shape).astype(dtype) * 0.1
    v = np.abs(r.standard_normal(param.shape)).astype(dtype) * 0.1
    args = (0.01, 0.9, 0.999, 1e-8, 3, weight_decay)
    want = dense_adam_rows(param, m, v, dense_grad(param.shape, ids, grads.astype(np.float64)),
                           np.unique(ids), *args)
    impl.lazy_adam(param, m, v, ids, grads, *args)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, expected in zip((param, m, v), want):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def test_lazy_adam_matches_torch_sparse_adam(impl):
    torch = pytest.importorskip("torch")
    param, _, _ = sparse_problem(np.float64, 23, rows=10, width=3)
    m, v = np.zeros_like(param), np.zeros_like(param)
    weight = torch.nn.Parameter(torch.tensor(param))
    opt = torch.optim.SparseAdam([weight], lr=0.05, betas=(0.8, 0.99), eps=1e-6)
    for step in range(1, 4):
        ids = rng(30 + step).integers(0, 10, 6)
        grads = rng(40 + step).standard_normal((6, 3))
        impl.lazy_adam(param, m, v, ids, grads, 0.05, 0.8, 0.99, 1e-6, step)
        weight.grad = torch.sparse_coo_tensor(torch.tensor(ids)[None], torch.tensor(grads), (10, 3),
                                              check_invariants=True)
        opt.step()
    np.testing.assert_allclose(param, weight.detach().numpy(), rtol=1e-10, atol=1e-12)


def naive_ftrl(w, acc, lin, ids, grads, lr, l1, l2, lr_power):
    """Element by element, TensorFlow's ApplyFtrl on the merged gradient (float64)."""
    w, acc, lin = (a.astype(np.float64) for a in (w, acc, lin))
    g = dense_grad(w.shape, ids, grads.astype(np.float64))
    for r in np.unique(ids):
        for j in range(w.shape[1]):
            new_acc = acc[r, j] + g[r, j] ** 2
            sigma = (new_acc ** -lr_power - acc[r, j] ** -lr_power) / lr
            lin[r, j] += g[r, j] - sigma * w[r, j]
            quadratic = new_acc ** -lr_power / lr + 2 * l2
            z = lin[r, j]
            w[r, j] = (np.sign(z) * l1 - z) / quadratic if abs(z) > l1 else 0.0
            acc[r, j] = new_acc
    return w, acc, lin


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lr_power, l1", [(-0.5, 0.05), (-0.25, 0.0), (-0.5, 100.0)])
def test_ftrl_matches_elementwise_formula(impl, dtype, lr_power, l1):
    param, ids, grads = sparse_problem(dtype, 24)
    accum = np.full(param.shape, 0.1, dtype)
    linear = (rng(25).standard_normal(param.shape) * 0.1).astype(dtype)
    want = naive_ftrl(param, accum, linear, ids, grads, 0.3, l1, 0.01, lr_power)
    impl.ftrl(param, accum, linear, ids, grads, 0.3, l1, 0.01, lr_power)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for got, expected in zip((param, accum, linear), want):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    if l1 == 100.0:
        assert not param[np.unique(ids)].any(), "a huge l1 zeroes every touched weight"


@pytest.mark.parametrize("dtype", FLOATS)
def test_cpp_optimizers_equal_reference_on_strided_state(cpp, dtype):
    param, ids, grads = sparse_problem(dtype, 26, rows=30, width=6, n=40)
    state = [np.abs(rng(27 + k).standard_normal((30, 12))).astype(dtype) for k in range(2)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    runs = {}
    for name, module in (("cpp", cpp), ("ref", ref)):
        p, (s1, s2) = param.copy(), [s.copy() for s in state]
        module.lazy_adam(p, s1[:, ::2], s2[:, ::2], ids.astype(np.int32), grads, 0.01, 0.9, 0.99,
                         1e-7, 2, 0.001)
        module.ftrl(p, s1[:, 1::2], s2[:, 1::2], ids, grads, 0.1, 0.01, 0.02)
        module.sparse_sgd(p, ids, grads, 0.1, 0.01)
        runs[name] = (p, s1, s2)
    for got, expected in zip(runs["cpp"], runs["ref"]):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def test_optimizer_bad_arguments(impl):
    param, ids, grads = sparse_problem(np.float32, 28)
    m, v = np.zeros_like(param), np.zeros_like(param)
    with pytest.raises(ValueError, match="step must be an integer >= 1"):
        impl.lazy_adam(param, m, v, ids, grads, 0.1, 0.9, 0.99, 1e-8, 0)
    with pytest.raises(ValueError, match=r"v must match param: shape \(12, 4\)"):
        impl.lazy_adam(param, m, v[:5], ids, grads, 0.1, 0.9, 0.99, 1e-8, 1)
    with pytest.raises(TypeError, match="grads must have param's dtype float32, got float64"):
        impl.sparse_sgd(param, ids, grads.astype(np.float64), 0.1)
    with pytest.raises(ValueError, match=r"grads must have shape \(9, 4\)"):
        impl.sparse_sgd(param, ids, grads[:, :3], 0.1)
    with pytest.raises(ValueError, match="lr must be > 0"):
        impl.ftrl(param, m, v, ids, grads, 0.0, 0.0, 0.0)


# --- large merges: radix sort, balanced thread blocks ---------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_cpp_unique_merge_radix_path_equals_twin_bit_for_bit(cpp, dtype, id_dtype):
    """From 2048 ids on, the C++ merge sorts by a radix sort on the bits of the id range; the
    duplicates must still be summed in input order, exactly as the twin's np.add.at."""
    r = rng(50)
    cases = [r.integers(0, 50, 5000),                                  # 6 bits, many duplicates
             r.integers(np.iinfo(id_dtype).min, np.iinfo(id_dtype).max, 4000, dtype=id_dtype,
                        endpoint=True),                                # full width, negatives
             np.full(3000, -7),                                        # one id: nothing to sort
             (r.zipf(1.1, 6000) - 1) % 10_000_000,                     # a hot id, 24 bits
             np.arange(2500)[::-1]]                                    # distinct, descending
    for ids in cases:
        ids = ids.astype(id_dtype)
        values = r.standard_normal((ids.size, 3)).astype(dtype)
        got_ids, got_values = cpp.unique_merge(ids, values)
        want_ids, want_values = ref.unique_merge(ids, values)
        np.testing.assert_array_equal(got_ids, want_ids)
        np.testing.assert_array_equal(got_values, want_values)


def test_lazy_adam_with_a_hot_id_is_bit_identical_across_threads_and_equals_twin(cpp):
    """Zipf ids: one id holds a tenth of the batch. The thread blocks balance rows and ids, and
    whatever the split, every row's result is the same bits (and the twin's)."""
    r = rng(51)
    rows, width = 20_000, 64
    ids = (r.zipf(1.1, 60_000) - 1) % rows
    grads = r.standard_normal((ids.size, width)).astype(np.float32)
    start = [r.standard_normal((rows, width)).astype(np.float32) * 0.01,
             np.abs(r.standard_normal((rows, width))).astype(np.float32) * 0.01,
             np.abs(r.standard_normal((rows, width))).astype(np.float32) * 0.01]
    results = []
    try:
        for threads in (1, 2, 3, 0):
            cpp.set_sparse_threads(threads)
            w, m, v = (a.copy() for a in start)
            cpp.lazy_adam(w, m, v, ids, grads, 0.01, 0.9, 0.999, 1e-8, 3, 0.001)
            results.append((w, m, v))
    finally:
        cpp.set_sparse_threads(0)
    w, m, v = (a.copy() for a in start)
    ref.lazy_adam(w, m, v, ids, grads, 0.01, 0.9, 0.999, 1e-8, 3, 0.001)
    for other in results[1:] + [(w, m, v)]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
