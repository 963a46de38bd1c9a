"""Context options, seeding, and how tensors print in user scripts."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.random import rng


def test_set_seed_makes_draws_repeatable():
    ms.set_seed(3)
    a = rng().normal(size=4)
    ms.set_seed(3)
    np.testing.assert_array_equal(a, rng().normal(size=4))
    assert ms.get_seed() == 3


@pytest.mark.parametrize("bad", [True, -1, 1.5, "1"])
def test_set_seed_rejects_non_integers(bad):
    with pytest.raises(ValueError, match="non-negative integer"):
        ms.set_seed(bad)


def test_str_of_a_tensor_is_its_values_like_mindspore():
    # seed 000 prints "loss is %s" % loss_value and expects a bare number
    loss = ms.Tensor(np.float32(2.3029172))
    assert "loss is %s" % loss == "loss is 2.3029172"
    assert str(ms.Tensor([1.0, 2.0])) == "[1. 2.]"
    assert repr(ms.Tensor([1.0])).startswith("Tensor(")


def test_uint32_labels_are_tensors():
    t = ms.Tensor(np.array([1, 2], np.uint32))
    assert t.dtype == ms.uint32


def test_unknown_context_option_is_rejected():
    with pytest.raises(ValueError, match="unknown context option"):
        ms.set_context(devcie_target="CPU")
    with pytest.raises(ValueError, match="GRAPH_MODE or ms.PYNATIVE_MODE"):
        ms.set_context(mode=7)


def test_set_seed_also_seeds_numpys_global_generator_as_mindspore_does():
    # MindSpore's tutorials build their inputs with np.random after ms.set_seed: every rank
    # must draw the same ones
    ms.set_seed(7)
    first = np.random.randn(3)
    ms.set_seed(7)
    assert np.array_equal(first, np.random.randn(3))
    ms.set_seed(2**40 + 7)          # NumPy takes 32 bits: the seed wraps there, no error
    assert np.array_equal(first, np.random.randn(3))
