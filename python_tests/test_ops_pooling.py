"""MaxPool / AvgPool and their functional forms: naive loops, central differences, PyTorch."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops
from minitorch_dist.testing.gradcheck import check_gradients


def reference_pool(x, kernel, stride, pads, kind, count_pad=False):
    """Window by window in float64; padding never wins a max and counts in averages only if told."""
    (kh, kw), (sh, sw), (top, bottom, left, right) = kernel, stride, pads
    n, c, h, w = x.shape
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - top, j * sw - left
            window = x[:, :, max(r0, 0):r0 + kh, max(c0, 0):c0 + kw].reshape(n, c, -1)
            if kind == "max":
                out[:, :, i, j] = window.max(axis=-1)
            else:
                out[:, :, i, j] = window.sum(axis=-1) / (kh * kw if count_pad else window.shape[-1])
    return out


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


GEOMETRIES = [
    # (input shape, kernel, stride, pads (t, b, l, r))
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),     # exact tiling: the fast path
    ((2, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((1, 2, 6, 5), (3, 2), (1, 2), (1, 1, 0, 0)),     # overlapping windows
    ((2, 2, 5, 7), (2, 2), (2, 2), (0, 0, 0, 0)),     # leftover row and column
]


@pytest.mark.parametrize("shape, kernel, stride, pads", GEOMETRIES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_functional_forward_matches_naive_loops(shape, kernel, stride, pads, kind):
    x = rand(*shape)
    fn = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    got = fn(Tensor(x), kernel, stride, (pads[0], pads[2])).asnumpy()
    np.testing.assert_allclose(got, reference_pool(x, kernel, stride, pads, kind, count_pad=True),
                               atol=1e-12)


@pytest.mark.parametrize("shape, kernel, stride, pads", GEOMETRIES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_gradients_match_central_differences(shape, kernel, stride, pads, kind):
    fn = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    check_gradients(lambda x: fn(x, kernel, stride, (pads[0], pads[2])), rand(*shape, seed=1))


@pytest.mark.parametrize("cls, kind", [(ops.MaxPool, "max"), (ops.AvgPool, "avg")])
def test_mindspore_same_mode_pads_after_and_leaves_padding_out(cls, kind):
    x = rand(2, 3, 7, 6, seed=2)
    out = cls(kernel_size=3, strides=2, pad_mode="SAME")(Tensor(x)).asnumpy()
    assert out.shape == (2, 3, 4, 3)
    # rows: (4-1)*2+3-7 = 2 -> 1 before, 1 after; cols: (3-1)*2+3-6 = 1 -> 0 before, 1 after
    np.testing.assert_allclose(out, reference_pool(x, (3, 3), (2, 2), (1, 1, 0, 1), kind), atol=1e-12)
    check_gradients(lambda t: cls(kernel_size=3, strides=2, pad_mode="same")(t), x)


def test_mindspore_valid_mode_and_float32():
    x = rand(4, 20, 24, 24).astype(np.float32)
    out = ops.MaxPool(kernel_size=2, strides=2)(Tensor(x))
    assert out.shape == (4, 20, 12, 12) and out.dtype == np.float32
    np.testing.assert_array_equal(out.asnumpy(), reference_pool(x, (2, 2), (2, 2), (0,) * 4, "max"))


def test_max_gradient_goes_to_the_first_maximum_of_each_window():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 2:, 2:] = [[1.0, 5.0], [5.0, 5.0]]
    t = Tensor(x, requires_grad=True)
    ops.max_pool2d(t, 2).backward(Tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]])))
    expected = np.zeros((4, 4))
    expected[0, 0], expected[0, 2], expected[2, 0], expected[2, 3] = 1.0, 2.0, 3.0, 4.0
    np.testing.assert_array_equal(t.grad.asnumpy()[0, 0], expected)


def test_channels_last_input_gives_the_same_values_and_gradients():
    x = rand(2, 4, 6, 6, seed=3)
    g = rand(2, 4, 3, 3, seed=4)
    grads = []
    for array in (x, np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)):
        t = Tensor._make(array, ms.get_device("CPU"), requires_grad=True)
        out = ops.max_pool2d(t, 2)
        np.testing.assert_array_equal(out.asnumpy(), reference_pool(x, (2, 2), (2, 2), (0,) * 4, "max"))
        out.backward(Tensor(g))
        grads.append(t.grad.asnumpy())
    np.testing.assert_array_equal(grads[0], grads[1])


# ---- PyTorch ------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, stride, padding", [(2, None, 0), (3, 2, 1), ((3, 2), (1, 2), (1, 0)), (3, 3, 0)])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_matches_torch(kernel, stride, padding, kind):
    torch = pytest.importorskip("torch")
    x = rand(2, 3, 9, 8, seed=5)
    x[0, 0, :4, :4] = 0.0    # ties, as after a ReLU
    ours_fn = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    torch_fn = torch.nn.functional.max_pool2d if kind == "max" else torch.nn.functional.avg_pool2d
    tx = torch.tensor(x, requires_grad=True)
    expected = torch_fn(tx, kernel, stride, padding)
    g = rand(*expected.shape, seed=6)
    expected.backward(torch.tensor(g))
    mx = Tensor(x, requires_grad=True)
    out = ours_fn(mx, kernel, stride, padding)
    out.backward(Tensor(g))
    np.testing.assert_allclose(out.asnumpy(), expected.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(mx.grad.asnumpy(), tx.grad.numpy(), atol=1e-12)


def test_avg_pool_without_counting_padding_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand(1, 2, 5, 5, seed=7)
    expected = torch.nn.functional.avg_pool2d(torch.tensor(x), 3, 2, 1, count_include_pad=False)
    got = ops.avg_pool2d(Tensor(x), 3, 2, 1, count_include_pad=False)
    np.testing.assert_allclose(got.asnumpy(), expected.numpy(), atol=1e-12)


# ---- bad input ----------------------------------------------------------------------------

def test_bad_inputs_name_the_primitive():
    with pytest.raises(ValueError, match=r"MaxPool.*4-D.*\(3, 8, 8\)"):
        ops.MaxPool(2, 2)(Tensor(np.zeros((3, 8, 8))))
    with pytest.raises(ValueError, match="AvgPool.*larger than"):
        ops.AvgPool(5, 1)(Tensor(np.zeros((1, 1, 4, 4))))
    with pytest.raises(TypeError, match="MaxPool.*floating"):
        ops.max_pool2d(Tensor(np.zeros((1, 1, 4, 4), np.int32)), 2)


def test_bad_settings():
    with pytest.raises(ValueError, match="pad_mode"):
        ops.MaxPool(2, 2, pad_mode="pad")
    with pytest.raises(ValueError, match="kernel_size"):
        ops.AvgPool(0, 1)
    with pytest.raises(ValueError, match="half the kernel"):
        ops.max_pool2d(Tensor(np.zeros((1, 1, 6, 6))), 2, padding=2)


# ---- devices ------------------------------------------------------------------------------

@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_runs_on_a_gpu_like_on_the_host(gpu, kind):
    x, g = rand(2, 3, 9, 8, seed=8), rand(2, 3, 5, 4, seed=9)
    fn = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    results = []
    for device in (ms.get_device("CPU"), gpu):
        t = Tensor(x, device=device, requires_grad=True)
        out = fn(t, 3, 2, 1)
        assert out.device is device
        out.backward(Tensor(g, device=device))
        results.append([out.asnumpy(), t.grad.asnumpy()])
    for ours, host in zip(*results):
        np.testing.assert_allclose(ours, host, atol=1e-12)
