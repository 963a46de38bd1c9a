"""The one-pass element-wise kernels of a dense step (cpp/elementwise.cpp: ReLU forward and
backward, bias add, bias gradient) and the fused SGD loop give their NumPy twins' bits, and a
whole training step gives the same parameters with and without the C++ extension."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import kernels, nn, ops
from minitorch_dist.kernels import native, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy warns on inf * 0
needs_cpp = pytest.mark.skipif(not (kernels.HAVE_CPP and hasattr(native._C, "relu")),
                               reason="C++ element-wise kernels not built")
DTYPES = [np.float32, np.float64]
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 3.5, -2.25]


def _values(dtype, shape, seed=0):
    """Random values with the special ones (signed zeros, infinities, NaNs, denormals) mixed in."""
    rng = np.random.default_rng(seed)
    a = np.asarray(rng.normal(size=shape) * 10.0 ** rng.uniform(-3, 3, size=shape), dtype)
    flat = a.reshape(-1)
    picks = rng.integers(0, len(SPECIAL), size=flat.size)
    where = rng.random(flat.size) < 0.3
    flat[where] = np.array(SPECIAL, dtype)[picks[where]]
    return a


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def _same_sum_bits(a, b):
    """Equal bits, except that a NaN may carry either operand's sign where two NaNs were
    added: NumPy's own sums differ there between its vector loop and its scalar tail (x86
    returns the first operand's NaN, and which one is first is the compiler's choice)."""
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    _same_bits(np.where(nan, 0, a), np.where(nan, 0, b))


SHAPES = [(), (0,), (1,), (7,), (64, 512), (3, 37), (2, 3, 5)]


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_and_its_backward_give_the_twins_bits(dtype, shape):
    x, g = _values(dtype, shape, 1), _values(dtype, shape, 2)
    y = native.relu(x)
    _same_bits(y, reference.relu(x))
    _same_bits(y, np.maximum(x, 0))
    _same_bits(native.relu_backward(g, y), reference.relu_backward(g, y))
    _same_bits(native.relu_backward(g, x), g * (x > 0))   # NaN, -0 and inf in the mask input


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 512), (64, 10), (3, 37), (1, 9), (5, 2), (0, 4), (4, 0),
                                   (7, 70)])
def test_the_bias_gradient_gives_the_twins_bits(dtype, shape):
    x = _values(dtype, shape, 3)
    _same_sum_bits(native.sum_rows(x), x.sum(axis=0))


@needs_cpp
def test_a_single_column_sum_is_left_to_numpy_which_adds_it_pairwise():
    g = np.random.default_rng(5).normal(size=(130, 1)).astype(np.float32)
    _same_bits(native.sum_rows(g), g.sum(axis=0))


@needs_cpp
def test_layouts_and_dtypes_the_loops_do_not_take_go_to_the_twins():
    x = _values(np.float32, (8, 6), 6)
    _same_bits(native.relu(x.T), np.maximum(x.T, 0))                 # not C-contiguous
    y = np.maximum(x, 0)
    _same_bits(native.relu_backward(x.T, y.T), x.T * (y.T > 0))
    assert native.relu_backward(x.T, y.T).strides == np.empty_like(y.T).strides   # y's layout
    h = x.astype(np.float16)
    _same_bits(native.relu(h), np.maximum(h, 0))
    _same_sum_bits(native.sum_rows(x[:, ::2]), x[:, ::2].sum(axis=0))
    swapped = x.astype(">f4")                                            # not native order
    _same_bits(native.relu(swapped), reference.relu(swapped))          # '>f4' kept, as before
    _same_sum_bits(native.sum_rows(swapped), swapped.sum(axis=0))
    _same_bits(native.relu_backward(swapped, swapped), reference.relu_backward(swapped, swapped))
    i = np.arange(-3, 3).reshape(2, 3)
    _same_bits(native.relu(i), np.maximum(i, 0))
    s = np.float32(-2.0)                                                # a NumPy scalar
    _same_bits(native.relu(s), np.maximum(s, 0, out=np.empty_like(s)))


@needs_cpp
def test_the_cpp_entry_points_refuse_what_would_read_out_of_bounds():
    from minitorch_dist import _C
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.relu(x.T)
    with pytest.raises(ValueError, match="g has shape"):
        _C.relu_backward(x, np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="same dtype"):
        _C.relu_backward(x, x.astype(np.float64))
    with pytest.raises(TypeError, match="float32 or float64"):
        _C.sum_rows(x.astype(np.int32))


def test_the_primitives_keep_numpys_bits():
    """ReLU, Add and BiasAdd forward and backward, through the engine, against NumPy."""
    x = _values(np.float32, (6, 10), 7)
    b = _values(np.float32, (10,), 8)
    g = _values(np.float32, (6, 10), 9)
    tx, tb = ms.Tensor(x), ms.Tensor(b)
    for prim in (ops.Add(), ops.BiasAdd()):
        out, grads = ms.value_and_grad(lambda u, v: prim(u, v) * ms.Tensor(g), (0, 1))(tx, tb)
        _same_bits(out.asnumpy(), (x + b) * g)
        _same_bits(grads[0].asnumpy(), g)
        _same_bits(grads[1].asnumpy(), g.sum(axis=0))
    relu = ops.ReLU()
    out, grad = ms.value_and_grad(lambda u: relu(u) * ms.Tensor(g))(tx)
    y = np.maximum(x, 0)
    _same_bits(out.asnumpy(), y * g)
    _same_bits(grad.asnumpy(), g * (y > 0))


_STEP_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import minitorch_dist as ms
    from minitorch_dist import nn
    ms.set_seed(3)
    net = nn.SequentialCell([nn.Dense(12, 16), nn.ReLU(), nn.Dense(16, 16), nn.ReLU(),
                             nn.Dense(16, 4)])
    opt = nn.SGD(net.trainable_params(), 0.05)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = ms.Tensor(rng.normal(size=(9, 12)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 4, 9).astype(np.int32))
        loss, grads = grad_fn(x, y)
        opt(grads)
    np.save(sys.argv[1], np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()]))
""")


@needs_cpp
def test_a_training_step_gives_the_same_parameters_without_the_extension(tmp_path):
    """Dense + ReLU + SGD for 4 steps: the C++ kernels (element-wise, fused SGD) against
    ``MINITORCH_DIST_NO_CPP=1``, where NumPy does everything."""
    results = []
    for no_cpp in ("0", "1"):
        out = tmp_path / f"params_{no_cpp}.npy"
        env = dict(os.environ, MINITORCH_DIST_NO_CPP=no_cpp)
        subprocess.run([sys.executable, "-c", _STEP_SCRIPT, str(out)], env=env, check=True,
                       timeout=120)
        results.append(np.load(out))
    assert results[0].size == 12 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4
    _same_bits(results[0], results[1])


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_plain_fused_sgd_matches_numpy_on_every_length(dtype, weight_decay):
    """The plain SGD loop (unrolled, p + g * -lr) against NumPy's p -= g * lr on lengths
    around the vector and unroll widths, with signed zeros and infinities."""
    params = [nn.Parameter(ms.Tensor(_values(dtype, (n,), n)), name=f"p{n}")
              for n in (1, 7, 8, 9, 31, 32, 33, 67)]
    grads = [ms.Tensor(_values(dtype, (p.shape[0],), 100 + i)) for i, p in enumerate(params)]
    expected = []
    for p, g in zip(params, grads):
        w = p.asnumpy().copy()
        if weight_decay:
            w *= 1 - 0.1 * weight_decay
        w -= g.asnumpy() * 0.1
        expected.append(w)
    opt = nn.SGD(params, 0.1, weight_decay=weight_decay)
    with np.errstate(invalid="ignore", over="ignore"):
        opt(tuple(grads))
    for p, w in zip(params, expected):
        _same_bits(p.asnumpy(), w)


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_nan_minus_a_nan_in_sgd_gives_numpys_nan(dtype):
    """NumPy's p -= g*lr returns p's NaN where both are NaN (x86 returns the first operand of
    a subtraction): the fused loop keeps p first."""
    param = nn.Parameter(ms.Tensor(np.full(45, np.nan, dtype)), name="w")
    grad = np.full(45, -np.nan, dtype)
    expected = param.asnumpy().copy()
    expected -= grad * 0.1
    nn.SGD([param], 0.1)((ms.Tensor(grad),))
    _same_bits(param.asnumpy(), expected)
