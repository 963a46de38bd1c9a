"""The one axis normaliser (``ops.axes``) and the errors of the primitives, collectives and
sharding rules that use it."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.communication import LocalCommunicator
from minitorch_dist.ops.axes import normalize_axes, normalize_axis
from minitorch_dist.parallel.comm.collectives import AllGather, AllToAll
from minitorch_dist.parallel.sharding.rules.errors import ShardingError


@pytest.mark.parametrize("axis, expected", [(0, 0), (2, 2), (-1, 2), (-3, 0),
                                            (np.int64(-2), 1)])
def test_a_valid_axis_becomes_non_negative(axis, expected):
    got = normalize_axis(axis, 3, "Op")
    assert got == expected and type(got) is int


@pytest.mark.parametrize("axis", [3, -4, 100])
def test_an_axis_out_of_range_names_owner_axis_and_range(axis):
    with pytest.raises(ValueError, match=rf"^Op: axis {axis} is out of range for a tensor with "
                                         r"3 dimensions \(expected -3 <= axis < 3\)$"):
        normalize_axis(axis, 3, "Op")


def test_the_message_gives_the_shape_when_known():
    with pytest.raises(ValueError, match=r"tensor of shape \(4, 5\) \(expected -2 <= axis < 2\), "
                                         r"which has 2 dimensions$"):
        normalize_axis(2, 2, "Op", shape=(4, 5))
    # a new axis (ExpandDims, Stack): the range counts one more dimension than the shape has
    with pytest.raises(ValueError, match=r"tensor of shape \(4, 5\) \(expected -3 <= axis < 3\)"):
        normalize_axis(3, 3, "Op", shape=(4, 5))


def test_a_0d_tensor_has_no_axis():
    with pytest.raises(ValueError, match=r"expected 0 <= axis < 0"):
        normalize_axis(0, 0, "Op", shape=())


@pytest.mark.parametrize("axis", [1.0, "1", None, True, (1,)])
def test_a_non_int_axis_is_a_type_error(axis):
    with pytest.raises(TypeError, match=r"^Op: axis must be an int, got "):
        normalize_axis(axis, 3, "Op")


def test_error_and_what_choose_the_exception_and_the_argument_name():
    with pytest.raises(ShardingError, match=r"^Gather-op1: begin_norm_axis 5 is out of range.*"
                                            r"expected -2 <= begin_norm_axis < 2"):
        normalize_axis(5, 2, "Gather-op1", error=ShardingError, what="begin_norm_axis")
    with pytest.raises(ShardingError, match="must be an int"):
        normalize_axis("x", 2, "Gather-op1", error=ShardingError)


def test_normalize_axes_sorts_expands_and_rejects_repeats():
    assert normalize_axes((-1, 0), 3, "R") == (0, 2)
    assert normalize_axes([1], 3, "R") == (1,)
    assert normalize_axes(-1, 3, "R") == (2,)
    assert normalize_axes(None, 2, "R") == normalize_axes((), 2, "R") == (0, 1)
    with pytest.raises(ValueError, match=r"R: axis \(0, -3\) names the same dimension twice"):
        normalize_axes((0, -3), 3, "R")
    with pytest.raises(ValueError, match="R: axis 3 is out of range"):
        normalize_axes((0, 3), 3, "R")
    with pytest.raises(TypeError, match="R: axis must be None, an int or a tuple of ints"):
        normalize_axes((0, 1.5), 3, "R")
    with pytest.raises(TypeError, match="R: axis must be None, an int or a tuple of ints"):
        normalize_axes("0", 3, "R")


# ---- the users keep their error types ----------------------------------------------------------
def test_primitives_raise_value_errors_naming_themselves():
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"ExpandDims\S*: axis 3 is out of range for a tensor of "
                                         r"shape \(2, 3\) \(expected -3 <= axis < 3\)"):
        ops.ExpandDims()(x, 3)
    with pytest.raises(ValueError, match=r"ReduceSum\S*: axis -3 .* 2 dimensions"):
        ops.ReduceSum()(x, -3)
    with pytest.raises(ValueError, match=r"CumSum\S*: axis 2 is out of range"):
        ops.CumSum()(x, 2)
    with pytest.raises(ValueError, match=r"LayerNorm\S*: begin_norm_axis 2 is out of range"):
        ops.LayerNorm(begin_norm_axis=2)(x, ms.Tensor(np.ones(3, np.float32)),
                                         ms.Tensor(np.zeros(3, np.float32)))
    with pytest.raises(TypeError, match=r"Softmax\S*: axis must be an int"):
        ops.Softmax(axis=1.5)(x)


def test_collectives_raise_value_errors_naming_the_argument():
    comm = LocalCommunicator.create(1)[0]
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"AllGather\S*: axis 2 is out of range"):
        AllGather(2, group=comm)(x)
    with pytest.raises(ValueError, match=r"AllToAll\S*: concat_axis -3 is out of range"):
        AllToAll(0, -3, group=comm)(x)
