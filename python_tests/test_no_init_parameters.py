"""Parameters made under ``nn.utils.no_init_parameters`` before their first use (issue 28
item 3): reading, saving, loading into or ``set_data`` materialise them exactly as their
first use would; nothing returns or saves the zeros they hold until then, and nothing
fails with numpy's "assignment destination is read-only"."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.nn.utils import no_init_parameters
from minitorch_dist.train import load_checkpoint, load_param_into_net, save_checkpoint


def _drawn(seed=5):
    """The weight one process draws at once, and a deferred twin made from the same seed."""
    ms.set_seed(seed)
    eager = nn.Dense(4, 3)
    ms.set_seed(seed)
    with no_init_parameters():
        lazy = nn.Dense(4, 3)
    return eager, lazy


def test_asnumpy_before_first_use_draws_the_real_values():
    eager, lazy = _drawn()
    assert lazy.weight.deferred_init is not None
    values = lazy.weight.asnumpy()
    assert np.any(values != 0)
    np.testing.assert_array_equal(values, eager.weight.asnumpy())
    # the first use afterwards sees the same values
    x = ms.Tensor(np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(lazy(x).asnumpy(), eager(x).asnumpy())


def test_save_checkpoint_before_first_use_writes_the_real_values(tmp_path):
    eager, lazy = _drawn()
    save_checkpoint(lazy, str(tmp_path / "lazy.ckpt"))
    saved = load_checkpoint(str(tmp_path / "lazy.ckpt"))
    np.testing.assert_array_equal(saved["weight"].asnumpy(), eager.weight.asnumpy())
    np.testing.assert_array_equal(saved["bias"].asnumpy(), eager.bias.asnumpy())


def test_load_param_into_net_before_first_use(tmp_path):
    source = nn.Dense(4, 3)
    save_checkpoint(source, str(tmp_path / "w.ckpt"))
    _, lazy = _drawn()
    load_checkpoint(str(tmp_path / "w.ckpt"), lazy)
    assert lazy.weight.deferred_init is None
    np.testing.assert_array_equal(lazy.weight.asnumpy(), source.weight.asnumpy())
    x = ms.Tensor(np.ones((2, 4), np.float32))
    np.testing.assert_array_equal(lazy(x).asnumpy(), source(x).asnumpy())


def test_set_data_before_first_use():
    _, lazy = _drawn()
    lazy.weight.set_data(ms.Tensor(np.full((3, 4), 2.0, np.float32)))
    assert lazy.weight.deferred_init is None
    assert lazy.weight.asnumpy().tolist() == [[2.0] * 4] * 3
    lazy.weight.set_data(ms.Tensor(np.zeros((3, 4), np.float32)))   # writable afterwards
    assert not lazy.weight.asnumpy().any()


def test_load_param_into_net_from_a_dict():
    _, lazy = _drawn()
    load_param_into_net(lazy, {"weight": ms.Tensor(np.ones((3, 4), np.float32))})
    assert lazy.weight.asnumpy().sum() == 12.0


def test_a_clone_before_first_use_draws_the_same_values():
    eager, lazy = _drawn()
    twin = lazy.weight.clone(name="twin")
    np.testing.assert_array_equal(twin.asnumpy(), eager.weight.asnumpy())


def test_set_data_on_a_released_parameter_names_it():
    dense = nn.Dense(2, 2)
    dense.weight.release()
    with pytest.raises(RuntimeError, match=r"Parameter 'weight': set_data on a parameter released"):
        dense.weight.set_data(ms.Tensor(np.zeros((2, 2), np.float32)))
