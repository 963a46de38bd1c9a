"""``Primitive.run`` in three steps (placement, forward, recording) and the one Tensor hook it
calls before reading an input (``Tensor.prepare_use``, overridden by ``Parameter``)."""
import inspect

import numpy as np

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.common.initializer import initializer
from minitorch_dist.nn.utils import no_init_parameters
from minitorch_dist.ops import primitive


class Watched(ms.Tensor):
    """A tensor that records every ``prepare_use`` call."""

    def prepare_use(self, device, owner):
        self.__dict__.setdefault("uses", []).append((device, owner))
        super().prepare_use(device, owner)


def test_dispatch_asks_each_input_tensor_through_one_hook():
    add = ops.Add()
    x = Watched(np.ones(2, np.float32))
    out = add(x, 1.0)
    assert x.uses == [(x.device, add)]
    assert out.asnumpy().tolist() == [2.0, 2.0]


def test_the_primitive_does_not_know_parameters():
    code = "\n".join(line for line in inspect.getsource(primitive).splitlines()
                     if not line.strip().startswith(("#", '"', "``")))
    assert "isinstance(x, Parameter" not in code and "_unplaced" not in code
    assert "init_data" not in code and "deferred_init" not in code


def test_a_deferred_plain_tensor_draws_its_values_at_first_use():
    """Regression: an initializer's tensor made under no_init_parameters and used directly
    in an op raised AttributeError (only Parameter had ``init_data``)."""
    ms.set_seed(3)
    want = initializer("normal", [3, 2], ms.float32).asnumpy()
    ms.set_seed(3)
    with no_init_parameters():
        lazy = initializer("normal", [3, 2], ms.float32)
    assert lazy.deferred_init is not None
    np.testing.assert_array_equal(ops.Mul()(lazy, 1.0).asnumpy(), want)
    assert lazy.deferred_init is None
    np.testing.assert_array_equal(lazy.asnumpy(), want)

