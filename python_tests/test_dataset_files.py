"""File readers of minitorch_dist.dataset: IDX/MNIST, CIFAR-10 binaries, scikit-learn digits."""
import os
import struct
import sys

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.dataset.cifar10 import read_cifar10_bin

MNIST_NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def numpy_rows(dataset):
    return [tuple(row) for row in dataset.create_tuple_iterator(output_numpy=True)]


def pack_idx_by_hand(array):
    """Independent IDX encoder (uint8 only), written straight from the format description."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + bytes(array.astype(np.uint8).ravel().tolist())


# ---- IDX ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "float32", "float64"])
@pytest.mark.parametrize("name", ["data-idx", "data-idx.gz"])
def test_idx_round_trip(tmp_path, dtype, name):
    array = (np.arange(24).reshape(2, 3, 4) * 3 - 20).astype(dtype) if dtype != "uint8" \
        else np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / name
    ds.write_idx(path, array)
    back = ds.read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    with open(path, "rb") as f:
        assert (f.read(2) == b"\x1f\x8b") == name.endswith(".gz")


def test_idx_writer_matches_hand_packed_bytes(tmp_path):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 9
    ds.write_idx(tmp_path / "x", images)
    assert (tmp_path / "x").read_bytes() == pack_idx_by_hand(images)
    assert (tmp_path / "x").read_bytes()[:4] == b"\x00\x00\x08\x03"


# ---- MNIST ----------------------------------------------------------------------------------
def test_mnist_reads_hand_packed_files_exactly(tmp_path):
    images = np.array([[[0, 1, 2], [3, 4, 255]], [[9, 8, 7], [6, 5, 4]]], dtype=np.uint8)
    labels = np.array([7, 2], dtype=np.uint8)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(pack_idx_by_hand(images))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(pack_idx_by_hand(labels))
    data = ds.MnistDataset(str(tmp_path), shuffle=False)
    assert data.get_col_names() == ["image", "label"]
    rows = numpy_rows(data)
    assert len(rows) == 2 and data.get_dataset_size() == 2
    for (image, label), want_image, want_label in zip(rows, images, labels):
        assert image.dtype == np.uint8 and image.shape == (2, 3, 1)
        assert label.dtype == np.uint32 and label.shape == ()
        np.testing.assert_array_equal(image[..., 0], want_image)
        assert int(label) == want_label


def test_mnist_writer_round_trip_gz_and_usage(tmp_path):
    rng = np.random.default_rng(0)
    train_x, train_y = rng.integers(0, 256, (5, 28, 28)), rng.integers(0, 10, 5)
    test_x, test_y = rng.integers(0, 256, (3, 28, 28, 1)), rng.integers(0, 10, 3)
    ds.write_mnist_idx(tmp_path, train_x, train_y, prefix="train", compress=True)
    ds.write_mnist_idx(tmp_path, test_x, test_y, prefix="test")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"])
    train = numpy_rows(ds.MnistDataset(tmp_path, usage="train", shuffle=False))
    np.testing.assert_array_equal(np.stack([x for x, _ in train])[..., 0], train_x)
    np.testing.assert_array_equal([y for _, y in train], train_y)
    test = numpy_rows(ds.MnistDataset(tmp_path, usage="test", shuffle=False))
    np.testing.assert_array_equal(np.stack([x for x, _ in test]), test_x)
    both = numpy_rows(ds.MnistDataset(tmp_path, shuffle=False))   # usage None = all: train then test
    np.testing.assert_array_equal([y for _, y in both], np.concatenate([train_y, test_y]))


def test_mnist_all_uses_whichever_pair_exists(tmp_path):
    ds.write_mnist_idx(tmp_path, np.zeros((4, 28, 28)), [1, 2, 3, 4])
    assert ds.MnistDataset(tmp_path).get_dataset_size() == 4
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte"):
        ds.MnistDataset(tmp_path, usage="test")


def test_mnist_missing_files_lists_expected_names_and_directory(tmp_path):
    (tmp_path / "readme.txt").write_text("not mnist")
    with pytest.raises(ValueError) as info:
        ds.MnistDataset(str(tmp_path))
    message = str(info.value)
    assert str(tmp_path) in message
    for name in MNIST_NAMES:
        assert name in message


def test_mnist_missing_one_file_names_it(tmp_path):
    ds.write_mnist_idx(tmp_path, np.zeros((2, 28, 28)), [0, 1])
    os.remove(tmp_path / "train-images-idx3-ubyte")
    with pytest.raises(ValueError, match="train-images-idx3-ubyte"):
        ds.MnistDataset(tmp_path)


def test_mnist_truncated_file_names_the_file(tmp_path):
    image_path, _ = ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2])
    raw = open(image_path, "rb").read()
    open(image_path, "wb").write(raw[:-100])
    with pytest.raises(ValueError, match="train-images-idx3-ubyte is truncated"):
        ds.MnistDataset(tmp_path)
    open(image_path, "wb").write(raw[:10])                     # cut inside the header
    with pytest.raises(ValueError, match="truncated: its header"):
        ds.MnistDataset(tmp_path)


def test_mnist_bad_magic_names_the_file(tmp_path):
    _, label_path = ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2])
    open(label_path, "wb").write(b"<html>404 Not Found</html>")
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte is not an IDX file: bad magic"):
        ds.MnistDataset(tmp_path)


def test_mnist_rejects_swapped_files_and_count_mismatch(tmp_path):
    image_path, label_path = ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2])
    os.replace(label_path, tmp_path / "tmp")
    os.replace(image_path, label_path)
    os.replace(tmp_path / "tmp", image_path)
    with pytest.raises(ValueError, match="not an MNIST images file"):
        ds.MnistDataset(tmp_path)
    ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2])
    ds.write_idx(label_path, np.array([0, 1], dtype=np.uint8))
    with pytest.raises(ValueError, match="3 images but .* 2 labels"):
        ds.MnistDataset(tmp_path)


def test_mnist_damaged_gzip_names_the_file(tmp_path):
    ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2], compress=True)
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:15])
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz is a damaged gzip file"):
        ds.MnistDataset(tmp_path)


def test_mnist_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="is not a directory"):
        ds.MnistDataset(tmp_path / "nowhere")
    ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1, 2])
    with pytest.raises(ValueError, match="usage must be one of"):
        ds.MnistDataset(tmp_path, usage="validation")
    with pytest.raises(ValueError, match="num_samples"):
        ds.MnistDataset(tmp_path, num_samples=0)
    with pytest.raises(ValueError, match="labels must have shape"):
        ds.write_mnist_idx(tmp_path, np.zeros((3, 28, 28)), [0, 1])
    with pytest.raises(ValueError, match="0..255"):
        ds.write_mnist_idx(tmp_path, np.full((1, 28, 28), 300), [0])


# ---- CIFAR-10 -------------------------------------------------------------------------------
def cifar_record_by_hand(label, image_hwc):
    """One record: label byte, then the red, green and blue 32x32 planes (row-major)."""
    planes = b"".join(bytes(image_hwc[:, :, c].ravel().tolist()) for c in range(3))
    return bytes([label]) + planes


def test_cifar10_reads_hand_packed_records_exactly(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    labels = [4, 0, 9]
    records = [cifar_record_by_hand(label, image) for label, image in zip(labels, images)]
    (tmp_path / "test_batch.bin").write_bytes(b"".join(records))
    data = ds.Cifar10Dataset(str(tmp_path), usage="test", shuffle=False)
    rows = numpy_rows(data)
    assert [int(y) for _, y in rows] == labels
    for (image, label), want in zip(rows, images):
        assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and label.dtype == np.uint32
        np.testing.assert_array_equal(image, want)


def test_cifar10_writer_usage_and_nested_folder(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    rng = np.random.default_rng(2)
    written = {}
    for name, label in (("data_batch_2.bin", 2), ("data_batch_1.bin", 1), ("data_batch_10.bin", 3),
                        ("test_batch.bin", 9)):
        images = rng.integers(0, 256, (2, 32, 32, 3))
        ds.write_cifar10_bin(folder / name, images, [label, label])
        written[name] = images
    first_image = written["test_batch.bin"][0].astype(np.uint8)
    assert (folder / "test_batch.bin").read_bytes()[:3073] == cifar_record_by_hand(9, first_image)
    train = numpy_rows(ds.Cifar10Dataset(tmp_path, usage="train", shuffle=False))   # parent folder works
    assert [int(y) for _, y in train] == [1, 1, 2, 2, 3, 3]       # numeric file order: 1, 2, 10
    np.testing.assert_array_equal(train[0][0], written["data_batch_1.bin"][0])
    assert ds.Cifar10Dataset(folder).get_dataset_size() == 8
    test = numpy_rows(ds.Cifar10Dataset(folder, usage="test", shuffle=False))
    assert [int(y) for _, y in test] == [9, 9]


def test_cifar10_bad_files(tmp_path):
    with pytest.raises(ValueError, match=r"data_batch_1.bin \.\.\. data_batch_5.bin and test_batch.bin"):
        ds.Cifar10Dataset(tmp_path)
    ds.write_cifar10_bin(tmp_path / "data_batch_1.bin", np.zeros((2, 32, 32, 3)), [0, 1])
    with pytest.raises(ValueError, match="test_batch.bin"):
        ds.Cifar10Dataset(tmp_path, usage="test")
    raw = (tmp_path / "data_batch_1.bin").read_bytes()
    (tmp_path / "data_batch_1.bin").write_bytes(raw[:-5])
    with pytest.raises(ValueError, match="data_batch_1.bin is not a CIFAR-10 binary batch.*truncated"):
        ds.Cifar10Dataset(tmp_path)
    (tmp_path / "data_batch_1.bin").write_bytes(b"\x0c" + raw[1:])
    with pytest.raises(ValueError, match="record 0 has label 12"):
        read_cifar10_bin(tmp_path / "data_batch_1.bin")
    with pytest.raises(ValueError, match=r"shape \(N, 32, 32, 3\)"):
        ds.write_cifar10_bin(tmp_path / "x.bin", np.zeros((2, 3, 32, 32)), [0, 1])


# ---- scikit-learn digits --------------------------------------------------------------------
def test_load_digits_split_shapes_and_values():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    reference = sklearn_datasets.load_digits()
    train_x, train_y = ds.load_digits("train")
    test_x, test_y = ds.load_digits("test")
    assert train_x.shape[1:] == (8, 8, 1) and train_x.dtype == np.uint8
    assert len(train_x) + len(test_x) == 1797 and 340 <= len(test_x) <= 380
    assert train_x.max() == 255 and train_x.min() == 0
    assert set(test_y.tolist()) == set(range(10))               # stratified: every digit in test
    flat, labels = ds.load_digits("all", as_mnist_shape=False)
    np.testing.assert_array_equal(flat, reference.data)
    np.testing.assert_array_equal(labels, reference.target)
    # each split sample is a sklearn sample scaled by 255/16; the split is disjoint and complete
    scaled = np.rint(reference.data * 255 / 16).reshape(-1, 8, 8, 1)
    keys = {tuple(x.ravel()) + (y,) for x, y in zip(scaled, reference.target)}
    assert all(tuple(x.ravel()) + (y,) in keys for x, y in zip(test_x, test_y))
    again_x, _ = ds.load_digits("test")
    np.testing.assert_array_equal(again_x, test_x)              # deterministic


def test_digits_as_mnist_files_feed_mnist_dataset(tmp_path):
    pytest.importorskip("sklearn")
    ds.write_digits_as_mnist(tmp_path)
    images, labels = ds.load_digits("train")
    rows = numpy_rows(ds.MnistDataset(tmp_path, usage="train", shuffle=False))
    np.testing.assert_array_equal(np.stack([x for x, _ in rows]), images)
    np.testing.assert_array_equal([y for _, y in rows], labels)


def test_load_digits_errors(monkeypatch):
    with pytest.raises(ValueError, match="split must be"):
        ds.load_digits("validation")
    with pytest.raises(ValueError, match="test_fraction"):
        ds.load_digits("train", test_fraction=1.5)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)   # import now fails
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        ds.load_digits("train")
