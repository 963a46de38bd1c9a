"""Criteo reader, synthetic Criteo generator and the Auc metric (issue #8, item 4)."""
import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist.train import Auc, get_metrics
from minitorch_dist.train.metrics import roc_auc


def numpy_rows(dataset):
    return [tuple(row) for row in dataset.create_tuple_iterator(output_numpy=True)]


def criteo_line(label, ints, cats):
    assert len(ints) == 13 and len(cats) == 26
    return "\t".join([str(label)] + [str(v) for v in ints] + list(cats)) + "\n"


A, B, C = "68fd1e64", "80e26c9b", "0b153874"

# three hand-written lines: empties, a negative integer, a value that is rare in field 0
LINES = [
    criteo_line(1, [1, "", 0, 7] + [""] * 9, [A, B] + [C] * 24),
    criteo_line(0, ["", -1, 2, 0] + [3] * 9, [A, ""] + [C] * 24),
    criteo_line(0, [5] * 13, [B, B] + [""] + [C] * 23),
]


@pytest.fixture
def small_file(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("".join(LINES))
    return path


def test_reader_exact_ids_and_values(small_file):
    data = ds.CriteoDataset(str(small_file), threshold=2, shuffle=False)
    assert data.get_col_names() == ["feat_ids", "feat_vals", "label"]
    # frequent (>= 2) strings, field by field: field 0 {A}, field 1 {B}, field 2 {C},
    # fields 3..25 {C} -> ids 39, 40, 41, 42..64
    assert data.vocab_size == 39 + 1 + 1 + 1 + 23
    rows = numpy_rows(data)
    assert len(rows) == 3 and data.get_dataset_size() == 3
    ids = np.stack([r[0] for r in rows])
    vals = np.stack([r[1] for r in rows])
    labels = np.stack([r[2] for r in rows])
    assert ids.dtype == np.int32 and ids.shape == (3, 39)
    assert vals.dtype == np.float32 and vals.shape == (3, 39)
    assert labels.dtype == np.float32 and labels.shape == (3, 1)
    assert labels[:, 0].tolist() == [1.0, 0.0, 0.0]
    np.testing.assert_array_equal(ids[:, :13], np.tile(np.arange(13), (3, 1)))
    fields_3_on = list(range(42, 65))
    assert ids[0, 13:].tolist() == [39, 40, 41] + fields_3_on
    assert ids[1, 13:].tolist() == [39, 14, 41] + fields_3_on      # "" in field 1 is rare: OOV 14
    assert ids[2, 13:].tolist() == [13, 40, 15] + fields_3_on      # B rare in field 0, "" in field 2
    expected_ints = [
        [math.log(2), 0, 0, math.log(8)] + [0] * 9,
        [0, 0, math.log(3), 0] + [math.log(4)] * 9,                 # "" -> 0, -1 clipped -> 0
        [math.log(6)] * 13,
    ]
    np.testing.assert_allclose(vals[:, :13], np.array(expected_ints, dtype=np.float32), rtol=1e-6)
    np.testing.assert_array_equal(vals[:, 13:], 1.0)


def test_threshold_and_oov(small_file, tmp_path):
    low = ds.CriteoDataset(str(small_file), threshold=1, shuffle=False)
    # every distinct string has an id: field 0 {A, B}, field 1 {"", B}, field 2 {"", C}, 23 x {C}
    assert low.vocab_size == 39 + 2 + 2 + 2 + 23
    high = ds.CriteoDataset(str(small_file), threshold=4, shuffle=False)
    assert high.vocab_size == 39                       # nothing is that frequent
    ids = np.stack([r[0] for r in numpy_rows(high)])
    np.testing.assert_array_equal(ids[:, 13:], np.tile(np.arange(13, 39), (3, 1)))
    # a held-out file with the training vocabulary: unseen strings go to OOV
    test_path = tmp_path / "test.txt"
    test_path.write_text(criteo_line(1, [""] * 13, ["deadbeef", B] + [C] * 24))
    train = ds.CriteoDataset(str(small_file), threshold=2, shuffle=False)
    for vocab in (train, train.vocab):
        test = ds.CriteoDataset(str(test_path), vocab=vocab, shuffle=False)
        assert test.vocab_size == train.vocab_size
        (row_ids, row_vals, _), = numpy_rows(test)
        assert row_ids[13:16].tolist() == [13, 40, 41]
        np.testing.assert_array_equal(row_vals[:13], 0.0)
    with pytest.raises(ValueError, match="threshold"):
        ds.CriteoDataset(str(small_file), threshold=0)
    with pytest.raises(TypeError, match="vocab"):
        ds.CriteoDataset(str(small_file), vocab={"a": 1})


def test_reader_errors_and_inputs(small_file, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(LINES[0] + "1\t2\t3\n")
    with pytest.raises(ValueError, match="line 2 has 3"):
        ds.CriteoDataset(str(bad))
    bad.write_text(LINES[0].replace("1", "x", 1))
    with pytest.raises(ValueError, match="label"):
        ds.CriteoDataset(str(bad))
    with pytest.raises(ValueError, match="not a file"):
        ds.CriteoDataset(str(tmp_path / "missing.txt"))
    # a folder, a list of files and CRLF line ends read the same rows
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "part1.txt").write_text("".join(LINES[:2]))
    (folder / "part2.txt").write_bytes(LINES[2].replace("\n", "\r\n").encode())
    one = [r[0].tolist() for r in numpy_rows(ds.CriteoDataset(str(small_file), 2, shuffle=False))]
    many = [r[0].tolist() for r in numpy_rows(ds.CriteoDataset(str(folder), 2, shuffle=False))]
    listed = ds.CriteoDataset([str(folder / "part1.txt"), str(folder / "part2.txt")], 2, shuffle=False)
    assert one == many == [r[0].tolist() for r in numpy_rows(listed)]


def test_sharding_and_num_samples(tmp_path):
    path = tmp_path / "train.txt"
    ds.write_synthetic_criteo(str(path), 11, seed=3)
    full = numpy_rows(ds.CriteoDataset(str(path), threshold=1, shuffle=False))
    shards = [ds.CriteoDataset(str(path), threshold=1, shuffle=True, num_shards=3, shard_id=k)
              for k in range(3)]
    assert len({s.vocab_size for s in shards}) == 1     # the vocabulary comes from all rows
    seen = []
    for shard in shards:
        rows = numpy_rows(shard)
        assert len(rows) == shard.get_dataset_size() == 4     # ceil(11 / 3), padded
        seen += [tuple(r[0].tolist()) + (float(r[2][0]),) for r in rows]
    wanted = {tuple(r[0].tolist()) + (float(r[2][0]),) for r in full}
    assert set(seen) == wanted and len(seen) == 12
    capped = ds.CriteoDataset(str(path), threshold=1, num_samples=5, shuffle=False)
    assert capped.get_dataset_size() == 5
    batched = ds.CriteoDataset(str(path), threshold=1, shuffle=False).batch(4)
    ids, vals, label = next(iter(batched))
    assert isinstance(ids, ms.Tensor) and ids.shape == (4, 39) and label.shape == (4, 1)


def test_generator_round_trip(tmp_path):
    path = tmp_path / "synthetic.txt"
    probs = ds.write_synthetic_criteo(str(path), 2000, seed=5)
    again = ds.write_synthetic_criteo(str(tmp_path / "again.txt"), 2000, seed=5)
    np.testing.assert_array_equal(probs, again)
    assert path.read_bytes() == (tmp_path / "again.txt").read_bytes()
    lines = path.read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 2001
    fields = [line.split("\t") for line in lines[:-1]]
    assert all(len(f) == 40 for f in fields)
    labels = np.array([int(f[0]) for f in fields])
    assert set(labels.tolist()) == {0, 1}
    ints = [v for f in fields for v in f[1:14]]
    cats = [v for f in fields for v in f[14:]]
    assert "" in ints and "" in cats and "-1" in ints
    assert all(v == "" or int(v) >= -1 for v in ints)
    assert all(v == "" or (len(v) == 8 and int(v, 16) >= 0) for v in cats)
    # Zipf: the most common value of a big field is much more common than its median value
    column = [f[14 + 21] for f in fields if f[14 + 21]]
    counts = sorted(np.unique(column, return_counts=True)[1])[::-1]
    assert counts[0] > 10 * counts[len(counts) // 2]
    # the labels follow the returned probabilities
    assert abs(labels.mean() - probs.mean()) < 0.03
    data = ds.CriteoDataset(str(path), threshold=3, shuffle=False)
    read_labels = np.concatenate([r[2] for r in numpy_rows(data)])
    np.testing.assert_array_equal(read_labels, labels)
    other = ds.write_synthetic_criteo(str(tmp_path / "other.txt"), 2000, seed=6)
    assert not np.array_equal(other, probs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=1000)
    scores = np.round(rng.normal(size=1000) + labels, 1).astype(np.float32)   # many ties, both classes
    metric = Auc()
    for start in range(0, 1000, 128):                           # batches of Tensors and arrays
        chunk = slice(start, start + 128)
        preds = ms.Tensor(scores[chunk][:, None]) if start % 256 else scores[chunk]
        metric.update(preds, labels[chunk].astype(np.float32))
    assert metric.eval() == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    # logits and probabilities give the same AUC
    probs = 1.0 / (1.0 + np.exp(-scores))
    assert roc_auc(probs, labels) == pytest.approx(roc_auc(scores, labels), abs=1e-12)
    # two-column scores use column 1 minus column 0
    two = np.stack([-scores, scores], axis=1)
    assert Auc()(two, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_auc_edge_cases():
    metric = Auc()
    with pytest.raises(RuntimeError, match="no samples"):
        metric.eval()
    metric.update(np.array([0.3, 0.1]), np.array([1, 1]))
    with pytest.raises(RuntimeError, match="one class"):
        metric.eval()
    metric.update(np.array([0.2]), np.array([0]))
    assert metric.eval() == 0.5
    metric.clear()
    metric.update(np.array([1.0, 1.0]), np.array([0, 1]))
    assert metric.eval() == 0.5                                  # all tied
    with pytest.raises(ValueError, match="0 or 1"):
        metric.update(np.array([1.0]), np.array([2]))
    with pytest.raises(ValueError, match="scores but"):
        metric.update(np.zeros((2, 3)), np.array([0, 1]))
    assert isinstance(get_metrics({"auc"})["auc"], Auc)
    assert isinstance(get_metrics({"AUC": "auc"})["AUC"], Auc)


def _columns(dataset):
    rows = numpy_rows(dataset)
    return (np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]),
            np.concatenate([r[2] for r in rows]))


def test_logistic_regression_reaches_oracle_auc(tmp_path):
    """A logistic regression on feat_ids/feat_vals (the "wide" model) nears the planted AUC."""
    ds.write_synthetic_criteo(str(tmp_path / "train.txt"), 40000, seed=1)
    oracle_probs = ds.write_synthetic_criteo(str(tmp_path / "test.txt"), 20000, seed=2)
    train = ds.CriteoDataset(str(tmp_path / "train.txt"), threshold=5, shuffle=False)
    test = ds.CriteoDataset(str(tmp_path / "test.txt"), vocab=train, shuffle=False)
    ids, vals, y = _columns(train)
    test_ids, test_vals, test_y = _columns(test)
    oracle_auc = Auc()(oracle_probs, test_y)
    assert 0.7 < oracle_auc < 0.97 and 0.05 < y.mean() < 0.5

    w = np.zeros(train.vocab_size)
    bias = 0.0
    g2 = np.full_like(w, 1e-8)
    b2 = 1e-8
    rng = np.random.default_rng(0)
    for _ in range(3):                                   # minibatch Adagrad, 3 epochs
        order = rng.permutation(len(y))
        for start in range(0, len(y), 256):
            k = order[start:start + 256]
            logits = (w[ids[k]] * vals[k]).sum(axis=1) + bias
            residual = 1.0 / (1.0 + np.exp(-logits)) - y[k]
            grad = np.bincount(ids[k].ravel(), (residual[:, None] * vals[k]).ravel(),
                               minlength=len(w)) / len(k)
            g2 += grad * grad
            w -= 0.1 * grad / np.sqrt(g2)
            b2 += residual.mean() ** 2
            bias -= 0.1 * residual.mean() / np.sqrt(b2)
    metric = Auc()
    metric.update(ms.Tensor(((w[test_ids] * test_vals).sum(axis=1) + bias).astype(np.float32)),
                  test_y)
    learned_auc = metric.eval()
    assert learned_auc <= oracle_auc + 0.005
    assert learned_auc > oracle_auc - 0.02, (learned_auc, oracle_auc)
