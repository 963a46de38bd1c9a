"""float16 compute on the host: float32 accumulation, one rounding to float16 (issue 18, item 1).

Every product (MatMul, BatchMatMul, Conv2D, Dense; forward and both backward products) must
equal its float32-accumulated reference rounded once to float16, bit for bit, and agree with
PyTorch's CPU float16 within float16 rounding. Elementwise float16 work (ReLU, max pooling)
stays float16 and matches NumPy's float16 results.
"""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.backend import half

F16 = np.float16


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == np.float16 and b.dtype == np.float16, (a.dtype, b.dtype)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def _ref(a, b):
    """float32 accumulation of float16 operands, rounded once."""
    return half.reference_matmul(a, b)


def _bits_equal_either(a, ref, ref_transposed_product):
    """Each element equals the once-rounded float32 product computed as ``ref`` or as the
    transpose of the transposed product. Both are float32 accumulation rounded once; they may
    differ in the last bit because BLAS sums ``X @ Y`` and ``(Y^T @ X^T)^T`` in different
    orders on some processors (seen on an AMD EPYC with OpenBLAS 0.3.31), and the gradient of
    a transposed operand is naturally computed in the second orientation."""
    a, r1, r2 = (np.asarray(x).view(np.uint16) for x in (a, ref, ref_transposed_product))
    assert a.shape == r1.shape == r2.shape
    bad = (a != r1) & (a != r2)
    assert not bad.any(), f"{int(bad.sum())} elements match neither once-rounded product"


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_forward_and_backward_equal_reference_bits(rng, ta, tb):
    m, k, n = 37, 300, 29
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(F16)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(F16)
    g = rng.standard_normal((m, n)).astype(F16)
    ta_, tb_ = ms.Tensor(a, requires_grad=True), ms.Tensor(b, requires_grad=True)
    out = ops.MatMul(transpose_a=ta, transpose_b=tb)(ta_, tb_)
    out.backward(ms.Tensor(g))
    A, B = (a.T if ta else a), (b.T if tb else b)
    _bits_equal(out.asnumpy(), _ref(A, B))
    ga, gb = _ref(g, B.T), _ref(A.T, g)          # dA' = G B'^T, dB' = A'^T G
    ga_t, gb_t = _ref(B, g.T).T, _ref(g.T, A).T  # the same products, transposed orientation
    _bits_equal_either(ta_.grad.asnumpy(), ga.T if ta else ga, ga_t.T if ta else ga_t)
    _bits_equal_either(tb_.grad.asnumpy(), gb.T if tb else gb, gb_t.T if tb else gb_t)


def test_float32_accumulation_not_float16(rng):
    # 4096 ones: a float16 accumulator stalls at 2048, float32 reaches 4096 exactly
    a = ms.Tensor(np.ones((2, 4096), F16))
    b = ms.Tensor(np.ones((4096, 3), F16))
    out = ops.MatMul()(a, b)
    assert out.dtype == ms.float16
    assert np.all(out.asnumpy() == 4096)


def test_result_rounds_once(rng):
    # a sum whose float32 value lies just above a float16 halfway point: rounding once
    # gives the upper neighbour; rounding partial sums to float16 would not
    a = np.array([[1.0, 2.0 ** -11, 2.0 ** -20]], F16)
    b = np.ones((3, 1), F16)
    out = ops.MatMul()(ms.Tensor(a), ms.Tensor(b)).asnumpy()
    assert out[0, 0] == F16(1.0 + 2.0 ** -10)
    assert np.float32(a.astype(np.float32).sum()).astype(F16) == out[0, 0]


def test_batch_matmul_bits(rng):
    a = rng.standard_normal((3, 5, 40)).astype(F16)
    b = rng.standard_normal((3, 40, 6)).astype(F16)
    g = rng.standard_normal((3, 5, 6)).astype(F16)
    ta_, tb_ = ms.Tensor(a, requires_grad=True), ms.Tensor(b, requires_grad=True)
    out = ops.BatchMatMul()(ta_, tb_)
    out.backward(ms.Tensor(g))
    _bits_equal(out.asnumpy(), _ref(a, b))
    _bits_equal(ta_.grad.asnumpy(), _ref(g, b.transpose(0, 2, 1)))
    _bits_equal(tb_.grad.asnumpy(), _ref(a.transpose(0, 2, 1), g))


def test_mixed_dtypes_take_the_float32_path(rng):
    a = ms.Tensor(rng.standard_normal((4, 8)).astype(F16))
    b = ms.Tensor(rng.standard_normal((8, 3)).astype(np.float32))
    assert ops.MatMul()(a, b).dtype == ms.float32


def test_dense_float16_matches_reference(rng):
    fc = nn.Dense(64, 16, dtype=ms.float16)
    x = rng.standard_normal((10, 64)).astype(F16)
    w = fc.weight.asnumpy()
    bias = fc.bias.asnumpy()
    out = fc(ms.Tensor(x)).asnumpy()
    assert out.dtype == np.float16
    # the product is rounded once, then the float16 bias add rounds once more
    expected = (_ref(x, w.T).astype(np.float32) + bias.astype(np.float32)).astype(F16)
    _bits_equal(out, expected)


def _conv_reference(x, w, bias, stride, pad):
    """float32 convolution by explicit patches and one float32 product, rounded once."""
    x32 = np.pad(x.astype(np.float32), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x32.shape
    oc, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    cols = np.empty((n, oh, ow, c, kh, kw), np.float32)
    for i in range(oh):
        for j in range(ow):
            cols[:, i, j] = x32[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
    out = cols.reshape(n * oh * ow, -1) @ w.astype(np.float32).reshape(oc, -1).T
    if bias is not None:
        out += bias.astype(np.float32)
    return out.reshape(n, oh, ow, oc).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("channels,stride,pad", [(1, 1, 0), (16, 1, 1), (8, 2, 1)])
def test_conv2d_float16_close_to_float32_reference_and_torch(rng, channels, stride, pad):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, channels, 9, 9)).astype(F16)
    w = (rng.standard_normal((6, channels, 3, 3)) * 0.3).astype(F16)
    b = rng.standard_normal(6).astype(F16)
    g = rng.standard_normal((2, 6) + ((9 + 2 * pad - 3) // stride + 1,) * 2).astype(F16)
    xt, wt, bt = (ms.Tensor(v, requires_grad=True) for v in (x, w, b))
    out = ops.conv2d(xt, wt, bt, stride=stride, padding=pad)
    out.backward(ms.Tensor(g))
    assert out.dtype == ms.float16 and xt.grad.dtype == ms.float16 and wt.grad.dtype == ms.float16
    ref = _conv_reference(x, w, b, stride, pad)
    # one rounding of a float32 result: at most half an ulp of float16 away from it
    # (the float32 summation order differs from the reference's, hence not bit-equal)
    np.testing.assert_allclose(out.asnumpy().astype(np.float32), ref, rtol=2 ** -10, atol=1e-3)
    tx, tw, tb = (torch.tensor(v.astype(np.float32), requires_grad=True) for v in (x, w, b))
    to = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=pad)
    to.backward(torch.tensor(g.astype(np.float32)))
    for mine, theirs in ((out, to), (xt.grad, tx.grad), (wt.grad, tw.grad), (bt.grad, tb.grad)):
        theirs = theirs.detach().numpy()
        np.testing.assert_allclose(mine.asnumpy().astype(np.float32), theirs,
                                   rtol=2 ** -10, atol=2e-3 * np.abs(theirs).max())


def test_conv2d_float16_equals_float32_path_rounded(rng):
    # the float16 path runs the float32 kernels on widened inputs: same bits as running
    # the float32 primitive on the widened inputs and rounding each result once
    x = rng.standard_normal((4, 12, 10, 10)).astype(F16)
    w = (rng.standard_normal((8, 12, 3, 3)) * 0.2).astype(F16)
    g = rng.standard_normal((4, 8, 10, 10)).astype(F16)
    results = []
    for dtype in (F16, np.float32):
        xt = ms.Tensor(x.astype(dtype), requires_grad=True)
        wt = ms.Tensor(w.astype(dtype), requires_grad=True)
        out = ops.conv2d(xt, wt, padding=1)
        out.backward(ms.Tensor(g.astype(dtype)))
        results.append([out.asnumpy(), xt.grad.asnumpy(), wt.grad.asnumpy()])
    for r16, r32 in zip(*results):
        _bits_equal(r16, r32.astype(F16))


def test_relu_and_maxpool_float16_match_numpy(rng):
    x = rng.standard_normal((2, 3, 8, 8)).astype(F16)
    x[0, 0, 0, :3] = [0.0, -0.0, F16(-6e-8)]
    g = rng.standard_normal((2, 3, 4, 4)).astype(F16)
    xt = ms.Tensor(x, requires_grad=True)
    y = ops.ReLU()(xt)
    p = ops.MaxPool(kernel_size=2, strides=2)(y)
    p.backward(ms.Tensor(g))
    relu = np.maximum(x, F16(0))
    np.testing.assert_array_equal(y.asnumpy(), relu)
    assert y.dtype == ms.float16 and p.dtype == ms.float16 and xt.grad.dtype == ms.float16
    pooled = relu.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(p.asnumpy(), pooled)
    # the float32 path on the same values gives the same gradient values
    xt32 = ms.Tensor(x.astype(np.float32), requires_grad=True)
    p32 = ops.MaxPool(kernel_size=2, strides=2)(ops.ReLU()(xt32))
    p32.backward(ms.Tensor(g.astype(np.float32)))
    np.testing.assert_array_equal(xt.grad.asnumpy(), xt32.grad.asnumpy().astype(F16))


def test_relu_backward_float16_masks_exactly(rng):
    x = rng.standard_normal((1000,)).astype(F16)
    g = rng.standard_normal((1000,)).astype(F16)
    xt = ms.Tensor(x, requires_grad=True)
    ops.ReLU()(xt).backward(ms.Tensor(g))
    np.testing.assert_array_equal(xt.grad.asnumpy(), np.where(x > 0, g, F16(0)))


def test_widen_narrow_keep_layout_and_bits(rng):
    x = rng.standard_normal((3, 5, 6, 7)).astype(np.float32).transpose(0, 3, 1, 2)
    x = np.ascontiguousarray(np.broadcast_to(x, x.shape))  # plain C order
    for a in (x, x.transpose(0, 2, 3, 1), x[:, ::2]):
        h = half.narrow(a)
        _bits_equal(h, a.astype(F16))
        w = half.widen(h)
        assert w.dtype == np.float32
        np.testing.assert_array_equal(w, h.astype(np.float32))
    big = rng.standard_normal((64, 80, 9)).astype(np.float32).transpose(2, 0, 1)  # kernel path
    _bits_equal(half.narrow(big), big.astype(F16))
    assert half.narrow(big).strides == big.astype(F16).strides


def test_loss_scaling_with_float16_matmul(rng):
    # the gradient of scale * loss, divided by scale, equals the unscaled gradient where no
    # value over- or underflows (scales are powers of two: the division is exact)
    x = rng.standard_normal((16, 32)).astype(F16)
    w = (rng.standard_normal((32, 4)) * 0.1).astype(F16)
    grads = []
    for scale in (1.0, 1024.0):
        wt = ms.Tensor(w, requires_grad=True)
        out = ops.MatMul()(ms.Tensor(x), wt)
        (out.sum() * scale).backward()
        grads.append(wt.grad.asnumpy().astype(np.float32) / scale)
    np.testing.assert_array_equal(grads[0], grads[1])


def test_run_in_float32_rounds_once_and_writes_back_only_what_it_is_told():
    p = np.array([1.0, 2.0, -3.0], F16)
    g = np.array([0.1, 0.2, 0.3], F16)
    buf = np.array([0.5, 0.5, 0.5], F16)
    p0, g0 = p.copy(), g.copy()

    def step(p32, g32, b32):
        assert p32.dtype == np.float32 and g32.dtype == np.float32
        b32 *= 0.9
        b32 += g32
        p32 -= 0.01 * b32
        g32[...] = 0          # not written back: positions 0 and 2 only

    half.run_in_float32(step, p, g, buf, write_back=(0, 2))
    np.testing.assert_array_equal(g, g0)
    b_ref = np.float32(0.5) * np.float32(0.9) + g0.astype(np.float32)
    np.testing.assert_array_equal(buf, b_ref.astype(F16))
    np.testing.assert_array_equal(p, (p0.astype(np.float32) - np.float32(0.01) * b_ref).astype(F16))
    # float32 arrays pass through untouched and are updated in place
    q = np.ones(3, np.float32)
    half.run_in_float32(lambda a: a.__imul__(2), q)
    np.testing.assert_array_equal(q, 2 * np.ones(3, np.float32))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_on_float16_parameters_updates_in_float32_and_rounds_once(momentum):
    """The update of a float16 parameter (and its momentum) is computed in float32 and
    rounded once: equal to a float32 twin of the step rounded to float16."""
    import minitorch_dist as ms
    from minitorch_dist import nn
    rng = np.random.default_rng(0)
    p16 = rng.standard_normal(64).astype(np.float16)
    grads = [rng.standard_normal(64).astype(np.float16) for _ in range(3)]
    param = ms.Parameter(ms.Tensor(p16.copy()), "w")
    opt = nn.SGD([param], 0.1, momentum=momentum)
    want, buf = p16.astype(np.float32), np.zeros(64, np.float32)
    for step, g in enumerate(grads):
        opt((ms.Tensor(g),))
        g32 = g.astype(np.float32)
        if momentum:
            buf = g32 if step == 0 else (buf * np.float32(momentum) + g32)
            want = (want - np.float32(0.1) * buf).astype(np.float16).astype(np.float32)
            buf = buf.astype(np.float16).astype(np.float32)
        else:
            want = (want - np.float32(0.1) * g32).astype(np.float16).astype(np.float32)
    assert param.dtype == np.float16
    np.testing.assert_array_equal(param.asnumpy(), want.astype(np.float16))


def test_cast_to_and_from_float16_equals_astype_bits_and_its_gradient(rng):
    """ops.Cast and the engine's cast of a gradient go through the F16C kernels (NumPy's
    own conversion loop made Wide&Deep's float16 layers cost seconds a step): same bits as
    astype, including rounding ties, overflow to inf, subnormals and NaN."""
    x = rng.standard_normal((64, 129)).astype(np.float32) * 1000
    x[0, :6] = [65520.0, 1e-8, -0.0, np.inf, np.nan, 1.0 + 2.0 ** -11]
    strided = x[:, ::2]                                   # not contiguous
    for a in (x, strided):
        h = ops.Cast()(ms.Tensor(a), ms.float16).asnumpy()
        with np.errstate(over="ignore"):
            expected = a.astype(np.float16)
        np.testing.assert_array_equal(h.view(np.uint16), expected.view(np.uint16))
        back = ops.Cast()(ms.Tensor(h), ms.float32).asnumpy()
        np.testing.assert_array_equal(back, h.astype(np.float32))
    t = ms.Tensor(x[1:])
    t.requires_grad = True
    y = ops.Cast()(t, ms.float16)
    y.backward(ms.Tensor(np.full(y.shape, 0.1, np.float16)))
    assert t.grad.dtype == np.float32
    np.testing.assert_array_equal(t.grad.asnumpy(), np.float16(0.1).astype(np.float32))
    assert half.convert(x, np.float64).dtype == np.float64        # other pairs: astype


def test_float16_elementwise_keeps_numpy_bits_through_float32(rng):
    """Add, Mul, BiasAdd (and the MPI float16 sum op) compute float16 on float32 copies,
    rounding once: NumPy's own float16 results, bit for bit, without its slow loop. The
    bias gradient's reduction accumulates in float32."""
    x = (rng.standard_normal((64, 128)) * 300).astype(F16)
    y = (rng.standard_normal((64, 128)) * 3).astype(F16)
    b = rng.standard_normal(128).astype(F16)
    with np.errstate(over="ignore"):
        for op, other, ref in ((ops.Add(), y, x + y), (ops.Mul(), y, x * y),
                               (ops.BiasAdd(), b, x + b)):
            _bits_equal(op(ms.Tensor(x), ms.Tensor(other)).asnumpy(), ref)
    t = ms.Tensor(x, requires_grad=True)
    bias = ms.Tensor(b, requires_grad=True)
    ops.BiasAdd()(t, bias).backward(ms.Tensor(y))
    _bits_equal(bias.grad.asnumpy(), y.astype(np.float32).sum(axis=0).astype(F16))
    assert half.elementwise(np.add, x[:2, :2], y[:2, :2]).dtype == F16     # small: plain NumPy
