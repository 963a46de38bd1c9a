"""Winograd F(2x2, 3x3) convolution and the channels-last conv kernels (issue 18, item 2).

The C++ transforms equal their NumPy twins bit for bit; Conv2D's Winograd path (forward,
input and weight gradients) agrees with a float64 reference, with the im2col path and with
PyTorch to float32 rounding; the channels-last im2col/col2im kernels equal their twins.
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import kernels, ops
from minitorch_dist.kernels import reference
from minitorch_dist.ops import conv as conv_module

needs_cpp = pytest.mark.skipif(not kernels.HAVE_CPP, reason="C++ kernels not built")


@pytest.fixture
def rng():
    return np.random.default_rng(11)


@needs_cpp
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,h,w,c,pad", [(2, 7, 9, 3, 1), (1, 8, 8, 16, 0), (3, 6, 5, 5, 2),
                                         (2, 32, 32, 64, 1)])
def test_transforms_equal_numpy_twins_bitwise(rng, dtype, n, h, w, c, pad):
    from minitorch_dist.kernels import native
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = -(-oh // 2), -(-ow // 2)
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    np.testing.assert_array_equal(native.winograd_input(x, th, tw, pad),
                                  reference.winograd_input(x, th, tw, pad))
    m = rng.standard_normal((16, n * th * tw, c)).astype(dtype)
    np.testing.assert_array_equal(native.winograd_output(m, (n, oh, ow, c), th, tw),
                                  reference.winograd_output(m, (n, oh, ow, c), th, tw))
    g = rng.standard_normal((n, oh, ow, c)).astype(dtype)
    np.testing.assert_array_equal(native.winograd_grad(g, th, tw),
                                  reference.winograd_grad(g, th, tw))


@needs_cpp
def test_transform_argument_errors(rng):
    from minitorch_dist.kernels import native
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="cover"):
        native.winograd_output(np.zeros((16, 1, 2), np.float32), (1, 3, 3, 2), 1, 1)
    with pytest.raises(ValueError, match="shape"):
        native.winograd_input(x, 2, 2, 1, out=np.zeros((16, 3, 2), np.float32))
    with pytest.raises(TypeError):
        native.winograd_input(x.astype(np.int32), 2, 2, 1)


@needs_cpp
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("params", [(3, 3, 1, 1, 1, 1, 1, 1), (3, 3, 2, 2, 1, 1, 1, 1),
                                    (2, 3, 2, 1, 0, 2, 2, 1), (1, 1, 1, 1, 0, 0, 1, 1),
                                    (3, 3, 1, 2, 2, 1, 2, 2)])
def test_nhwc_im2col_col2im_equal_twins(rng, dtype, params):
    from minitorch_dist.kernels import native
    shape = (2, 9, 10, 6)
    x = rng.standard_normal(shape).astype(dtype)
    cols = native.im2col_nhwc(x, *params)
    np.testing.assert_array_equal(cols, reference.im2col_nhwc(x, *params))
    # same patches as the NCHW kernel, columns reordered (c, i, j) -> (i, j, c)
    nchw = reference.im2col(x.transpose(0, 3, 1, 2), *params)
    kh, kw = params[:2]
    np.testing.assert_array_equal(
        cols, nchw.reshape(-1, shape[3], kh, kw).transpose(0, 2, 3, 1).reshape(cols.shape))
    d = rng.standard_normal(cols.shape).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(native.col2im_nhwc(d, shape, *params),
                               reference.col2im_nhwc(d, shape, *params), rtol=tol, atol=tol)
    # col2im is im2col's adjoint: <im2col(x), d> = <x, col2im(d)>
    lhs = float((cols.astype(np.float64) * d).sum())
    rhs = float((x.astype(np.float64) * native.col2im_nhwc(d, shape, *params)).sum())
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))


def _conv_f64(x, w, pad):
    """Direct float64 convolution (NCHW), its reference."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    oh, ow = h - 2, wd - 2
    out = np.zeros((n, w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


def _run(x, w, b, pad, grad, algorithm, monkeypatch, calls=None):
    monkeypatch.setattr(conv_module, "ALGORITHM", algorithm)
    monkeypatch.setattr(conv_module, "_WINOGRAD_MIN_PIXELS", 0)   # small test shapes too
    if calls is not None:     # count the Winograd forwards (input_grad runs one too)
        from minitorch_dist.kernels import winograd
        real = winograd.forward
        monkeypatch.setattr(winograd, "forward",
                            lambda *a, **k: calls.append(1) or real(*a, **k))
    xt, wt, bt = (ms.Tensor(v, requires_grad=True) for v in (x, w, b))
    op = ops.Conv2D(out_channel=w.shape[0], kernel_size=3, pad_mode="pad", pad=pad)
    out = op(xt, wt, bt)
    out.backward(ms.Tensor(grad))
    return [t.asnumpy() for t in (out, xt.grad, wt.grad, bt.grad)], out


@needs_cpp
@pytest.mark.parametrize("shape,pad", [((4, 16, 12, 12), 1), ((2, 32, 9, 7), 1),
                                       ((3, 16, 8, 10), 0), ((2, 16, 7, 7), 2)])
def test_winograd_conv_matches_float64_and_im2col(rng, monkeypatch, shape, pad):
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((24, shape[1], 3, 3)) / np.sqrt(9 * shape[1])).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    oh, ow = shape[2] + 2 * pad - 2, shape[3] + 2 * pad - 2
    g = rng.standard_normal((shape[0], 24, oh, ow)).astype(np.float32)
    calls = []
    wino, out = _run(x, w, b, pad, g, "auto", monkeypatch, calls)
    assert len(calls) == 2          # the Winograd path really ran: forward and input gradient
    im2col, _ = _run(x, w, b, pad, g, "im2col", monkeypatch, calls)
    assert len(calls) == 2          # ... and the "im2col" setting turns it off
    ref_out = _conv_f64(x, w.astype(np.float64), pad) + b[:, None, None]
    for mine, theirs in zip(wino, im2col):
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=2e-5 * scale)
    scale = np.abs(ref_out).max()
    np.testing.assert_allclose(wino[0], ref_out, rtol=0, atol=2e-6 * scale * 4)


@needs_cpp
def test_winograd_path_is_taken_and_differs_from_im2col_only_in_rounding(rng, monkeypatch):
    x = rng.standard_normal((2, 16, 10, 10)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    b = np.zeros(16, np.float32)
    g = np.ones((2, 16, 10, 10), np.float32)
    wino, _ = _run(x, w, b, 1, g, "auto", monkeypatch)
    im2col, _ = _run(x, w, b, 1, g, "im2col", monkeypatch)
    # a different algorithm rounds differently: not all bits equal (so the test above
    # compares two paths, not one path twice), but every value agrees to float32 rounding
    assert not np.array_equal(wino[0], im2col[0])
    np.testing.assert_allclose(wino[0], im2col[0], rtol=1e-4, atol=1e-4)


@needs_cpp
def test_winograd_against_torch(rng, monkeypatch):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((4, 32, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.06).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    g = rng.standard_normal((4, 32, 16, 16)).astype(np.float32)
    mine, _ = _run(x, w, b, 1, g, "auto", monkeypatch)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    to = torch.nn.functional.conv2d(tx, tw, tb, padding=1)
    to.backward(torch.tensor(g))
    for a, t in zip(mine, (to, tx.grad, tw.grad, tb.grad)):
        t = t.detach().numpy()
        np.testing.assert_allclose(a, t, rtol=0, atol=3e-5 * np.abs(t).max())


@needs_cpp
def test_winograd_float16_rounds_once(rng, monkeypatch):
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float16)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float16)
    b = np.zeros(16, np.float16)
    g = rng.standard_normal((2, 16, 8, 8)).astype(np.float16)
    half_run, out = _run(x, w, b, 1, g, "auto", monkeypatch)
    assert out.dtype == ms.float16
    f32_run, _ = _run(*(v.astype(np.float32) for v in (x, w, b)), 1, g.astype(np.float32),
                      "auto", monkeypatch)
    for h, f in zip(half_run, f32_run):
        assert h.dtype == np.float16
        np.testing.assert_array_equal(h, f.astype(np.float16))


def test_small_or_strided_convolutions_keep_im2col(rng):
    prim = ops.Conv2D(out_channel=16, kernel_size=3, pad_mode="pad", pad=1, stride=2)
    x = np.zeros((1, 16, 8, 8), np.float32)
    w = np.zeros((16, 16, 3, 3), np.float32)
    geo = conv_module._Geometry(8, 8, (3, 3), prim.stride, prim.dilation, "pad", prim.pads)
    assert not conv_module._winograd_applies(np, x, w, geo, prim)
    few = np.zeros((1, 3, 8, 8), np.float32)
    geo1 = conv_module._Geometry(8, 8, (3, 3), (1, 1), (1, 1), "pad", (1, 1, 1, 1))
    prim1 = ops.Conv2D(out_channel=16, kernel_size=3, pad_mode="pad", pad=1)
    assert not conv_module._winograd_applies(np, few, w[:, :3], geo1, prim1)
    assert not conv_module._winograd_applies(np, x, w, geo1, prim1)      # 64 pixels: too few
    big = np.zeros((16, 16, 8, 8), np.float32)                             # 1024 pixels
    assert conv_module._winograd_applies(np, big, w, geo1, prim1) == kernels.HAVE_CPP


@needs_cpp
def test_winograd_bits_do_not_depend_on_the_thread_count(rng, monkeypatch):
    from minitorch_dist.backend import threads
    from minitorch_dist.kernels import winograd
    monkeypatch.setattr(winograd, "TILES_PER_BLOCK", 64)      # several blocks to spread
    x = rng.standard_normal((6, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((20, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    g = rng.standard_normal((6, 20, 12, 12)).astype(np.float32)
    runs = []
    try:
        for count in (1, 2, 3):
            threads.set_num_threads(count)
            runs.append(_run(x, w, b, 1, g, "auto", monkeypatch)[0])
    finally:
        threads.set_num_threads(None)
    for other in runs[1:]:
        for a, c in zip(runs[0], other):
            np.testing.assert_array_equal(a, c)


def test_parallel_items_covers_every_item_once_and_restores_threads():
    from minitorch_dist.backend import threads
    seen = []
    try:
        threads.set_num_threads(3)
        threads.parallel_items(10, lambda i, w: seen.append((i, w)))
        assert sorted(i for i, _ in seen) == list(range(10))
        assert {w for _, w in seen} == {0, 1, 2}
        assert threads.get_num_threads() == 3
        if threads.blas_info()["name"] is not None:
            assert threads.blas_info()["threads"] == 3
    finally:
        threads.set_num_threads(None)
