"""Dropout / dropout: statistics of the mask, the same mask in backward, identities, errors."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops
from minitorch_dist.testing.gradcheck import check_gradients


def test_inverted_scaling_preserves_the_mean():
    ms.set_seed(0)
    x = Tensor(np.ones((200, 500), np.float32))
    out = ops.Dropout(keep_prob=0.8)(x).asnumpy()
    assert out.dtype == np.float32
    assert set(np.unique(out).tolist()) == {0.0, np.float32(1 / 0.8)}
    kept = (out != 0).mean()
    assert abs(kept - 0.8) < 0.005          # 100k draws: the standard deviation is 0.0013
    assert abs(out.mean() - 1.0) < 0.01


def test_backward_reuses_the_forward_mask():
    ms.set_seed(1)
    x = Tensor(np.random.default_rng(0).uniform(1, 2, size=(50, 40)), requires_grad=True)
    out = ops.dropout(x, p=0.3)
    out.sum().backward()
    mask = out.asnumpy() / x.asnumpy()       # 0 or 1/0.7 where the element survived
    np.testing.assert_allclose(x.grad.asnumpy(), mask, atol=1e-12)
    assert 0 < (mask == 0).sum() < mask.size


def test_non_contiguous_input():
    base = np.random.default_rng(3).uniform(1, 2, size=(30, 40))
    x = Tensor._make(base[:, ::2], ms.get_device("CPU"), requires_grad=True)
    ms.set_seed(2)
    out = ops.dropout(x, p=0.5)
    values = out.asnumpy()
    kept = values != 0
    np.testing.assert_allclose(values[kept], 2 * base[:, ::2][kept])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), 2.0 * kept)


def test_gradient_matches_central_differences_with_a_fixed_mask():
    def fn(x):
        ms.set_seed(7)                       # the same mask on every call
        return ops.Dropout(keep_prob=0.6)(x)
    check_gradients(fn, np.random.default_rng(2).standard_normal((4, 6)))


def test_masks_follow_the_framework_seed():
    x = Tensor(np.ones(1000))
    ms.set_seed(5)
    first = ops.dropout(x, 0.5).asnumpy()
    second = ops.dropout(x, 0.5).asnumpy()
    ms.set_seed(5)
    again = ops.dropout(x, 0.5).asnumpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)


def test_identities():
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert ops.dropout(x, p=0.5, training=False) is x
    assert ops.dropout(x, p=0.0) is x
    out = ops.Dropout(keep_prob=1.0)(x)
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy())
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.ones((2, 3)))


def test_dropping_everything_gives_zeros():
    x = Tensor(np.ones(5), requires_grad=True)
    out = ops.dropout(x, p=1.0)
    np.testing.assert_array_equal(out.asnumpy(), np.zeros(5))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros(5))


def test_matches_torch_statistics():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ms.set_seed(0)
    x = np.ones((100, 100), np.float32)
    theirs = torch.nn.functional.dropout(torch.tensor(x), p=0.25).numpy()
    ours = ops.dropout(Tensor(x), p=0.25).asnumpy()
    # same value set and scale; kept fractions agree within sampling noise
    assert set(np.unique(ours).tolist()) == set(np.unique(theirs).tolist())
    assert abs((ours != 0).mean() - (theirs != 0).mean()) < 0.03


@pytest.mark.parametrize("keep_prob", [0.0, 1.5, -0.1, True, "0.5"])
def test_keep_prob_outside_the_unit_interval_is_rejected(keep_prob):
    with pytest.raises(ValueError, match="Dropout: keep_prob"):
        ops.Dropout(keep_prob=keep_prob)


def test_bad_probability_and_dtype():
    with pytest.raises(ValueError, match="dropout: p"):
        ops.dropout(Tensor(np.ones(3)), p=1.2)
    with pytest.raises(TypeError, match="Dropout.*floating"):
        ops.Dropout(0.5)(Tensor(np.ones(3, np.int64)))


# ---- devices ------------------------------------------------------------------------------

@pytest.fixture(params=["virtual", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu(request):
    """The emulated GPU everywhere; the real one (the CuPy code path) where there is one."""
    return request.getfixturevalue("virtual_gpu") if request.param == "virtual" else ms.get_device("GPU")


def test_draws_the_mask_on_a_gpu_and_follows_the_seed(gpu):
    x = Tensor(np.ones((100, 100), np.float32), device=gpu, requires_grad=True)
    ms.set_seed(11)
    out = ops.Dropout(keep_prob=0.75)(x)
    assert out.device is gpu
    values = out.asnumpy()
    assert abs((values != 0).mean() - 0.75) < 0.03
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), values)
    ms.set_seed(11)
    np.testing.assert_array_equal(ops.Dropout(keep_prob=0.75)(x).asnumpy(), values)
