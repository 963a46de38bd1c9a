"""GeneratorDataset's MindSpore semantics, Dataset.reset(), and Model.train resetting datasets."""
import warnings

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.common.dtype as mstype
import minitorch_dist.dataset as ds
from minitorch_dist import nn
from minitorch_dist.dataset import generator as generator_module
from minitorch_dist.train import Model


def first_column(data, epochs=1):
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=epochs)
    return [[int(np.asarray(row[0]).ravel()[0]) for row in it] for _ in range(epochs)]


class Indexed:
    def __init__(self, n=10):
        self.n = n

    def __getitem__(self, i):
        return np.array([i]), np.array([i * 10.0])

    def __len__(self):
        return self.n


class ResettingIterable:
    """MindSpore's "iterable source" example: __iter__ rewinds, __len__ gives the size."""

    def __init__(self, n=5):
        self.n, self.i, self.len_calls = n, 0, 0

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return np.array([self.i - 1]), np.array([0.0])

    def __len__(self):
        self.len_calls += 1
        return self.n


# ---- source kinds, columns, schema ----------------------------------------------------------------
def test_random_access_sources_shuffle_and_shard_like_mindspore():
    ms.set_seed(3)
    assert first_column(ds.GeneratorDataset(Indexed(), ["i", "x"], shuffle=False)) == [list(range(10))]
    shuffled = first_column(ds.GeneratorDataset(Indexed(), ["i", "x"]), epochs=2)   # default: shuffle
    assert sorted(shuffled[0]) == list(range(10)) and shuffled[0] != shuffled[1]
    shards = [first_column(ds.GeneratorDataset(Indexed(), ["i", "x"], num_shards=3, shard_id=k))[0]
              for k in range(3)]
    assert [len(s) for s in shards] == [4, 4, 4]
    assert set(sum(shards, [])) == set(range(10))                       # every row, two twice
    lists = ds.GeneratorDataset([(np.array(5),), (np.array(6),)], "v", shuffle=False)   # a list
    assert first_column(lists) == [[5, 6]]


def test_iterable_source_uses_len_and_iter_each_epoch():
    source = ResettingIterable()
    data = ds.GeneratorDataset(source, ["i", "x"])
    assert data.get_dataset_size() == 5 and source.len_calls == 1      # len(), not a counting pass
    assert first_column(data, epochs=2) == [list(range(5))] * 2


def test_shuffle_on_a_stream_warns_once_and_reads_in_order():
    generator_module._warned_shuffle.clear()
    with pytest.warns(UserWarning, match="needs a random-access source"):
        data = ds.GeneratorDataset(ResettingIterable(), ["i", "x"], shuffle=True)
    assert first_column(data) == [list(range(5))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                  # not a second time
        ds.GeneratorDataset(ResettingIterable(), ["i", "x"], shuffle=True)
        ds.GeneratorDataset(ResettingIterable(), ["i", "x"])            # no shuffle asked: silent


def test_schema_names_and_types_the_columns(tmp_path):
    schema = ds.Schema()
    schema.add_column("idx", de_type=mstype.int32)
    schema.add_column("val", de_type=mstype.float32)
    data = ds.GeneratorDataset(Indexed(3), schema=schema, shuffle=False)
    assert data.get_col_names() == ["idx", "val"]
    idx, val = next(data.create_tuple_iterator(output_numpy=True))
    assert idx.dtype == np.int32 and val.dtype == np.float32
    path = tmp_path / "schema.json"
    path.write_text(schema.to_json())
    assert ds.GeneratorDataset(Indexed(3), schema=str(path)).get_col_names() == ["idx", "val"]
    typed = ds.GeneratorDataset(Indexed(3), ["i", "x"], column_types=[mstype.int64, mstype.float16])
    assert [a.dtype for a in next(typed.create_tuple_iterator(output_numpy=True))] == \
        [np.int64, np.float16]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(column_names=None), ValueError, "column_names must be a non-empty list"),
    (dict(column_names=["a", "a"]), ValueError, "distinct"),
    (dict(column_names=["a", "b"], column_types=[mstype.int32]), ValueError, "1 column_types for 2"),
    (dict(column_names=["a", "b"], num_parallel_workers=0), ValueError, "num_parallel_workers"),
    (dict(column_names=["a", "b"], num_parallel_workers=2.5), ValueError, "num_parallel_workers"),
    (dict(column_names=["a", "b"], python_multiprocessing="yes"), TypeError, "python_multiprocessing"),
    (dict(column_names=["a", "b"], max_rowsize="big"), TypeError, "max_rowsize"),
    (dict(column_names=["a", "b"], sampler=object()), ValueError, "sampler is not supported"),
    (dict(column_names=["a", "b"], num_shards=2, shard_id=2), ValueError, "shard_id"),
    (dict(column_names=["a", "b"], num_shards=2), ValueError, "together"),
    (dict(column_names=["a", "b"], schema=ds.Schema()), ValueError, "no columns"),
    (dict(column_names=["a", "b"], shuffle="no"), ValueError, "shuffle must be"),
])
def test_bad_values(kwargs, error, message):
    with pytest.raises(error, match=message):
        ds.GeneratorDataset(Indexed(), **kwargs)


def test_workers_are_accepted_and_change_nothing():
    one = first_column(ds.GeneratorDataset(Indexed(), ["i", "x"], num_parallel_workers=1, shuffle=False))
    eight = first_column(ds.GeneratorDataset(Indexed(), ["i", "x"], num_parallel_workers=8,
                                             python_multiprocessing=False, max_rowsize=16, shuffle=False))
    assert one == eight


# ---- reset ---------------------------------------------------------------------------------------------
def test_dataset_reset_ends_an_epoch_in_progress_and_keeps_the_epoch_counter():
    data = ds.NumpySlicesDataset({"x": np.arange(6)}, shuffle=True)
    it = data.create_tuple_iterator(output_numpy=True)
    next(it)
    epoch = data.get_epoch()
    data.reset()
    assert data.get_epoch() == epoch                      # exact-resume bookkeeping untouched
    assert sorted(int(x) for (x,) in it) == list(range(6))   # a fresh, whole epoch
    data.set_epoch(4, skip=2)
    data.reset()
    assert data.get_epoch() == 4 and len(list(data)) == 4    # a pending resume survives reset()


class IteratorLikeDataset:
    """A user dataset object in MindSpore style: iterated once per epoch, rewound by reset()."""

    def __init__(self, batches=3):
        self.batches, self.i, self.resets = batches, 0, 0
        rng = np.random.default_rng(0)
        self.x = rng.random((batches, 4, 2)).astype(np.float32)
        self.y = self.x.sum(-1, keepdims=True)

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.batches:
            raise StopIteration
        self.i += 1
        return self.x[self.i - 1], self.y[self.i - 1]

    def reset(self):
        self.resets += 1
        self.i = 0


def test_model_train_resets_the_dataset_between_epochs():
    """Regression: the second epoch of an iterator-like dataset yielded no batches (ValueError)."""
    data = IteratorLikeDataset()
    net = nn.Dense(2, 1)
    steps = []

    class Count(ms.train.Callback):
        def on_train_step_end(self, run_context):
            steps.append(run_context.original_args().cur_epoch_num)

    Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01)).train(3, data, callbacks=[Count()])
    assert steps == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert data.resets == 2                                # between epochs, not before the first


def test_model_train_calls_reset_on_pipeline_datasets_without_changing_them():
    x = np.random.default_rng(1).random((8, 1)).astype(np.float32)
    data = ds.NumpySlicesDataset({"x": x, "y": 2 * x}, shuffle=True).batch(4)
    calls = []
    original = data.reset
    data.reset = lambda: (calls.append(1), original())[1]
    net = nn.Dense(1, 1)
    Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 1e-4)).train(3, data)
    assert len(calls) == 2 and data.get_epoch() == 3
