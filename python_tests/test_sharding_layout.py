"""Tensor layouts (``parallel/sharding/layout.py``): rank coordinates, the blocks ranks hold,
communication groups, the repeated-calculation axis, and errors that say what is wrong."""
import numpy as np
import pytest

from minitorch_dist.parallel.sharding import (GroupCache, LayoutError, TensorLayout,
                                              assemble_array, group_ranks, rank_coordinates,
                                              scatter_array, with_repeated_axis)
from minitorch_dist.communication import run_ranks


# ---- the MatMul ((2, 4), (4, 1)) example on 8 devices ------------------------------------------
X = TensorLayout((2, 4, 1), (2, 1), (16, 32))      # rows over the "2", K over the "4"
W = TensorLayout((2, 4, 1), (1, 0), (32, 16))      # K over the "4", N over the "1"
OUT = TensorLayout((2, 4, 1), (2, 0), (16, 16), partial=(1,))   # before the AllReduce


def test_rank_coordinates_are_row_major():
    assert [rank_coordinates((2, 4, 1), r) for r in (0, 3, 4, 7)] == \
        [(0, 0, 0), (0, 3, 0), (1, 0, 0), (1, 3, 0)]
    assert X.rank_coordinates(5) == (1, 1, 0)
    assert X.coordinate(5, 2) == 1 and X.coordinate(5, 1) == 1 and X.coordinate(5, 0) == 0
    with pytest.raises(LayoutError, match="rank 8 is outside the device matrix"):
        X.rank_coordinates(8)


def test_matmul_example_blocks():
    assert X.local_shape() == (8, 8) and W.local_shape() == (8, 16) and OUT.local_shape() == (8, 16)
    for r in range(8):
        row, k = divmod(r, 4)
        assert X.slice_for(r) == (slice(8 * row, 8 * row + 8), slice(8 * k, 8 * k + 8))
        assert W.slice_for(r) == (slice(8 * k, 8 * k + 8), slice(0, 16))
    assert X.splits() == (2, 4) and W.splits() == (4, 1)


def test_groups_along_axes():
    assert X.group_along(1, 5) == (4, 5, 6, 7)        # the AllReduce group of the MatMul
    assert X.group_along(2, 5) == (1, 5)
    assert X.group_along(0, 5) == (5,)
    assert X.group_over((2, 1), 5) == tuple(range(8))
    assert group_ranks((2, 2, 2), (2, 0), 2) == (2, 3, 6, 7)
    with pytest.raises(LayoutError, match="out of range"):
        X.group_along(3, 0)


def test_split_replicated_and_partial_axes():
    assert X.split_axes() == (2, 1) and X.replicated_axes() == () and not X.is_replicated()
    assert W.split_axes() == (1,) and W.replicated_axes() == (2,)     # the mirror group axis
    assert OUT.split_axes() == (2,) and OUT.partial_axes() == (1,) and OUT.replicated_axes() == ()
    whole = TensorLayout.replicated((4, 4), 8)
    assert whole.is_replicated() and whole.replicated_axes() == (0,)
    assert not whole.replace(partial=(0,)).is_replicated()


def test_tuple_map_splits_one_dimension_over_several_axes():
    major = TensorLayout((2, 4), ((1, 0), -1), (16, 3))   # the "2" major: rank order
    minor = TensorLayout((2, 4), ((0, 1), -1), (16, 3))   # the "4" major
    assert major.local_shape() == (2, 3)
    assert [major.shard_index(r, 0) for r in range(8)] == list(range(8))
    assert [minor.shard_index(r, 0) for r in range(8)] == [0, 2, 4, 6, 1, 3, 5, 7]
    assert major.split_axes() == (1, 0)
    assert str(minor) == "layout(dev=[2,4], map=[(0,1),-1], shape=(16,3))"


def test_repeated_calculation_axis():
    assert with_repeated_axis((2, 2), 8) == (2, 2, 2)
    assert with_repeated_axis((2, 2), 8, right=False) == (2, 2, 2)
    assert with_repeated_axis((8,), 8) == (8,)
    left = TensorLayout.from_strategy((4, 1), (16, 16), world=8, repeated_right=False)
    assert left.device_matrix == (2, 4, 1) and left.tensor_map == (1, 0)
    assert left.replicated_axes() == (2,)
    # rank r and r + 4 hold the same block: the leftmost axis is the copies
    assert all(left.slice_for(r) == left.slice_for(r + 4) for r in range(4))
    right = TensorLayout.from_strategy((4, 1), (16, 16), world=8)     # MindSpore's default
    assert right.device_matrix == (4, 1, 2) and right.tensor_map == (2, 1)
    assert all(right.slice_for(2 * r) == right.slice_for(2 * r + 1) for r in range(4))
    assert TensorLayout.from_strategy((2, 4), (16, 32)) == TensorLayout((2, 4), (1, 0), (16, 32))
    with pytest.raises(LayoutError, match="3 must divide 8"):
        with_repeated_axis((3,), 8)
    with pytest.raises(LayoutError, match="one positive split count per dimension"):
        TensorLayout.from_strategy((2,), (4, 4))


def test_str_equality_and_hash():
    assert str(X) == "layout(dev=[2,4,1], map=[2,1], shape=(16,32))"
    assert str(OUT) == "layout(dev=[2,4,1], map=[2,0], shape=(16,16), partial=[1])"
    assert str(TensorLayout((2,), (0,), (4,))) == "layout(dev=[2], map=[0], shape=(4,))"
    same = TensorLayout([2, 4, 1], [2, (1,)], [16, 32])
    assert same == X and hash(same) == hash(X) and same.tensor_map == (2, 1)
    assert TensorLayout((2, 4), (-1, ()), (2, 2)).tensor_map == (-1, -1)
    assert X != X.replace(partial=(0,))
    assert len({X, same, W}) == 2


@pytest.mark.parametrize("args, message", [
    (((2, 0), (1, 0), (4, 4)), "device_matrix must be a non-empty tuple of positive ints"),
    (((), (), ()), "device_matrix must be a non-empty"),
    (((2, 4), (1, 0, -1), (4, 4)), "needs one entry per dimension of the shape"),
    (((2, 4), (2, 0), (4, 4)), "axis 2 is out of range: a device matrix with 2 axes"),
    (((2, 4), (-2, 0), (4, 4)), "out of range"),
    (((2, 4), (0, 0), (4, 4)), "axis 0 is used twice"),
    (((2, 4), ((1, 1), -1), (4, 4)), "axis 1 is used twice"),
    (((2, 4), (1, 0), (3, 4)), "dimension 0 of shape \\(3, 4\\) has size 3, which is not "
                               "divisible into 2 equal slices"),
    (((2, 4), ((1, 0), -1), (4, 4)), "not divisible into 8 equal slices"),
    (((2, 4), (1, 0), (4, -4)), "shape must be a tuple of non-negative ints"),
])
def test_bad_layouts_are_rejected_with_clear_errors(args, message):
    with pytest.raises(LayoutError, match=message):
        TensorLayout(*args)


def test_bad_partial_axes():
    with pytest.raises(LayoutError, match="both partial and splits dimension 0"):
        TensorLayout((2, 4), (1, -1), (4, 4), partial=(1,))
    with pytest.raises(LayoutError, match="repeat an axis"):
        TensorLayout((2, 4), (-1, -1), (4, 4), partial=(0, 0))
    with pytest.raises(LayoutError, match="partial axis 5 is out of range"):
        TensorLayout((2, 4), (-1, -1), (4, 4), partial=(5,))
    assert TensorLayout((2, 4), (-1, -1), (4, 4), partial=1).partial == (1,)
    assert TensorLayout((2, 4), (-1, -1), (4, 4), partial=[0, 1]).partial == (1, 0)


def test_scatter_and_assemble_round_trip():
    rng = np.random.default_rng(0)
    for layout in (X, W, OUT, TensorLayout((2, 2, 2), ((0, 2), -1, 1), (8, 3, 4))):
        full = rng.standard_normal(layout.shape)
        parts = scatter_array(full, layout)
        assert all(p.shape == layout.local_shape() for p in parts)
        np.testing.assert_array_equal(assemble_array(parts, layout), full)
    parts = scatter_array(np.ones((16, 16)), OUT)       # partial: one rank per group holds it
    assert [float(p.sum()) for p in parts] == [128.0, 0, 0, 0] * 2


def test_assemble_catches_disagreeing_copies_and_bad_shapes():
    parts = scatter_array(np.arange(32.0 * 16).reshape(32, 16), W)
    parts[5] = parts[5] + 1.0                           # rank 5 is a copy of rank 1
    with pytest.raises(LayoutError, match="ranks 1 and 5 should hold copies"):
        assemble_array(parts, W)
    assemble_array(parts, W, check=False)
    with pytest.raises(LayoutError, match="rank 0 holds shape"):
        assemble_array([np.zeros((1, 1))] * 8, W)
    with pytest.raises(LayoutError, match="got 2 local arrays for 8 devices"):
        assemble_array([np.zeros((8, 16))] * 2, W)
    with pytest.raises(LayoutError, match="does not match"):
        W.shard(np.zeros((4, 4)), 0)


# ---- communication groups ----------------------------------------------------------------------
def test_group_cache_creates_each_group_once_and_eagerly_without_deadlock():
    def body(comm):
        cache = GroupCache(8, comm.rank, comm).create_all((2, 4, 1))
        # every rank is in one group per non-empty subset of the axes of size > 1
        groups = cache.get(X.group_along(1, comm.rank))
        assert cache.get(X.group_along(1, comm.rank)) is groups and groups.size == 4
        assert cache(tuple(range(8))) is comm
        total = groups.allreduce(np.array([float(comm.rank)]))
        return len(cache), float(total[0])
    results = run_ranks(8, body, timeout=30)
    assert [n for n, _ in results] == [3] * 8
    assert [t for _, t in results] == [6.0] * 4 + [22.0] * 4


def test_group_cache_errors():
    cache = GroupCache(4, 1, parent=object())
    with pytest.raises(ValueError, match="rank 1 asked for the group \\(0, 2\\)"):
        cache.get((0, 2))
    with pytest.raises(ValueError, match="spans 8 devices, the job has 4"):
        cache.create_all((2, 4))


def test_row_blocks_of_different_sizes():
    """A field-sliced table's rows come in blocks of MindSpore's manual_split sizes."""
    from minitorch_dist.parallel.sharding.checkpoint import layout_from_json
    from minitorch_dist.parallel.sharding.redistribution import plan_redistribution
    layout = TensorLayout((2, 2), (1, -1), (5, 3), row_blocks=(3, 2))    # 2 copies of each block
    assert [layout.slice_for(r)[0] for r in range(4)] == [slice(0, 3), slice(0, 3), slice(3, 5),
                                                         slice(3, 5)]
    assert layout.local_shape(2) == (2, 3) and "row_blocks=[3,2]" in str(layout)
    with pytest.raises(LayoutError, match="depends on the rank"):
        layout.local_shape()
    full = np.arange(15.0).reshape(5, 3)
    np.testing.assert_array_equal(assemble_array(scatter_array(full, layout), layout), full)
    with pytest.raises(LayoutError, match="must be 2 positive sizes adding up to dimension 0's 5"):
        TensorLayout((2,), (0, -1), (5, 3), row_blocks=(4, 2))
    with pytest.raises(LayoutError, match="need dimension 0 to be split"):
        TensorLayout((2,), (-1, 0), (5, 2), row_blocks=(3, 2))
    with pytest.raises(LayoutError, match="feed only the lookup"):
        plan_redistribution(layout, TensorLayout((2, 2), (-1, -1), (5, 3)))

    class Param:
        sharding_layout, sharding_rank = layout, 1
    from minitorch_dist.parallel.sharding.checkpoint import layout_json
    assert layout_from_json(layout_json(Param())) == (layout, 1)
