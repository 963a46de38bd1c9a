"""``Dataset.project``, ``rename``, ``zip`` (and ``ds.zip``), ``concat`` (and ``+``)."""
import numpy as np
import pytest

import minitorch_dist.dataset as ds


def _rows(data):
    return [tuple(np.asarray(v).tolist() for v in row)
            for row in data.create_tuple_iterator(output_numpy=True)]


def _data(n=6, shuffle=False, **columns):
    columns = columns or {"x": np.arange(n), "y": np.arange(n) * 10}
    return ds.NumpySlicesDataset(columns, shuffle=shuffle)


def test_project_keeps_and_orders_columns():
    data = _data().project(["y", "x"])
    assert data.get_col_names() == ["y", "x"]
    assert _rows(data)[:2] == [(0, 0), (10, 1)]
    assert _rows(_data().project("y").batch(4)) == [([0, 10, 20, 30],), ([40, 50],)]


def test_rename_changes_names_only():
    data = _data().rename(["x"], ["image"])
    assert data.get_col_names() == ["image", "y"]
    assert _rows(data) == _rows(_data())
    assert _data().rename("x", "z").map(lambda v: v + 1, "z").get_col_names() == ["z", "y"]


def test_zip_puts_columns_side_by_side_up_to_the_shortest():
    a, b = _data(6), _data(4, z=np.arange(4) * -1)
    for zipped in (a.zip(b), ds.zip((a, b))):
        assert zipped.get_col_names() == ["x", "y", "z"]
        assert zipped.get_dataset_size() == 4
        assert _rows(zipped) == [(i, 10 * i, -i) for i in range(4)]


def test_concat_reads_one_dataset_after_the_other():
    a, b = _data(3), _data(2, x=np.arange(100, 102), y=np.arange(2))
    for joined in (a.concat(b), a + b, a.concat([b])):
        assert joined.get_dataset_size() == 5
        assert [r[0] for r in _rows(joined)] == [0, 1, 2, 100, 101]
    three = a.concat([b, b])
    assert three.get_dataset_size() == 7


def test_shuffles_under_zip_and_concat_are_seeded_per_epoch():
    a = _data(8, shuffle=True)
    joined = (a + a).shuffle(16)
    first = [r[0] for r in _rows(joined)]
    assert sorted(first) == sorted(list(range(8)) * 2)
    again = (_data(8, shuffle=True) + _data(8, shuffle=True)).shuffle(16)
    assert [r[0] for r in _rows(again)] == first           # same seed, same order
    assert [r[0] for r in _rows(joined)] != first            # the next epoch reshuffles


@pytest.mark.parametrize("call, error, words", [
    (lambda: _data().project(["nope"]), ValueError, ["project", "nope", "['x', 'y']"]),
    (lambda: _data().project([]), TypeError, ["project", "columns"]),
    (lambda: _data().project(["x", "x"]), ValueError, ["twice"]),
    (lambda: _data().rename(["x", "y"], ["a"]), ValueError, ["rename", "equally long"]),
    (lambda: _data().rename(["x"], ["y"]), ValueError, ["rename", "twice"]),
    (lambda: _data().rename(["q"], ["a"]), ValueError, ["rename", "q"]),
    (lambda: _data().zip(_data()), ValueError, ["zip", "'x'", "rename"]),
    (lambda: _data().zip([1]), TypeError, ["zip", "datasets"]),
    (lambda: ds.zip(_data()), ValueError, ["zip", "two"]),
    (lambda: _data().concat(_data(z=np.arange(3))), ValueError, ["concat", "['z']", "['x', 'y']"]),
    (lambda: _data() + 3, TypeError, ["concat"]),
])
def test_bad_input_is_a_clear_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(word in str(info.value) for word in words), str(info.value)
