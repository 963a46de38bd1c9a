"""MindSpore's ``Tensor`` surface: the lazily initialised constructor, the attributes
(``itemsize``, ``strides``, ``has_init``), ``from_numpy``, the operators (``%``, ``//``,
bitwise) and the method list, checked against NumPy."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor
from minitorch_dist.common.initializer import Normal, One, Zero


def test_lazy_constructor_fills_constants_and_draws_random_values_at_first_use():
    ones = Tensor(shape=(2, 2), dtype=ms.float32, init=One())
    assert ones.asnumpy().tolist() == [[1.0, 1.0], [1.0, 1.0]] and not ones.has_init
    assert Tensor(shape=3, dtype=ms.int32, init=Zero()).asnumpy().tolist() == [0, 0, 0]
    ms.set_seed(7)
    lazy = Tensor(shape=(3, 4), dtype=ms.float32, init=Normal())
    assert lazy.has_init and lazy.shape == (3, 4) and lazy.dtype == ms.float32
    after = ms.ops.standard_normal((2,)).asnumpy()        # the stream moved past the tensor
    ms.set_seed(7)
    drawn = np.random.default_rng().normal(size=1)      # (unrelated generator: no effect)
    eager = ms.common.initializer.initializer(Normal(), (3, 4), ms.float32).asnumpy()
    assert np.array_equal(lazy.asnumpy(), eager) and not lazy.has_init
    assert np.array_equal(ms.ops.standard_normal((2,)).asnumpy(), after)
    assert drawn.shape == (1,)
    named = Tensor(shape=(2,), init="ones")
    assert (named * 2).asnumpy().tolist() == [2.0, 2.0]
    lazy2 = Tensor(shape=(2,), dtype=ms.float32, init="normal")
    assert (lazy2 + 0).shape == (2,) and not lazy2.has_init    # a primitive draws it too
    assert lazy2.init_data() is lazy2


def test_lazy_constructor_rejects_bad_input():
    with pytest.raises(ValueError, match="negative sizes"):
        Tensor(shape=(2, -1), dtype=ms.float32, init=One())
    with pytest.raises(ValueError, match="unknown init 'gauss'"):
        Tensor(shape=(2,), init="gauss")
    with pytest.raises(TypeError, match="init must be an Initializer"):
        Tensor(shape=(2,), init=3.5)
    with pytest.raises(ValueError, match="needs init="):
        Tensor(shape=(2,))
    with pytest.raises(ValueError, match="needs shape="):
        Tensor(init=One())
    with pytest.raises(ValueError, match="not both"):
        Tensor([1.0], shape=(1,), init=One())


def test_attributes_match_numpy():
    x = Tensor(np.array([[1, 2], [3, 4]]), ms.int32)
    a = np.array([[1, 2], [3, 4]], np.int32)
    assert (x.itemsize, x.nbytes, x.ndim, x.size, x.strides) == (4, 16, 2, 4, a.strides)
    t = x.T
    assert t.strides == a.T.strides
    lazy = Tensor(shape=(3, 5), dtype=ms.float64, init=Normal())
    assert lazy.strides == (40, 8)


def test_from_numpy_shares_memory():
    n = np.ones(5)
    t = Tensor.from_numpy(n)
    np.add(n, 1, out=n)
    assert t.asnumpy().tolist() == [2.0] * 5
    with pytest.raises(TypeError, match="numpy.ndarray"):
        Tensor.from_numpy([1, 2])
    with pytest.raises(TypeError, match="not supported"):
        Tensor.from_numpy(np.array(["a"]))


@pytest.mark.parametrize("op", ["%", "//", "&", "|", "^", "<<", ">>"])
def test_integer_operators_match_numpy(op):
    names = {"a": np.array([7, -7, 12, 5]), "b": np.array([3, 3, 5, 2]), "Tensor": Tensor}
    expected = eval(f"a {op} b", names)
    assert eval(f"Tensor(a) {op} Tensor(b)", names).asnumpy().tolist() == expected.tolist()
    assert eval(f"Tensor(a) {op} 2", names).asnumpy().tolist() == eval(f"a {op} 2", names).tolist()


def test_float_operators_and_reflected_forms():
    x, y = Tensor([1.0, 2.0, 3.0]), Tensor([4.0, 5.0, 6.0])
    assert (y % x).asnumpy().tolist() == [0.0, 1.0, 0.0]
    assert (y // x).asnumpy().tolist() == [4.0, 2.0, 2.0]
    assert (7.0 % x).asnumpy().tolist() == [0.0, 1.0, 1.0]
    assert (7.0 // x).asnumpy().tolist() == [7.0, 3.0, 2.0]
    assert (~Tensor([True, False])).asnumpy().tolist() == [False, True]
    assert (Tensor([True, False]) & Tensor([True, True])).asnumpy().tolist() == [True, False]
    assert (+x) is x
    g = ms.grad(lambda t: (t % 2.0).sum())(Tensor([3.5, -1.0]))
    assert g.asnumpy().tolist() == [1.0, 1.0]


def test_conversions():
    x = Tensor([[1.5, 2.5]])
    assert x.item is not None and Tensor([3.0]).item() == 3.0
    assert x.tolist() == [[1.5, 2.5]]
    c = x.copy()
    assert c is not x and c.asnumpy().tolist() == x.asnumpy().tolist()
    assert x.int().dtype == ms.int32 and x.long().dtype == ms.int64 and x.half().dtype == ms.float16
    assert x.bool().dtype == ms.bool_ and x.float().dtype == ms.float32
    with pytest.raises(NotImplementedError, match="Tensor.short.*int16"):
        x.short()


METHODS = [   # (method call, NumPy equivalent) on a = [[1, -2, 3], [4, 5, -6]] (float64)
    ("abs()", lambda a: np.abs(a)), ("absolute()", np.abs),
    ("amax(1)", lambda a: a.max(1)), ("amin()", lambda a: a.min()),
    ("argsort(1)", lambda a: np.argsort(a, 1, kind="stable")),
    ("cumsum(1)", lambda a: np.cumsum(a, 1)), ("cumprod(0)", lambda a: np.cumprod(a, 0)),
    ("flip(0)", lambda a: a[::-1]), ("fliplr()", lambda a: a[:, ::-1]),
    ("permute((1, 0))", lambda a: a.T), ("swapaxes(0, 1)", lambda a: a.T), ("mT", lambda a: a.T),
    ("tril()", np.tril), ("triu(1)", lambda a: np.triu(a, 1)),
    ("clamp(-1, 1)", lambda a: np.clip(a, -1, 1)), ("clip(0, 2)", lambda a: np.clip(a, 0, 2)),
    ("square()", np.square), ("reciprocal()", np.reciprocal), ("exp()", np.exp),
    ("sinh()", np.sinh), ("arctan()", np.arctan), ("sign()", np.sign),
    ("var(1)", lambda a: a.var(1)), ("std()", lambda a: a.std()), ("prod(1)", lambda a: a.prod(1)),
    ("norm()", np.linalg.norm), ("ptp(1)", lambda a: np.ptp(a, 1)),
    ("ravel()", np.ravel), ("flatten()", np.ravel), ("repeat(2, 1)", lambda a: np.repeat(a, 2, 1)),
    ("tile((1, 2))", lambda a: np.tile(a, (1, 2))), ("roll(1, 1)", lambda a: np.roll(a, 1, 1)),
    ("unsqueeze(0)", lambda a: a[None]), ("narrow(1, 1, 2)", lambda a: a[:, 1:3]),
    ("take(Tensor([0, 5]))", lambda a: a.ravel()[[0, 5]]),
    ("fill(3.0)", lambda a: np.full_like(a, 3.0)), ("new_ones((2,))", lambda a: np.ones(2)),
    ("nonzero()", lambda a: np.argwhere(a)), ("isclose(a)", lambda a: np.isclose(a, a)),
    ("where(Tensor(a > 0), 0.0)", lambda a: np.where(a > 0, a, 0.0)),
    ("masked_fill(Tensor(a < 0), 9.0)", lambda a: np.where(a < 0, 9.0, a)),
    ("view_as(Tensor(np.zeros((3, 2))))", lambda a: a.reshape(3, 2)),
    ("expand_as(Tensor(np.zeros((2, 2, 3))))", lambda a: np.broadcast_to(a, (2, 2, 3))),
    ("sum_to_size(1, 3)", lambda a: a.sum(0, keepdims=True)),
    ("diagonal()", np.diagonal), ("logsumexp(1)", lambda a: np.log(np.exp(a).sum(1))),
    ("remainder(4)", lambda a: np.mod(a, 4)), ("fmod(4)", lambda a: np.fmod(a, 4)),
    ("float_power(2)", lambda a: a ** 2.0), ("ldexp(Tensor(np.ones((2, 3), np.int32)))", lambda a: a * 2),
    ("nan_to_num()", lambda a: a), ("ndimension()", lambda a: a.ndim), ("numel()", lambda a: a.size),
    ("is_floating_point()", lambda a: True), ("is_signed()", lambda a: True),
]


@pytest.mark.parametrize("call,reference", METHODS, ids=[m[0] for m in METHODS])
def test_methods_match_numpy(call, reference):
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    t = Tensor(a)
    got = eval(f"t.{call}", {"t": t, "Tensor": Tensor, "np": np, "a": a})
    want = reference(a)
    got = got.asnumpy() if isinstance(got, Tensor) else got
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-6)


def test_in_place_methods_and_refusals():
    t = Tensor(np.zeros((2, 2), np.float32))
    t.itemset(0, 1, 5.0)
    t.assign_value(t.asnumpy() + 1)
    assert t.asnumpy().tolist() == [[1.0, 6.0], [1.0, 1.0]]
    assert t.set_const_arg() is t and t.const_arg
    for name in ("to_coo", "to_csr", "as_strided", "flush_from_cache"):
        with pytest.raises(NotImplementedError, match=f"Tensor.{name} is not implemented"):
            getattr(t, name)()


def test_tensor_method_coverage_of_mindsporess_list():
    from minitorch_dist.ops.coverage import MINDSPORE_TENSOR_METHODS, tensor_coverage
    report = tensor_coverage()
    assert not report["missing"], report["missing"]
    assert len(report["implemented"]) / len(MINDSPORE_TENSOR_METHODS) >= 0.9
