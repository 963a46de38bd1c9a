"""The one-pass max-pool backward (cpp/pooling.cpp) and the ReLU kernels on channels-last
arrays give their NumPy twins' bits and layouts; MaxPool takes the C++ path only where
windows tile the input exactly; a small CNN trains to the same bits either way."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import kernels, nn, ops
from minitorch_dist.kernels import native, reference
from minitorch_dist.ops import pooling

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy warns on inf * 0
needs_cpp = pytest.mark.skipif(
    not (kernels.HAVE_CPP and hasattr(native._C, "max_pool_backward")),
    reason="C++ max-pool kernel not built")
DTYPES = [np.float32, np.float64]
GRAD_SPECIAL = [np.inf, -np.inf, np.nan, -np.nan, -0.0, 0.0, -1.5, 2.0]


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    width = np.uint32 if a.dtype == np.float32 else np.uint64
    assert np.array_equal(np.ascontiguousarray(a).view(width), np.ascontiguousarray(b).view(width))


def _in_layout(a, layout):
    """``a`` (NCHW) with C-contiguous, channels-last, or column-major memory."""
    if layout == "nchw":
        return np.ascontiguousarray(a)
    if layout == "channels_last":
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    return np.asfortranarray(a)


def _image(dtype, shape, seed):
    """Small integers up to 0 (many ties in a window), signed zeros and a few NaNs."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 1, size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.15] = -0.0
    flat[rng.random(flat.size) < 0.03] = np.nan
    return x


def _grad(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=shape).astype(dtype)
    flat = g.reshape(-1)
    picks = rng.integers(0, len(GRAD_SPECIAL), size=flat.size)
    where = rng.random(flat.size) < 0.3
    flat[where] = np.array(GRAD_SPECIAL, dtype)[picks[where]]
    return g


def _window_max(x, kh, kw):
    """The forward's max of each window (NaN wins, as np.maximum)."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h // kh, kh, w // kw, kw).max(axis=(3, 5))


def _case(dtype, shape, kernel, layout, seed=0):
    kh, kw = kernel
    x = _in_layout(_image(dtype, shape, seed), layout)
    out = _in_layout(_window_max(x, kh, kw), layout)
    grad = _in_layout(_grad(dtype, out.shape, seed + 1), layout)
    return x, out, grad


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["nchw", "channels_last", "fortran"])
@pytest.mark.parametrize("shape,kernel", [((4, 6, 8, 10), (2, 2)), ((1, 3, 6, 6), (2, 2)),
                                          ((2, 5, 9, 6), (3, 3)), ((3, 7, 4, 9), (2, 3)),
                                          ((2, 3, 5, 7), (1, 1)), ((1, 33, 2, 2), (2, 2))])
def test_the_kernel_gives_the_twins_bits_and_layout(dtype, layout, shape, kernel):
    x, out, grad = _case(dtype, shape, kernel, layout)
    assert np.isnan(out).any() and (out == 0).any()     # NaN windows and signed-zero ties
    dx = native.max_pool_backward(x, out, grad, *kernel)
    twin = reference.max_pool_backward(x, out, grad, *kernel)
    _same_bits(dx, twin)
    assert dx.strides == twin.strides == np.empty_like(x).strides


@needs_cpp
def test_the_kernel_routes_ties_nans_and_special_gradients_as_numpy_does():
    """Window values [0, -0, 0, 5], [1, 1, 1, 1], [nan, 2, 3, 4], [-0, 0, 0, 0]."""
    x = np.array([[[[0.0, -0.0, 1, 1, np.nan, 2, -0.0, 0],
                    [0.0, 5.0, 1, 1, 3.0, 4, 0.0, 0]]]], np.float32)
    out = _window_max(x, 2, 2)
    grad = np.array([[[[-1.0, np.inf, np.nan, -2.0]]]], np.float32)
    dx = native.max_pool_backward(x, out, grad, 2, 2)
    with np.errstate(invalid="ignore"):
        inf0 = np.float32(np.inf) * np.float32(0)     # the machine's NaN for inf * 0
    nan = np.float32(np.nan)
    expected = np.array([[[[-0.0, -0.0, np.inf, inf0, nan, nan, -2.0, -0.0],
                           [-0.0, -1.0, inf0, inf0, nan, nan, -0.0, -0.0]]]], np.float32)
    _same_bits(dx, expected)
    _same_bits(dx, reference.max_pool_backward(x, out, grad, 2, 2))


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_kernel_takes_any_strides_of_each_array(dtype):
    x, out, grad = _case(dtype, (2, 4, 6, 8), (2, 2), "channels_last", seed=4)
    cases = [(x, out, np.ascontiguousarray(grad)),                    # grad in another layout
             (x, out, np.broadcast_to(grad[:1], grad.shape)),          # zero strides
             (x[:, ::-1], out[:, ::-1], grad[:, ::-1]),                # negative strides
             (np.ascontiguousarray(x), out, grad)]
    for cx, cout, cgrad in cases:
        _same_bits(native.max_pool_backward(cx, cout, cgrad, 2, 2),
                   reference.max_pool_backward(cx, cout, cgrad, 2, 2))


@needs_cpp
def test_what_the_kernel_does_not_take_goes_to_the_twin():
    x, out, grad = _case(np.float32, (2, 3, 4, 4), (2, 2), "nchw")
    for args in [(x.astype(np.float16), out.astype(np.float16), grad.astype(np.float16)),
                 (x, out, grad.astype(np.float64)),
                 (x.astype(">f4"), out.astype(">f4"), grad.astype(">f4"))]:
        _same_bits(native.max_pool_backward(*args, 2, 2).astype(np.float32),
                   reference.max_pool_backward(*args, 2, 2).astype(np.float32))


def test_shapes_that_do_not_tile_are_refused_by_name():
    x, out, grad = _case(np.float32, (2, 3, 4, 4), (2, 2), "nchw")
    for impl in (native, reference):
        with pytest.raises(ValueError, match="x must have shape"):
            impl.max_pool_backward(x[..., :3], out, grad, 2, 2)
        with pytest.raises(ValueError, match="out and grad"):
            impl.max_pool_backward(x, out, grad[..., :1], 2, 2)


@needs_cpp
def test_the_cpp_entry_point_refuses_what_would_read_out_of_bounds():
    from minitorch_dist import _C
    x, out, grad = _case(np.float32, (2, 3, 4, 4), (2, 2), "nchw")
    dx = np.empty_like(x)
    with pytest.raises(ValueError, match="x must have shape"):
        _C.max_pool_backward(x, out, grad, dx, 3, 2)
    with pytest.raises(ValueError, match="dx must have shape"):
        _C.max_pool_backward(x, out, grad, dx[:1], 2, 2)
    with pytest.raises(TypeError, match="same dtype"):
        _C.max_pool_backward(x, out, grad.astype(np.float64), dx, 2, 2)
    with pytest.raises(ValueError, match="writeable"):
        dx.flags.writeable = False
        _C.max_pool_backward(x, out, grad, dx, 2, 2)


def _spy(monkeypatch):
    calls = []

    def spy(*args):
        calls.append(args)
        return reference.max_pool_backward(*args)
    monkeypatch.setattr(pooling, "_tiled_max_backward", spy)
    return calls


@pytest.mark.parametrize("op,dtype,kernel_path", [
    (ops.MaxPool(2, 2), np.float32, True),
    (ops.MaxPool(2, 2), np.float64, True),
    (ops.MaxPool(3, 2), np.float32, False),                      # overlapping windows
    (ops.MaxPool(2, 2, pad_mode="same"), np.float32, False),     # 5 rows: padded
    (ops.MaxPool(2, 2), np.float16, False)])                     # widened, NumPy loops
def test_max_pool_takes_the_kernel_only_where_windows_tile_exactly(monkeypatch, op, dtype,
                                                                     kernel_path):
    calls = _spy(monkeypatch)
    shape = (2, 3, 4, 6) if kernel_path or dtype == np.float16 else (2, 3, 5, 7)
    x = ms.Tensor(_image(np.float32, shape, 7).astype(dtype))
    ms.grad(lambda t: op(t).sum())(x)
    assert len(calls) == int(kernel_path)


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_max_pool_gradients_are_unchanged(monkeypatch, layout):
    """ops.MaxPool and nn.MaxPool2d through the engine: kernel against twin, same bits."""
    x = ms.Tensor(_in_layout(_image(np.float32, (2, 4, 6, 8), 9), layout))
    weight = ms.Tensor(_grad(np.float32, (2, 4, 3, 4), 10))
    results = []
    for impl in (pooling._tiled_max_backward, reference.max_pool_backward):
        monkeypatch.setattr(pooling, "_tiled_max_backward", impl)
        for pool in (ops.MaxPool(2, 2), nn.MaxPool2d(2, 2)):
            results.append(ms.grad(lambda t: (pool(t) * weight).sum())(x).asnumpy())
    _same_bits(results[0], results[2])
    _same_bits(results[1], results[3])
    _same_bits(results[0], results[1])


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes", [((4, 6, 5, 7), (0, 2, 3, 1)), ((3, 1, 5, 4), (0, 2, 3, 1)),
                                        ((6, 5), (1, 0)), ((2, 3, 4), (2, 0, 1)),
                                        ((2, 1, 1, 3), (0, 2, 3, 1)), ((3, 4, 1, 5), (0, 2, 3, 1))])
def test_relu_on_a_permuted_dense_array_runs_the_cpp_loop_in_the_twins_layout(monkeypatch,
                                                                             dtype, shape, axes):
    rng = np.random.default_rng(11)
    base = rng.normal(size=[shape[a] for a in axes]).astype(dtype)
    base.reshape(-1)[::5] = np.nan
    base.reshape(-1)[1::7] = -0.0
    x = base.transpose(np.argsort(axes))                     # dense, x.shape == shape
    g = np.ascontiguousarray(_grad(dtype, shape, 12).transpose(axes)).transpose(np.argsort(axes))
    assert x.shape == g.shape == shape   # C-contiguous too where only size-1 axes moved
    y_twin = reference.relu(x)
    dx_twin = reference.relu_backward(g, y_twin)

    def no_twin(*args):
        raise AssertionError("the twin ran")
    monkeypatch.setattr(reference, "relu", no_twin)
    monkeypatch.setattr(reference, "relu_backward", no_twin)
    y = native.relu(x)
    dx = native.relu_backward(g, y)
    _same_bits(y, y_twin)
    _same_bits(dx, dx_twin)
    assert y.strides == y_twin.strides and dx.strides == dx_twin.strides


@needs_cpp
def test_relu_backward_over_two_layouts_or_a_strided_array_goes_to_the_twin():
    x = _in_layout(_grad(np.float32, (2, 3, 4, 5), 13), "channels_last")
    y = native.relu(x)
    g = np.ascontiguousarray(_grad(np.float32, x.shape, 14))
    dx = native.relu_backward(g, y)
    _same_bits(dx, g * (y > 0))
    assert dx.strides == y.strides                  # y's layout, as the twin gives it
    strided = x[:, :, ::2]
    _same_bits(native.relu(strided), np.maximum(strided, 0))
    flipped = x[:, ::-1]
    _same_bits(native.relu(flipped), np.maximum(flipped, 0))
    assert native.relu(flipped).strides == np.empty_like(flipped).strides


def _cnn_step_params(steps=3):
    """conv → ReLU → 2x2 max pool (channels-last memory) → dense, SGD, float32."""
    ms.set_seed(5)
    net = nn.SequentialCell([nn.Conv2d(2, 6, 3, pad_mode="valid", has_bias=True), nn.ReLU(),
                             nn.MaxPool2d(2, 2), nn.Flatten(), nn.Dense(6 * 3 * 3, 4)])
    opt = nn.SGD(net.trainable_params(), 0.1)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = ms.Tensor(rng.integers(-2, 3, size=(5, 2, 8, 8)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 4, 5).astype(np.int32))
        opt(grad_fn(x, y)[1])
    return [p.asnumpy().copy() for p in net.trainable_params()]


def test_a_cnn_trains_to_the_same_bits_with_the_twins(monkeypatch):
    fast = _cnn_step_params()
    calls = _spy(monkeypatch)
    monkeypatch.setattr(kernels, "relu", reference.relu)
    monkeypatch.setattr(kernels, "relu_backward", reference.relu_backward)
    slow = _cnn_step_params()
    assert len(calls) == 3                      # the twin did take the pooling then
    for a, b in zip(fast, slow):
        _same_bits(a, b)
