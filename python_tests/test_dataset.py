"""Dataset pipelines of minitorch_dist.dataset: the seed MNIST pipeline, sharding, batching,
shuffling, repeat/take, the generator and NumPy sources, and the iterators."""
import time

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import random as framework_random
from minitorch_dist.dataset import engine


@pytest.fixture(autouse=True)
def fresh_seeds():
    """Tests set seeds; put the framework and dataset seeds back afterwards."""
    saved = dict(framework_random._process)
    ds.config.set_seed(None)
    yield
    framework_random._process.update(saved)
    ds.config.set_seed(None)


def make_mnist(folder, n, prefix="train"):
    """n 28x28 images whose pixel [0, 0] is the sample index and label = index % 10."""
    images = np.random.default_rng(n).integers(0, 256, (n, 28, 28))
    images[:, 0, 0] = np.arange(n)
    ds.write_mnist_idx(folder, images, np.arange(n) % 10, prefix=prefix)
    return images


def seed_pipeline(folder, batch_size, rank_size=None, rank_id=None):
    """The seed script's create_dataset, with only its import changed."""
    dataset = ds.MnistDataset(str(folder), num_shards=rank_size, shard_id=rank_id)
    image_transforms = [ds.vision.Rescale(1.0 / 255.0, 0),
                        ds.vision.Normalize(mean=(0.1307,), std=(0.3081,)),
                        ds.vision.HWC2CHW()]
    label_transform = ds.transforms.TypeCast(ms.int32)
    dataset = dataset.map(image_transforms, 'image')
    dataset = dataset.map(label_transform, 'label')
    return dataset.batch(batch_size)


def column(dataset, index=0, **kwargs):
    """Every value of one column over an epoch, as a list of Python numbers (or arrays)."""
    return [row[index].tolist() for row in dataset.create_tuple_iterator(output_numpy=True, **kwargs)]


def ids(n, shuffle=False, **kwargs):
    return ds.NumpySlicesDataset({"id": np.arange(n)}, shuffle=shuffle, **kwargs)


# ---- the seed pipeline --------------------------------------------------------------------------
def test_seed_pipeline_shapes_dtypes_and_values(tmp_path):
    images = make_mnist(tmp_path, 70)
    data = seed_pipeline(tmp_path, 32, rank_size=2, rank_id=1)
    assert data.get_dataset_size() == 2 and data.get_col_names() == ["image", "label"]
    batches = list(data)
    assert [tuple(b[0].shape) for b in batches] == [(32, 1, 28, 28), (3, 1, 28, 28)]
    for image, label in batches:
        assert isinstance(image, ms.Tensor) and image.dtype == np.float32
        assert tuple(label.shape) == (len(image),) and label.dtype == np.int32
        x, y = image.asnumpy(), label.asnumpy()
        index = np.rint(x[:, 0, 0, 0] * 0.3081 * 255 + 0.1307 * 255).astype(int)   # pixel [0, 0]
        np.testing.assert_array_equal(y, index % 10)                                 # pairs intact
        want = (images[index][:, None, :, :] / 255.0 - 0.1307) / 0.3081              # float64 reference
        np.testing.assert_allclose(x, want, rtol=1e-6, atol=1e-6)


def test_seed_pipeline_is_vectorized_and_fast(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (60000, 28, 28), dtype=np.uint8)
    ds.write_mnist_idx(tmp_path, images, np.zeros(60000, dtype=np.uint8))
    data = seed_pipeline(tmp_path, 32)
    assert data.children[0]._block_native() and data.children[0].children[0]._block_native()
    timings = []
    for _ in range(2):                       # best of two epochs: robust to a busy machine
        start = time.perf_counter()
        count = sum(1 for _ in data)
        timings.append(time.perf_counter() - start)
        assert count == 1875
    elapsed = min(timings)
    assert elapsed < 2.0, f"one epoch of 60,000 samples took {elapsed:.2f} s (about 0.2 s expected)"


# ---- sharding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_cover_every_sample_once_when_divisible(shuffle):
    shards = [column(ids(12, shuffle=shuffle, num_shards=4, shard_id=k)) for k in range(4)]
    assert [len(s) for s in shards] == [3, 3, 3, 3]
    assert sorted(sum(shards, [])) == list(range(12))
    if not shuffle:
        assert shards[1] == [1, 5, 9]                           # sample i goes to shard i % 4


@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_pad_to_equal_length_when_not_divisible(shuffle):
    shards = [column(ids(10, shuffle=shuffle, num_shards=4, shard_id=k)) for k in range(4)]
    assert [len(s) for s in shards] == [3, 3, 3, 3]             # ceil(10 / 4)
    union = sum(shards, [])
    assert set(union) == set(range(10)) and len(union) == 12    # two samples repeated as padding
    if not shuffle:
        assert shards[2] == [2, 6, 0] and shards[3] == [3, 7, 1]  # short shards wrap to the start


def test_shards_agree_on_the_shuffle_and_reshuffle_per_epoch(tmp_path):
    make_mnist(tmp_path, 40)
    ranks = [ds.MnistDataset(tmp_path, num_shards=2, shard_id=k) for k in range(2)]

    def sample_ids(rank):       # pixel [0, 0] holds the sample index
        return [int(image[0, 0, 0]) for image, _ in rank.create_tuple_iterator(output_numpy=True)]

    epoch1 = [sample_ids(r) for r in ranks]
    epoch2 = [sample_ids(r) for r in ranks]
    assert sorted(epoch1[0] + epoch1[1]) == list(range(40))     # one permutation shared by both ranks
    assert sorted(epoch2[0] + epoch2[1]) == list(range(40))
    assert epoch1[0] != epoch2[0]                                # the next epoch reshuffles


def test_bad_shard_arguments():
    with pytest.raises(ValueError, match=r"shard_id must be an integer in "
                                         r"\[0, num_shards - 1\] = \[0, 3\], got 4"):
        ids(8, num_shards=4, shard_id=4)
    with pytest.raises(ValueError, match="must be given together"):
        ids(8, num_shards=4)
    with pytest.raises(ValueError, match="must be given together"):
        ids(8, shard_id=0)
    with pytest.raises(ValueError, match="num_shards must be a positive integer"):
        ids(8, num_shards=0, shard_id=0)
    with pytest.raises(ValueError, match="shard_id"):
        ids(8, num_shards=2, shard_id=-1)


def test_num_samples_caps_each_shard():
    assert column(ids(10, num_samples=4)) == [0, 1, 2, 3]
    assert column(ids(10, num_shards=2, shard_id=1, num_samples=2)) == [1, 3]
    assert ids(10, num_shards=3, shard_id=0, num_samples=100).get_dataset_size() == 4


# ---- batch ------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop, sizes", [(False, [4, 4, 2]), (True, [4, 4])])
def test_batch_sizes_and_drop_remainder(drop, sizes):
    data = ids(10).batch(4, drop_remainder=drop)
    assert [len(b) for b in column(data)] == sizes
    assert data.get_dataset_size() == len(sizes) and data.get_batch_size() == 4
    assert sum(column(data), []) == list(range(sum(sizes)))


@pytest.mark.parametrize("block_rows", [1, 3, 4, 7, 100])
def test_block_rebatching_equals_row_stacking(monkeypatch, block_rows):
    monkeypatch.setattr(engine, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr("minitorch_dist.dataset.array_source.BLOCK_ROWS", block_rows)
    data = np.arange(23 * 2).reshape(23, 2)
    blocks = ds.NumpySlicesDataset({"x": data}, shuffle=False).batch(5)
    rows = ds.NumpySlicesDataset({"x": data}, shuffle=False).map(lambda x: x).batch(5)  # row path
    assert not rows.children[0]._block_native()
    got, want = column(blocks), column(rows)
    assert got == want and len(got) == 5
    assert got[-1] == data[20:].tolist()


def test_batch_rejects_bad_sizes_and_ragged_rows():
    for bad in (0, -2, 2.5, None):
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            ids(4).batch(bad)
    ragged = ds.GeneratorDataset(lambda: iter([np.zeros(2), np.zeros(3)]), ["x"]).batch(2)
    with pytest.raises(ValueError, match=r"column 'x' have different shapes \[\(2,\), \(3,\)\]"):
        list(ragged)


# ---- shuffle, repeat, take --------------------------------------------------------------------
def test_source_shuffle_follows_the_seed():
    ms.set_seed(3)
    a1, a2 = column(ids(30, shuffle=True)), column(ids(30, shuffle=True))
    data = ids(30, shuffle=True)
    epoch1, epoch2 = column(data), column(data)
    assert a1 == a2 == epoch1 and sorted(a1) == list(range(30)) and a1 != list(range(30))
    assert epoch2 != epoch1 and sorted(epoch2) == list(range(30))
    ms.set_seed(4)
    assert column(ids(30, shuffle=True)) != a1
    ds.config.set_seed(3)                                   # the dataset seed overrides
    ms.set_seed(99)
    assert column(ids(30, shuffle=True)) == a1


def test_shuffle_op_is_a_seeded_buffered_permutation():
    ms.set_seed(0)
    full = column(ids(50).shuffle(50))
    assert sorted(full) == list(range(50)) and full != list(range(50))
    assert column(ids(50).shuffle(50)) == full
    local = column(ids(50).shuffle(4))
    assert sorted(local) == list(range(50))
    assert all(v <= p + 3 for p, v in enumerate(local))     # a 4-row buffer only looks 3 rows ahead
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 2"):
        ids(5).shuffle(1)


def test_shuffle_op_block_and_row_paths_agree(monkeypatch):
    monkeypatch.setattr("minitorch_dist.dataset.array_source.BLOCK_ROWS", 7)
    block_path = ids(40).shuffle(9)
    row_path = ids(40).map(lambda x: x).shuffle(9)
    assert block_path._block_native() and not row_path._block_native()
    assert column(block_path) == column(row_path)


def test_repeat_runs_passes_each_reshuffled():
    ms.set_seed(1)
    data = ids(6, shuffle=True).repeat(3)
    values = column(data)
    assert data.get_dataset_size() == 18 and len(values) == 18
    passes = [values[i:i + 6] for i in (0, 6, 12)]
    assert all(sorted(p) == list(range(6)) for p in passes)
    assert len({tuple(p) for p in passes}) > 1
    assert column(ids(5).repeat().take(12)) == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert column(ids(5).repeat(2).batch(4)) == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4]]
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="repeat: count"):
            ids(3).repeat(bad)


def test_take():
    assert column(ids(10).take(3)) == [0, 1, 2] and ids(10).take(3).get_dataset_size() == 3
    assert column(ids(10).take(50)) == list(range(10))
    assert column(ids(10).map(lambda x: x * 2).take(2)) == [0, 2]
    with pytest.raises(ValueError, match="take: count"):
        ids(3).take(0)


# ---- map ----------------------------------------------------------------------------------------
def test_vectorized_map_equals_per_sample_map():
    images = np.random.default_rng(5).integers(0, 256, (37, 6, 5, 3)).astype(np.uint8)
    ops = [ds.vision.Rescale(1 / 255, -0.5), ds.vision.Normalize((0.1, 0.2, 0.3), (0.5, 0.25, 2.0)),
           ds.vision.HWC2CHW()]
    fast = ds.NumpySlicesDataset({"image": images}, shuffle=False).map(ops)
    slow = ds.NumpySlicesDataset({"image": images}, shuffle=False).map([lambda x: x] + ops)
    assert fast._block_native() and not slow._block_native()
    got, want = column(fast.batch(8)), column(slow.batch(8))
    assert np.array_equal(np.concatenate(got), np.concatenate(want))          # bit-identical
    assert np.asarray(got[0]).shape == (8, 3, 6, 5)


def test_map_columns_rename_multi_output_and_order():
    data = ds.NumpySlicesDataset({"a": np.arange(4), "b": np.arange(4) * 10, "c": -np.arange(4)},
                                 shuffle=False)
    swapped = data.map(lambda a, b: (b, a), ["a", "b"])
    assert swapped.get_col_names() == ["a", "b", "c"] and column(swapped, 0) == [0, 10, 20, 30]
    summed = data.map(lambda a, b: a + b, ["a", "b"], output_columns="s")
    assert summed.get_col_names() == ["s", "c"] and column(summed, 0) == [0, 11, 22, 33]
    split = data.map(lambda c: (c, c * c), "c", ["neg", "square"])
    assert split.get_col_names() == ["a", "b", "neg", "square"] and column(split, 3) == [0, 1, 4, 9]
    ordered = data.map(ds.transforms.TypeCast("float32"), "b", column_order=["c", "b", "a"])
    rows = list(ordered.create_tuple_iterator(output_numpy=True))
    assert ordered.get_col_names() == ["c", "b", "a"] and rows[1][1].dtype == np.float32
    assert column(data.map(lambda a: a + 1), 0) == [1, 2, 3, 4]      # default: first column
    compose = ds.transforms.Compose([ds.vision.Rescale(2, 1), ds.transforms.TypeCast("int32")])
    composed = data.map(compose, "b")
    assert composed._block_native() and column(composed, 1) == [1, 21, 41, 61]


def test_map_rejects_bad_arguments():
    data = ds.NumpySlicesDataset({"image": np.zeros((4, 2)), "label": np.zeros(4)})
    with pytest.raises(ValueError, match=r"unknown input column\(s\) \['img'\]; "
                                         r"the dataset has columns \['image', 'label'\]"):
        data.map(ds.vision.Rescale(1, 0), "img")
    with pytest.raises(TypeError, match="must be callable"):
        data.map([ds.vision.Rescale(1, 0), "HWC2CHW"], "image")
    with pytest.raises(ValueError, match="operations is empty"):
        data.map([], "image")
    with pytest.raises(ValueError, match="already exist"):
        data.map(lambda x: x, "image", "label")
    with pytest.raises(ValueError, match=r"returned 2 value\(s\) but the output columns are "
                                         r"\['image'\]"):
        list(data.map(lambda x: (x, x), "image"))


# ---- generator and NumPy sources ------------------------------------------------------------------
def test_generator_from_a_generator_function_like_the_seed():
    inputs = np.random.default_rng(1).random((16, 8)).astype(np.float32)
    labels = np.random.default_rng(2).random((16, 4)).astype(np.float32)

    def generate():
        for _ in range(5):
            yield inputs, labels

    data = ds.GeneratorDataset(generate, ["input", "label"])
    assert data.get_dataset_size() == 5
    rows = list(data)
    assert len(rows) == 5 and tuple(rows[0][0].shape) == (16, 8) and rows[0][1].dtype == np.float32
    np.testing.assert_array_equal(rows[4][1].asnumpy(), labels)
    assert len(list(data)) == 5                                     # called again for epoch 2


class OnlyIterable:
    def __iter__(self):
        return iter([(np.array(i), np.array(-i)) for i in range(7)])


class RandomAccess:
    def __getitem__(self, index):
        return np.array(index), np.array(index * index)

    def __len__(self):
        return 9


def test_generator_source_kinds_shuffle_and_shards():
    ms.set_seed(2)
    assert column(ds.GeneratorDataset(OnlyIterable(), ["x", "y"]), 1) == [0, -1, -2, -3, -4, -5, -6]
    shuffled = column(ds.GeneratorDataset(RandomAccess(), ["i", "sq"]), 1)
    assert sorted(shuffled) == [i * i for i in range(9)] and shuffled != sorted(shuffled)
    stream_shards = [column(ds.GeneratorDataset(OnlyIterable(), ["x", "y"], num_shards=3, shard_id=k))
                     for k in range(3)]
    indexed_shards = [column(ds.GeneratorDataset(RandomAccess(), ["i", "sq"], shuffle=False,
                                                 num_shards=4, shard_id=k)) for k in range(4)]
    assert stream_shards == [[0, 3, 6], [1, 4, 0], [2, 5, 1]]      # same padding rule as arrays
    assert indexed_shards[3] == [3, 7, 2]
    padded = ds.GeneratorDataset(OnlyIterable(), ["x", "y"], num_shards=3, shard_id=2)
    assert padded.get_dataset_size() == 3


def test_generator_one_shot_iterator_single_column_and_errors():
    once = ds.GeneratorDataset((np.full(2, i) for i in range(3)), "x", num_samples=2)
    assert column(once) == [[0, 0], [1, 1]]
    assert column(once) == [[0, 0], [1, 1]]                         # kept for the next epoch
    with pytest.raises(ValueError, match=r"row of 1 value\(s\) but column_names has 2"):
        list(ds.GeneratorDataset(lambda: iter([np.zeros(1)]), ["x", "y"]))
    with pytest.raises(TypeError, match="source must be callable"):
        ds.GeneratorDataset(42, ["x"])
    with pytest.raises(ValueError, match="column_names"):
        ds.GeneratorDataset(RandomAccess(), [])


def test_numpy_slices_forms():
    as_dict = ds.NumpySlicesDataset({"x": np.arange(3), "y": np.ones((3, 2))}, shuffle=False)
    assert as_dict.get_col_names() == ["x", "y"] and column(as_dict, 1)[0] == [1.0, 1.0]
    as_tuple = ds.NumpySlicesDataset((np.arange(3), np.arange(3) * 2), shuffle=False)
    assert as_tuple.get_col_names() == ["column_0", "column_1"] and column(as_tuple, 1) == [0, 2, 4]
    as_list = ds.NumpySlicesDataset([[1, 2], [3, 4]], column_names=["pair"], shuffle=False)
    assert column(as_list) == [[1, 2], [3, 4]]                      # a list is one column
    with pytest.raises(ValueError, match=r"2 column\(s\) of data but 1 column name"):
        ds.NumpySlicesDataset((np.arange(3), np.arange(3)), ["x"])
    with pytest.raises(ValueError, match="same number of rows"):
        ds.NumpySlicesDataset({"x": np.arange(3), "y": np.arange(4)})


# ---- iterators and transforms -----------------------------------------------------------------------
def test_iterators_epochs_dicts_and_dtypes(tmp_path):
    make_mnist(tmp_path, 5)
    raw = ds.MnistDataset(tmp_path, shuffle=False)
    image, label = next(iter(raw))
    assert label.dtype == np.int64 and int(label.asnumpy()) == 0   # uint32 widens for Tensor
    assert raw.output_types() == [np.uint8, np.uint32] and raw.output_shapes() == [[28, 28, 1], []]
    rows = list(raw.create_dict_iterator(output_numpy=True))
    assert list(rows[0]) == ["image", "label"] and rows[3]["label"].dtype == np.uint32
    iterator = raw.create_tuple_iterator(columns=["label"], num_epochs=2, output_numpy=True)
    assert [int(y) for (y,) in iterator] == [0, 1, 2, 3, 4]
    assert len(list(iterator)) == 5
    with pytest.raises(RuntimeError, match="num_epochs=2"):
        next(iterator)
    with pytest.raises(ValueError, match="num_epochs"):
        raw.create_tuple_iterator(num_epochs=0)
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['lbl'\]"):
        raw.create_tuple_iterator(columns="lbl")


def test_transforms_against_numpy_references_and_errors():
    image = np.random.default_rng(3).integers(0, 256, (4, 5, 3)).astype(np.uint8)
    out = ds.vision.Normalize((10, 20, 30), (2, 4, 8))(image)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, (image - np.array([10, 20, 30])) / np.array([2, 4, 8]), rtol=1e-6)
    chw = ds.vision.Normalize((10, 20, 30), (2, 4, 8), is_hwc=False)(image.transpose(2, 0, 1))
    np.testing.assert_allclose(chw, out.transpose(2, 0, 1), rtol=1e-6)
    np.testing.assert_array_equal(ds.vision.HWC2CHW()(image), image.transpose(2, 0, 1))
    assert ds.vision.HWC2CHW()(np.zeros((4, 5))).shape == (1, 4, 5)
    assert ds.transforms.TypeCast(ms.int32)(np.uint32(9)).dtype == np.int32
    with pytest.raises(ValueError, match=r"Normalize: the image has 3 channel\(s\) "
                                         r"\(shape \(4, 5, 3\)\) but mean/std have 1"):
        ds.vision.Normalize((0.5,), (0.5,))(image)
    with pytest.raises(ValueError, match="std must be positive"):
        ds.vision.Normalize((0.5,), (0.0,))
    with pytest.raises(ValueError, match="equally long"):
        ds.vision.Normalize((0.5, 0.5), (1.0,))
    with pytest.raises(ValueError, match=r"HWC2CHW: expected an image of shape \(H, W, C\)"):
        ds.vision.HWC2CHW()(np.zeros(5))
    with pytest.raises(TypeError, match="Rescale: rescale must be a real number"):
        ds.vision.Rescale("1/255", 0)
    with pytest.raises(TypeError, match="TypeCast: cannot interpret"):
        ds.transforms.TypeCast("not-a-type")


def test_tensors_land_on_the_default_device(virtual_gpu):
    ms.set_context(device_target="GPU")
    data = ds.NumpySlicesDataset({"x": np.ones((6, 3), np.float32)}, shuffle=False).batch(4)
    (first,), (second,) = list(data)
    assert first.device == virtual_gpu and tuple(second.shape) == (2, 3)
    assert ms.transfer_stats()["host_to_device"] == 6 * 3 * 4
