"""DistOpt refuses the arguments an option would ignore (nothing is silently ignored):
``spars``/``topK``/``corr`` belong to the sparse options, ``clipping`` to fp16. Before, a
``step(grads, "fp32", spars=0.01)`` ran a dense exchange as if nothing was asked."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt


def _step_on_two_ranks(option, **arguments):
    def run(comm):
        w = ms.Parameter(ms.Tensor(np.zeros(4, np.float32)), name="w")
        opt = DistOpt(nn.SGD([w], 1.0), communicator=comm)
        try:
            opt.step([np.ones(4, np.float32)], option, **arguments)
        except ValueError as exc:
            return str(exc), w.asnumpy()
        return None, w.asnumpy()
    return run_ranks(2, run, timeout=20)


@pytest.mark.parametrize("option, arguments, named", [
    ("fp32", {"spars": 0.01}, "spars=0.01"),
    ("fp16", {"topK": True}, "topK=True"),
    ("partialUpdate", {"corr": False}, "corr=False"),
    ("fp32", {"clipping": True}, "clipping only applies to 'fp16'"),
    ("sparseTopK", {"clipping": True}, "clipping only applies to 'fp16'"),
    ("fp16", {"clip_Value": 10}, "clip_Value=10 only applies with clipping=True"),
    ("fp32", {"clip_Value": 10, "clipping": False}, "clip_Value=10 only applies"),
])
def test_an_argument_the_option_ignores_is_refused_on_every_rank(option, arguments, named):
    for message, weights in _step_on_two_ranks(option, **arguments):
        assert message is not None and named in message and repr(option) in message
        np.testing.assert_array_equal(weights, np.zeros(4))      # nothing was applied


@pytest.mark.parametrize("option, arguments", [
    ("fp32", {}), ("fp16", {"clipping": True, "clip_Value": 10}),
    ("sparseTopK", {"spars": 1.0, "topK": True, "corr": False}),
    ("sparseThreshold", {"spars": 0.5}), ("partialUpdate", {}),
    ("fp32", {"topK": False}),                # SINGA's default, spelled out
])
def test_the_arguments_each_option_uses_are_accepted(option, arguments):
    for message, weights in _step_on_two_ranks(option, **arguments):
        assert message is None
        assert weights.any()
