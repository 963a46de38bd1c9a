"""Conv2D / conv2d: forward against a naive loop, gradients by central differences, PyTorch."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops
from minitorch_dist.ops import conv as conv_module
from minitorch_dist.testing.gradcheck import check_gradients


def reference_conv(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """Direct float64 cross-correlation, one output element at a time."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    w = np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    per_group = oc // groups
    for b_ in range(n):
        for o in range(oc):
            g = o // per_group
            for i in range(oh):
                for j in range(ow):
                    total = 0.0
                    for ci in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                total += (x[b_, g * cg + ci, i * sh + p * dh, j * sw + q * dw]
                                          * w[o, ci, p, q])
                    out[b_, o, i, j] = total + (0.0 if b is None else b[o])
    return out


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = [
    # (x shape, weight shape, stride, pads (t, b, l, r), dilation, groups)
    ((2, 3, 6, 5), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2, 7, 8), (3, 2, 3, 2), (2, 1), (1, 1, 0, 0), (1, 1), 1),
    ((1, 3, 9, 9), (2, 3, 3, 3), (2, 2), (2, 1, 1, 2), (2, 1), 1),
    ((2, 4, 6, 6), (6, 2, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 2),
    ((2, 4, 5, 5), (4, 1, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 4),   # depthwise
    ((2, 12, 4, 4), (5, 12, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # many channels
    ((1, 8, 5, 6), (4, 4, 3, 3), (1, 2), (1, 2, 1, 0), (1, 1), 2),    # many channels, groups
]


@pytest.mark.parametrize("use_kernels", [True, False], ids=["host-kernels", "xp-only"])
@pytest.mark.parametrize("xs, ws, stride, pads, dilation, groups", CASES)
def test_forward_matches_naive_loops(xs, ws, stride, pads, dilation, groups, use_kernels, monkeypatch):
    if not use_kernels:   # the path CuPy takes, run on NumPy
        monkeypatch.setattr(conv_module, "_KERNELS", None)
    x, w, b = rand(*xs, seed=1), rand(*ws, seed=2), rand(ws[0], seed=3)
    op = ops.Conv2D(ws[0], ws[2:], pad_mode="pad", pad=pads, stride=stride, dilation=dilation,
                    group=groups)
    got = op(Tensor(x), Tensor(w), Tensor(b)).asnumpy()
    np.testing.assert_allclose(got, reference_conv(x, w, b, stride, pads, dilation, groups),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("use_kernels", [True, False], ids=["host-kernels", "xp-only"])
@pytest.mark.parametrize("xs, ws, stride, pads, dilation, groups", CASES)
def test_gradients_match_central_differences(xs, ws, stride, pads, dilation, groups, use_kernels,
                                             monkeypatch):
    if not use_kernels:
        monkeypatch.setattr(conv_module, "_KERNELS", None)
    op = ops.Conv2D(ws[0], ws[2:], pad_mode="pad", pad=pads, stride=stride, dilation=dilation,
                    group=groups)
    check_gradients(lambda x, w, b: op(x, w, b), rand(*xs, seed=4), rand(*ws, seed=5),
                    rand(ws[0], seed=6))


def test_same_padding_puts_the_odd_pixel_after():
    x, w = rand(1, 2, 7, 6, seed=7), rand(3, 2, 4, 3, seed=8)
    out = ops.Conv2D(3, (4, 3), pad_mode="same", stride=2)(Tensor(x), Tensor(w)).asnumpy()
    assert out.shape == (1, 3, 4, 3)    # ceil(7/2), ceil(6/2)
    # rows: total pad (4-1)*2+4-7 = 3 -> top 1, bottom 2; cols: (3-1)*2+3-6 = 1 -> left 0, right 1
    np.testing.assert_allclose(out, reference_conv(x, w, stride=(2, 2), pads=(1, 2, 0, 1)), atol=1e-12)
    check_gradients(lambda a, b: ops.Conv2D(3, (4, 3), pad_mode="same", stride=2)(a, b), x, w)


def test_valid_mode_and_float32_stay_float32():
    x = rand(2, 1, 28, 28).astype(np.float32)
    w = rand(20, 1, 5, 5, seed=1).astype(np.float32)
    out = ops.Conv2D(out_channel=20, kernel_size=5)(Tensor(x), Tensor(w))
    assert out.shape == (2, 20, 24, 24) and out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), reference_conv(x, w), rtol=1e-4, atol=1e-4)


def test_channels_last_and_strided_inputs_give_the_same_result():
    x, w = rand(2, 6, 5, 7, seed=9), rand(4, 6, 3, 3, seed=10)
    expected = reference_conv(x, w, pads=(1, 1, 1, 1))
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    strided = np.repeat(x, 2, axis=3)[:, :, :, ::2]
    for array in (channels_last, strided):
        xt = Tensor._make(array, ms.get_device("CPU"), requires_grad=True)
        out = ops.conv2d(xt, Tensor(w), padding=1)
        np.testing.assert_allclose(out.asnumpy(), expected, atol=1e-12)
        out.sum().backward()
        ones = np.ones_like(expected)
        xg = Tensor(x, requires_grad=True)
        ops.conv2d(xg, Tensor(w), padding=1).backward(Tensor(ones))
        np.testing.assert_allclose(xt.grad.asnumpy(), xg.grad.asnumpy(), atol=1e-12)


def test_first_layer_skips_the_input_gradient(monkeypatch):
    def fail(*args):
        raise AssertionError("col2im must not run when the input needs no gradient")
    monkeypatch.setattr(conv_module, "_col2im", fail)
    x = Tensor(rand(2, 1, 6, 6))
    w = Tensor(rand(3, 1, 3, 3, seed=1), requires_grad=True)
    ops.conv2d(x, w).sum().backward()
    assert w.grad is not None and x.grad is None


def test_device_fallback_col2im_matches_the_kernels(monkeypatch):
    """The xp loops used on CuPy, run on NumPy, agree with the host kernels."""
    x, w = rand(2, 3, 7, 6, seed=11), rand(4, 3, 3, 2, seed=12)
    op = ops.Conv2D(4, (3, 2), pad_mode="pad", pad=(2, 0, 1, 1), stride=(2, 1), dilation=(1, 2))
    grads = []
    for kernels in (conv_module._host_kernels(), None):
        monkeypatch.setattr(conv_module, "_KERNELS", kernels)
        xt = Tensor(x, requires_grad=True)
        out = op(xt, Tensor(w))
        assert out.shape == (2, 4, 4, 6)
        out.backward(Tensor(rand(*out.shape, seed=13)))
        grads.append(xt.grad.asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-12)
    check_gradients(lambda a, b: op(a, b), x, w)


def test_gradient_checker_catches_a_wrong_conv_gradient(monkeypatch):
    from minitorch_dist.testing.gradcheck import GradientCheckError
    real = ops.Conv2D.backward

    def off_by_a_bit(self, ctx, grad):
        gx, gw = real(self, ctx, grad)
        return gx, gw * 1.01
    monkeypatch.setattr(ops.Conv2D, "backward", off_by_a_bit)
    with pytest.raises(GradientCheckError, match="input 1"):
        check_gradients(lambda x, w: ops.conv2d(x, w), rand(1, 2, 4, 4), rand(2, 2, 2, 2, seed=1))


# ---- PyTorch ------------------------------------------------------------------------------

@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, (2, 1), 2, 1), (2, 0, 1, 2), (1, 1, 1, 2), (1, "same", 2, 1),
])
def test_matches_torch(stride, padding, dilation, groups):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, w, b = rand(3, 4, 9, 8, seed=13), rand(6, 4 // groups, 3, 3, seed=14), rand(6, seed=15)
    g = rand(*F.conv2d(torch.tensor(x), torch.tensor(w), None, stride, padding, dilation, groups).shape, seed=16)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    F.conv2d(tx, tw, tb, stride, padding, dilation, groups).backward(torch.tensor(g))
    mx, mw, mb = (Tensor(a, requires_grad=True) for a in (x, w, b))
    out = ops.conv2d(mx, mw, mb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    out.backward(Tensor(g))
    expected = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride, padding, dilation, groups)
    np.testing.assert_allclose(out.asnumpy(), expected.numpy(), atol=1e-10)
    for ours, theirs in ((mx, tx), (mw, tw), (mb, tb)):
        np.testing.assert_allclose(ours.grad.asnumpy(), theirs.grad.numpy(), atol=1e-10)


def test_matches_torch_on_the_mnist_cnn_shapes_in_float32():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rand(8, 20, 12, 12).astype(np.float32)
    w = (rand(50, 20, 5, 5, seed=1) * 0.05).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    F.conv2d(tx, tw).sum().backward()
    mx, mw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    out = ops.Conv2D(50, 5)(mx, mw)
    out.sum().backward()
    np.testing.assert_allclose(out.asnumpy(), F.conv2d(torch.tensor(x), torch.tensor(w)).numpy(),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mx.grad.asnumpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mw.grad.asnumpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    assert mw.grad.dtype == np.float32 and mx.grad.dtype == np.float32


# ---- bad input ----------------------------------------------------------------------------

def test_wrong_channel_count_names_the_op_and_both_shapes():
    with pytest.raises(ValueError, match=r"Conv2D.*\(2, 3, 8, 8\).*\(4, 2, 3, 3\)"):
        ops.Conv2D(4, 3)(Tensor(np.zeros((2, 3, 8, 8))), Tensor(np.zeros((4, 2, 3, 3))))


@pytest.mark.parametrize("x_shape, w_shape, kwargs, message", [
    ((3, 8, 8), (4, 3, 3, 3), {}, "4-D NCHW"),
    ((1, 3, 2, 2), (4, 3, 3, 3), {}, "does not fit"),
    ((1, 4, 8, 8), (3, 2, 3, 3), {"group": 2}, "groups"),
    ((1, 3, 8, 8), (4, 3, 3, 3), {"out_channel": 5}, "out_channel=5"),
    ((1, 3, 8, 8), (4, 3, 3, 3), {"kernel_size": 5}, "kernel_size"),
])
def test_bad_shapes_raise_value_error(x_shape, w_shape, kwargs, message):
    op = ops.Conv2D(**kwargs)
    with pytest.raises(ValueError, match=message) as err:
        op(Tensor(np.zeros(x_shape)), Tensor(np.zeros(w_shape)))
    assert "Conv2D" in str(err.value)


def test_bad_settings_and_dtypes():
    with pytest.raises(ValueError, match="pad_mode"):
        ops.Conv2D(4, 3, pad_mode="full")
    with pytest.raises(ValueError, match="pad_mode='pad'"):
        ops.Conv2D(4, 3, pad_mode="same", pad=1)
    with pytest.raises(ValueError, match="stride"):
        ops.Conv2D(4, 3, stride=0)
    with pytest.raises(ValueError, match="bias"):
        ops.conv2d(Tensor(np.zeros((1, 1, 4, 4))), Tensor(np.zeros((2, 1, 3, 3))), Tensor(np.zeros(3)))
    with pytest.raises(TypeError, match="Conv2D.*floating"):
        ops.conv2d(Tensor(np.zeros((1, 1, 4, 4), np.int64)), Tensor(np.zeros((2, 1, 3, 3))))


# ---- devices ------------------------------------------------------------------------------

@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


def test_runs_on_a_gpu_like_on_the_host(gpu):
    x, w, b = rand(2, 3, 9, 9), rand(4, 3, 3, 3, seed=1), rand(4, seed=2)
    g = rand(2, 4, 5, 5, seed=3)
    results = []
    for device in (ms.get_device("CPU"), gpu):
        xt, wt, bt = (Tensor(a, device=device, requires_grad=True) for a in (x, w, b))
        out = ops.conv2d(xt, wt, bt, stride=2, padding=1)
        assert out.device is device
        out.backward(Tensor(g, device=device))
        results.append([out.asnumpy(), xt.grad.asnumpy(), wt.grad.asnumpy(), bt.grad.asnumpy()])
    for ours, host in zip(*results):
        np.testing.assert_allclose(ours, host, atol=1e-10)
