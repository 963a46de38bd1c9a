"""Tensor: construction and dtype rules, conversion, assignment, operators, hashing, repr."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor


# ---- construction and dtype rules --------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    ([1.0, 2.5], np.float32),            # Python floats -> float32
    (1.5, np.float32),
    ([[1, 2], [3, 4]], np.int64),        # Python ints -> int64
    (7, np.int64),
    ([1, 2.5], np.float32),              # mixed ints and floats are floats
    ([True, False], np.bool_),
    (np.zeros(3, np.float64), np.float64),   # NumPy dtypes are kept
    (np.zeros(3, np.float16), np.float16),
    (np.zeros(3, np.int32), np.int32),
    (np.zeros(3, np.uint8), np.uint8),
    (np.float64(2.0), np.float64),       # NumPy scalars keep their dtype too (regression)
    (np.int32(3), np.int32),
])
def test_construction_dtype_rules(data, dtype):
    t = Tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.asnumpy(), np.asarray(data))


def test_construction_shapes_and_values():
    assert Tensor(3.0).shape == ()
    assert Tensor([[1.0, 2.0, 3.0]]).shape == (1, 3)
    assert Tensor(np.empty((0, 4))).shape == (0, 4)
    assert Tensor([]).shape == (0,)


@pytest.mark.parametrize("dtype", [ms.float64, "float64", np.float64, "double"])
def test_explicit_dtype_spellings(dtype):
    t = Tensor([0.1, 0.2], dtype=dtype)
    assert t.dtype == np.float64
    assert t.asnumpy()[0] == 0.1          # no detour through float32


def test_explicit_dtype_converts():
    assert Tensor([1, 2], dtype=ms.float32).dtype == np.float32
    assert Tensor([1.7, -2.2], dtype=ms.int32).tolist() == [1, -2]
    assert Tensor(np.ones(2), dtype="float16").dtype == np.float16


def test_construction_copies_its_input():
    a = np.arange(3.0)
    t = Tensor(a)
    a[0] = 100.0
    assert t.asnumpy()[0] == 0.0


def test_construction_from_tensor_copies_and_casts():
    src = Tensor([1.0, 2.0])
    copy = Tensor(src)
    assert copy.dtype == np.float32 and not np.shares_memory(copy.data, src.data)
    src[0] = 9.0
    assert copy.tolist() == [1.0, 2.0]
    assert Tensor(src, dtype=ms.float64).dtype == np.float64
    assert Tensor(src, dtype=ms.int64).tolist() == [9, 2]


def test_unsupported_dtypes_are_type_errors():
    for array in (np.zeros(2, np.complex64), np.zeros(2, np.uint16), np.zeros(2, np.float128)
                  if hasattr(np, "float128") else np.zeros(2, np.complex128)):
        with pytest.raises(TypeError, match="not supported"):
            Tensor(array)
    with pytest.raises(TypeError, match="unknown dtype"):
        Tensor([1.0], dtype="complex64")
    with pytest.raises(TypeError, match="dtype"):
        Tensor([1.0], dtype=np.complex64)


def test_ragged_lists_and_strings_are_rejected():
    with pytest.raises(ValueError, match="rectangular"):
        Tensor([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="numbers"):
        Tensor("abc")
    with pytest.raises(TypeError, match="numbers"):
        Tensor(["a", "b"])
    with pytest.raises(TypeError, match="numbers"):
        Tensor([{"a": 1}])
    with pytest.raises(ValueError, match="input_data"):
        Tensor(None)


# ---- conversion ------------------------------------------------------------------------
def test_asnumpy_returns_a_copy():
    t = Tensor([[1.0, 2.0], [3.0, 4.0]])
    out = t.asnumpy()
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    out[0, 0] = -1.0
    assert t.asnumpy()[0, 0] == 1.0
    assert t.numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(np.asarray(t), [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.host_default
def test_properties():
    t = Tensor(np.zeros((2, 3, 4), np.float64))
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.size == 24 and t.nbytes == 192
    assert len(t) == 2
    assert t.device == "CPU" and t.device.name == "CPU"
    assert t.is_leaf and not t.requires_grad and t.grad is None
    with pytest.raises(TypeError, match="0-d"):
        len(Tensor(1.0))


def test_item_and_tolist():
    assert Tensor([[2.5]]).item() == 2.5
    assert isinstance(Tensor(3).item(), int)
    assert Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="one element"):
        Tensor([1.0, 2.0]).item()


def test_float_int_and_format_of_one_element_tensors():
    loss = Tensor([[2.5]])
    assert float(loss) == 2.5 and int(Tensor(7)) == 7 and int(loss) == 2
    assert f"{loss:.3f}" == "2.500" and f"{Tensor(3):>3d}" == "  3"
    assert f"{Tensor([1.0, 2.0])}" == str(Tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="one element"):
        float(Tensor([1.0, 2.0]))


def test_iteration_yields_rows():
    rows = list(Tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert [r.tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(TypeError, match="0-d"):
        list(Tensor(1.0))            # used to give [] silently


def test_bool_of_tensors():
    assert bool(Tensor([1.0])) and not bool(Tensor(0.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(Tensor([1.0, 2.0]))


@pytest.mark.host_default
def test_to_same_device_is_identity():
    t = Tensor([1.0])
    assert t.to("CPU") is t
    assert t.to(ms.get_device("CPU")) is t


def test_astype():
    t = Tensor([1.5, -2.5])
    out = t.astype(ms.int32)
    assert out.dtype == np.int32 and out.tolist() == [1, -2]
    assert t.astype("float64").dtype == np.float64


def test_detach_shares_memory_and_drops_the_tape():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert np.shares_memory(d.data, y.data)
    d[0] = 10.0                       # assigning through a detached view changes the original
    assert y.tolist() == [10.0, 4.0]


def test_set_data_keeps_dtype_and_checks_shape():
    t = Tensor([1.0, 2.0])
    buffer = t.data
    t.set_data([5.0, 6.0])
    assert t.tolist() == [5.0, 6.0] and t.data is buffer      # in place
    t.set_data(Tensor([7, 8]))
    assert t.dtype == np.float32 and t.tolist() == [7.0, 8.0]
    t.set_data(np.array([0.5, 0.25]))
    assert t.tolist() == [0.5, 0.25]
    with pytest.raises(ValueError, match=r"set_data expects shape \(2,\)"):
        t.set_data([1.0, 2.0, 3.0])


# ---- __setitem__ ------------------------------------------------------------------------
def test_setitem_scalars_slices_and_tensors():
    t = Tensor(np.zeros((3, 4), np.float32))
    t[0, 1] = 5.0
    t[1] = Tensor([1.0, 2.0, 3.0, 4.0])
    t[2, ::2] = 7
    t[Tensor([0])] = t.asnumpy()[0] + 1           # an index given as a Tensor
    expected = np.zeros((3, 4), np.float32)
    expected[0, 1] = 5.0
    expected[1] = [1, 2, 3, 4]
    expected[2, ::2] = 7
    expected[0] += 1
    np.testing.assert_array_equal(t.asnumpy(), expected)
    t[t > 4.5] = 0.0                  # a boolean mask Tensor
    expected[expected > 4.5] = 0.0
    np.testing.assert_array_equal(t.asnumpy(), expected)


def test_setitem_keeps_dtype_and_rejects_bad_shapes():
    t = Tensor([1, 2, 3])
    t[0] = 9.7
    assert t.dtype == np.int64 and t.tolist() == [9, 2, 3]
    with pytest.raises(ValueError):
        t[:] = Tensor([1, 2])


def test_setitem_refused_on_tensors_in_autograd():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place"):
        x[0] = 3.0
    y = x * 2
    with pytest.raises(RuntimeError, match="in-place"):
        y[0] = 3.0
    assert x.tolist() == [1.0, 2.0] and y.tolist() == [2.0, 4.0]


# ---- operators --------------------------------------------------------------------------
def test_operators_against_numpy_with_broadcasting():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (3, 1)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (1, 4)).astype(np.float32)
    ta, tb = Tensor(a), Tensor(b)
    cases = {
        "+": (ta + tb, a + b), "-": (ta - tb, a - b), "*": (ta * tb, a * b), "/": (ta / tb, a / b),
        "**": (ta ** tb, a ** b), "neg": (-ta, -a), "abs": (abs(ta - 1), np.abs(a - 1)),
        "@": (Tensor(a.T) @ Tensor(a), a.T @ a),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == np.float32, name
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, err_msg=name)


def test_python_scalars_on_either_side():
    x = Tensor([1.0, 2.0, 4.0])
    np.testing.assert_allclose((2 + x).asnumpy(), [3, 4, 6])
    np.testing.assert_allclose((2 - x).asnumpy(), [1, 0, -2])
    np.testing.assert_allclose((2 * x).asnumpy(), [2, 4, 8])
    np.testing.assert_allclose((2 / x).asnumpy(), [2, 1, 0.5])
    np.testing.assert_allclose((2 ** x).asnumpy(), [2, 4, 16])
    np.testing.assert_allclose((x ** 2).asnumpy(), [1, 4, 16])
    np.testing.assert_allclose((x - 1).asnumpy(), [0, 1, 3])


@pytest.mark.parametrize("make, expected", [
    (lambda: Tensor([1.0]) * 2, np.float32),                 # Python int does not widen float32
    (lambda: Tensor([1.0]) + 0.1, np.float32),               # nor does a Python float
    (lambda: Tensor(np.ones(2, np.float16)) * 1.5, np.float16),
    (lambda: Tensor(np.ones(2, np.int32)) + 1, np.int32),
    (lambda: Tensor([1, 2]) * 0.5, np.float32),              # int tensor * 0.5 is float32 (regression)
    (lambda: 0.5 * Tensor([1, 2]), np.float32),
    (lambda: Tensor([1, 2]) - 0.5, np.float32),
    (lambda: Tensor([4, 2]) ** 0.5, np.float32),
    (lambda: Tensor([1, 2]) / Tensor([2, 4]), np.float32),   # int / int is float32 (regression)
    (lambda: Tensor([1, 2]) / 2, np.float32),
    (lambda: Tensor([1, 2]) + Tensor([0.5, 0.5]), np.float32),   # int + float32 tensor -> float32
    (lambda: Tensor([1.0]) + Tensor(np.ones(1)), np.float64),     # float32 + float64 -> float64
    (lambda: Tensor([1, 2]) + Tensor(np.ones(2, np.int32)), np.int64),
    (lambda: Tensor([1.0]) + np.ones(1, np.int64), np.float32),
])
def test_result_dtypes(make, expected):
    assert make().dtype == expected


def test_int_tensor_times_half_values():
    out = Tensor([1, 2, 3]) * 0.5
    np.testing.assert_array_equal(out.asnumpy(), np.array([0.5, 1.0, 1.5], np.float32))
    np.testing.assert_array_equal((Tensor([1, 3]) / Tensor([2, 2])).asnumpy(), [0.5, 1.5])


def test_numpy_array_on_the_left_defers_to_tensor():
    out = np.ones(2, np.float32) + Tensor([1.0, 2.0])
    assert isinstance(out, Tensor)
    assert out.tolist() == [2.0, 3.0]


@pytest.mark.parametrize("op, ref", [
    (lambda a, b: a == b, np.equal), (lambda a, b: a != b, np.not_equal),
    (lambda a, b: a < b, np.less), (lambda a, b: a <= b, np.less_equal),
    (lambda a, b: a > b, np.greater), (lambda a, b: a >= b, np.greater_equal),
])
def test_comparisons_are_bool_and_not_differentiable(op, ref):
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    b = np.array([[2.0], [1.0]], np.float32)
    x = Tensor(a, requires_grad=True)
    out = op(x, Tensor(b))
    assert out.dtype == np.bool_ and out.shape == (2, 3)
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_array_equal(out.asnumpy(), ref(a, b))
    assert op(x, 2.0).dtype == np.bool_
    np.testing.assert_array_equal(op(x, 2.0).asnumpy(), ref(a, 2.0))


def test_hash_is_identity_so_tensors_can_be_dict_keys():
    a, b = Tensor([1.0]), Tensor([1.0])
    table = {a: "a", b: "b"}
    assert table[a] == "a" and table[b] == "b" and len(table) == 2
    assert hash(a) == hash(a) and hash(a) != hash(b)
    assert a in {a} and b not in {a}


@pytest.mark.host_default
def test_repr():
    text = repr(Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True))
    assert text.startswith("Tensor([[1., 2.],")
    assert "dtype=float32" in text and "requires_grad=True" in text
    assert repr(Tensor([1, 2])) == "Tensor([1, 2], dtype=int64)"
    assert "device" not in repr(Tensor([1.0]))


def test_repr_names_a_non_host_device(virtual_gpu):
    t = Tensor([1.0], device="GPU")
    assert "device=GPU:0" in repr(t)


def test_methods_dispatch_to_ops():
    a = np.arange(6.0).reshape(2, 3)
    t = Tensor(a)
    np.testing.assert_allclose(t.sum().asnumpy(), a.sum())
    np.testing.assert_allclose(t.sum(axis=0).asnumpy(), a.sum(axis=0))
    np.testing.assert_allclose(t.mean(axis=1, keepdims=True).asnumpy(), a.mean(axis=1, keepdims=True))
    np.testing.assert_array_equal(t.reshape(3, 2).asnumpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(t.reshape((3, 2)).asnumpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(t.T.asnumpy(), a.T)
    np.testing.assert_array_equal(t.transpose().asnumpy(), a.T)
    np.testing.assert_array_equal(t.flatten().asnumpy(), a.ravel())
    np.testing.assert_array_equal(t[1, ::2].asnumpy(), a[1, ::2])
    np.testing.assert_allclose(t.exp().asnumpy(), np.exp(a), rtol=1e-12)
    np.testing.assert_array_equal((t - 2).relu().asnumpy(), np.maximum(a - 2, 0))
    np.testing.assert_array_equal(t.max(axis=1).asnumpy(), a.max(axis=1))
    np.testing.assert_array_equal(t.argmax(axis=1).asnumpy(), a.argmax(axis=1))
