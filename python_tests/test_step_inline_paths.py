"""The step's inlined common cases (issue 29, "thinner steps"): backward delivering a gradient
that already fits without ``_fit``, a single output's gradient taken without
``_output_gradients``, a fresh leaf gradient handed out without ``_own``, dispatch's common
call (one device found in one pass), the fused optimizer's placement rows sharing one device name,
and ``MatMul``'s transposes without a helper. Each gives what the general path gives, and
every other case still reaches the general path."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import autograd, ops, placement
from minitorch_dist.autograd import run_backward
from minitorch_dist.backend import get_device
from minitorch_dist.ops.primitive import Primitive


def _leaf(values, dtype=np.float32):
    return ms.Tensor(np.asarray(values, dtype), requires_grad=True)


class _Recorder(Primitive):
    """Identity forward; backward records the type of the gradient it receives and returns
    ``make(g)`` as the input's gradient."""

    def __init__(self, make=lambda g: g):
        self.make, self.seen = make, []

    def forward(self, ctx, x):
        return x.copy()

    def backward(self, ctx, g):
        self.seen.append(type(g))
        return self.make(g)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_gradient_that_fits_skips_fit(monkeypatch, engine):
    """On both loops: the C++ one (``cpp/engine.cpp``) calls the ``_fit`` it is handed."""
    if engine == "native" and autograd._native is None:
        pytest.skip("the C++ extension is not built")
    if engine == "python":
        monkeypatch.setattr(autograd, "_native", None)
    calls = []
    original = autograd._fit

    def spy(*args):
        calls.append(args)
        return original(*args)
    monkeypatch.setattr(autograd, "_fit", spy)
    helpers = list(autograd._native_helpers)
    helpers[helpers.index(original)] = spy
    monkeypatch.setattr(autograd, "_native_helpers", tuple(helpers))
    x = _leaf([1.0, 2.0])
    y = ops.Mul()(ops.Mul()(x, x), 3.0)
    (grad,) = run_backward([y], [np.ones(2, np.float32)], targets=[x])
    np.testing.assert_array_equal(grad, [6.0, 12.0])
    assert [prim for _, _, prim in calls] == [autograd._RootPrim]    # the seed alone


def test_a_gradient_that_does_not_fit_still_goes_through_fit():
    # a broadcast gradient is summed down, another dtype is cast back, a wrong shape is refused
    bias = _leaf([1.0, 2.0])
    grad = run_backward([_Recorder(lambda g: np.ones((3, 2), np.float32))(bias)],
                        [np.ones(2, np.float32)], targets=[bias])[0]
    np.testing.assert_array_equal(grad, [3.0, 3.0])
    half = _leaf([1.0, 2.0], np.float16)
    grad = run_backward([_Recorder(lambda g: g.astype(np.float32))(half)],
                        [np.ones(2, np.float16)], targets=[half])[0]
    assert grad.dtype == np.float16
    bad = _Recorder(lambda g: np.ones(5, np.float32))
    with pytest.raises(RuntimeError, match=r"backward returned a gradient of shape \(5,\)"):
        run_backward([bad(_leaf([1.0, 2.0]))], [np.ones(2, np.float32)])


def test_an_intermediate_gradient_accumulates_and_a_scalar_becomes_an_array():
    x = _leaf(2.0)
    rec = _Recorder()
    y = rec(x)
    z = ops.Add()(ops.Mul()(y, 3.0), ops.Mul()(y, 4.0))     # two gradients for y, added
    (grad,) = run_backward([z], [np.ones((), np.float32)], targets=[x])
    assert float(grad) == 7.0
    # the sum of two 0-d arrays is a NumPy scalar: the producer's backward gets an array
    assert rec.seen == [np.ndarray]


def test_a_target_intermediate_still_collects_its_gradient():
    x = _leaf([1.0, 2.0])
    y = ops.Mul()(x, 2.0)
    z = ops.Mul()(y, y)
    gy, gx = run_backward([z], [np.ones(2, np.float32)], targets=[y, x])
    np.testing.assert_array_equal(gy, [4.0, 8.0])
    np.testing.assert_array_equal(gx, [8.0, 16.0])


def test_handed_out_gradients_own_their_memory():
    a, b = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    ga, gb = run_backward([ops.Add()(a, b)], [np.ones(2, np.float32)], targets=[a, b])
    assert not np.shares_memory(ga, gb)     # Add hands one array to both inputs
    frozen = np.ones(2, np.float32)
    frozen.flags.writeable = False
    x = _leaf([1.0, 2.0])
    (gx,) = run_backward([_Recorder(lambda g: frozen)(x)], [np.ones(2, np.float32)],
                         targets=[x])
    assert gx.flags.writeable and not np.shares_memory(gx, frozen)
    root = np.ones(2, np.float32)           # the caller's seed array is not handed back
    (gx,) = run_backward([_Recorder()(x)], [root], targets=[x])
    assert not np.shares_memory(gx, root)


class _Failing(Primitive):
    def __init__(self, error):
        self.error = error

    def forward(self, ctx, *arrays):
        raise self.error


def test_forward_errors_are_rewritten_on_the_inline_path():
    x = ms.Tensor(np.ones((2, 3), np.float32))
    prim = _Failing(ValueError("bad"))
    with pytest.raises(ValueError, match=r": bad \(inputs: float32\[2, 3\]\)") as info:
        prim(x)
    assert str(info.value).startswith(prim.name)
    named = _Failing(TypeError("already named"))
    named.error = TypeError(f"{named.name}: already named")
    with pytest.raises(TypeError) as info:
        named(x)
    assert info.value is named.error            # a message naming the primitive stays as is
    memory = MemoryError("host")
    with pytest.raises(MemoryError) as info:
        _Failing(memory)(x)
    assert info.value is memory                 # a host MemoryError is raised unchanged


class _Outputs(Primitive):
    differentiable = False

    def __init__(self, result):
        self.result = result

    def forward(self, ctx, x):
        return self.result(x)


def test_outputs_other_than_one_array_are_made_arrays():
    x = ms.Tensor(np.ones(3, np.float32))
    scalar = _Outputs(lambda a: a.sum())(x)                  # a NumPy scalar
    assert type(scalar.data) is np.ndarray and float(scalar) == 3.0
    first, second = _Outputs(lambda a: (a.sum(), a * 2))(x)
    assert type(first.data) is np.ndarray and second.shape == (3,)


@pytest.mark.host_default
def test_inputs_on_several_devices_or_constants_take_the_general_path():
    cpu = get_device("CPU")
    x = ms.Tensor(np.ones(2, np.float32))
    assert ops.Add()(x, 1.0).device is cpu       # a constant: placed, then made an array
    assert ops.Add()(1.0, x).asnumpy().tolist() == [2.0, 2.0]
    assert ops.Add().set_device("CPU")(x, x).device is cpu


def test_placement_rows_get_each_device_name():
    placement.reset_placement_stats()
    cpu = get_device("CPU")
    placement.record_updates([("t.a", cpu, 0.0, 4), ("t.b", None, 0.0, 4),
                              ("t.c", "CPU", 0.0, 4), ("t.d", cpu, 0.0, 4)])
    rows = {r["name"]: r["device"] for r in ms.placement_report().updates}
    assert rows == {"t.a": "CPU", "t.b": "-", "t.c": "CPU", "t.d": "CPU"}
    placement.reset_placement_stats()


def test_gradient_shapes_are_still_checked():
    net = ms.nn.Dense(3, 2)
    opt = ms.nn.SGD(net.trainable_params(), learning_rate=0.1)
    good = [ms.Tensor(np.zeros(p.shape, np.float32)) for p in opt.parameters]
    bad = list(good)
    bad[0] = ms.Tensor(np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match=r"gradient 0 has shape \(3, 3\)"):
        opt(tuple(bad))
    bad[0] = np.zeros((1,), np.float32)
    with pytest.raises(ValueError, match=r"gradient 0 has shape \(1,\)"):
        opt(tuple(bad))
    bad[0] = "not a gradient"
    with pytest.raises(TypeError, match="gradient 0"):
        opt(tuple(bad))
    assert opt(tuple(good)) is True


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_gradients_for_every_transpose(ta, tb):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((4, 3) if ta else (3, 4)).astype(np.float32)
    b_np = rng.standard_normal((5, 4) if tb else (4, 5)).astype(np.float32)
    g = rng.standard_normal((3, 5)).astype(np.float32)
    a, b = ms.Tensor(a_np, requires_grad=True), ms.Tensor(b_np, requires_grad=True)
    out = ops.MatMul(ta, tb)(a, b)
    ga, gb = run_backward([out], [g], targets=[a, b])
    op_a, op_b = (a_np.T if ta else a_np), (b_np.T if tb else b_np)
    np.testing.assert_array_equal(out.asnumpy(), op_a @ op_b)
    want_a, want_b = g @ op_b.T, op_a.T @ g
    np.testing.assert_array_equal(ga, want_a.T if ta else want_a)
    np.testing.assert_array_equal(gb, want_b.T if tb else want_b)
