"""Write a small synthetic Criteo set (train.txt, test.txt) from a planted click model.

Criteo's Kaggle set is 45 million lines; this writes a few thousand lines in exactly its
tab-separated format (label, 13 integer fields, 26 hashed categorical fields, some empty)
with ``ds.write_synthetic_criteo``: the labels are drawn from a known logistic model whose
categorical values follow Zipf laws. Because the model is known, so is the best AUC any
model can reach on the held-out lines (the planted model's own probabilities); it is saved
as ``test_oracle.npy`` next to the text files, and training prints it for comparison.

    python examples/wide_deep/generate_synthetic_data.py [--data_path DIR] [--train_rows N]

``train_and_eval.py`` calls ``ensure_synthetic_data`` itself when ``--data_path`` holds no
data, and rewrites the set when its ``--train_rows``/``--test_rows``/``--data_seed`` ask
for other sizes or another seed than the set was written with.
"""
import argparse
import json
import os

import numpy as np

import minitorch_dist.dataset as ds
from minitorch_dist.dataset.criteo import read_criteo_text
from minitorch_dist.train.metrics import roc_auc

META = "synthetic.json"
DEFAULTS = {"train_rows": 60000, "test_rows": 10000, "seed": 0}
ORACLE = "test_oracle.npy"


def write_synthetic_data(data_path, train_rows, test_rows, seed=0):
    """Write ``train.txt``/``test.txt`` (one planted model, ``seed``; different draws),
    ``test_oracle.npy`` and ``synthetic.json``. Returns the oracle AUC on test.txt."""
    os.makedirs(data_path, exist_ok=True)
    for name, rows, draw in (("train", train_rows, 1), ("test", test_rows, 2)):
        tmp = os.path.join(data_path, f".{name}.txt.tmp")
        probs = ds.write_synthetic_criteo(tmp, rows, seed=draw, model_seed=seed)
        os.replace(tmp, os.path.join(data_path, f"{name}.txt"))
    np.save(os.path.join(data_path, ORACLE), probs.astype(np.float64))
    meta = {"train_rows": train_rows, "test_rows": test_rows, "seed": seed,
            "oracle_auc": oracle_auc(data_path)}
    with open(os.path.join(data_path, META), "w") as f:
        json.dump(meta, f)
    return meta["oracle_auc"]


def ensure_synthetic_data(data_path, train_rows=None, test_rows=None, seed=None):
    """Reuse ``data_path``'s data when it is there, else write the synthetic set.

    Real data (train.txt and test.txt without ``synthetic.json``) is never touched. A
    synthetic set is rewritten only when a size or the seed is given (not None) and differs
    from the one it was written with; the values not given are kept (or, for a new set, take
    the defaults 60000, 10000 and 0).
    Returns True when it wrote.
    """
    requested = {"train_rows": train_rows, "test_rows": test_rows, "seed": seed}
    meta_path = os.path.join(data_path, META)
    present = [_split_exists(data_path, name) for name in ("train", "test")]
    if any(present) and not os.path.exists(meta_path):
        return False                                   # the user's own Criteo files
    meta = {}
    if all(present):
        with open(meta_path) as f:
            meta = json.load(f)
        if all(value is None or meta.get(key) == value for key, value in requested.items()):
            return False
    values = {key: value if value is not None else meta.get(key, DEFAULTS[key])
              for key, value in requested.items()}
    write_synthetic_data(data_path, values["train_rows"], values["test_rows"], values["seed"])
    return True


def _split_exists(data_path, name):
    """Whether ``name`` (train/test) is there in a form ``src.datasets`` reads."""
    return any(os.path.exists(os.path.join(data_path, candidate))
               for candidate in (f"{name}.txt", f"{name}.txt.gz", name))


def oracle_auc(data_path):
    """The planted model's AUC on ``data_path/test.txt``, or None for data without one."""
    path = os.path.join(data_path, ORACLE)
    if not os.path.exists(path):
        return None
    labels = read_criteo_text(os.path.join(data_path, "test.txt"))[0]
    probs = np.load(path)
    if probs.shape != labels.shape:
        return None
    return roc_auc(probs, labels)


def main():
    from src.config import DEFAULT_DATA_PATH
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=DEFAULT_DATA_PATH)
    parser.add_argument("--train_rows", "--train-rows", type=int, default=DEFAULTS["train_rows"])
    parser.add_argument("--test_rows", "--test-rows", type=int, default=DEFAULTS["test_rows"])
    parser.add_argument("--data_seed", "--data-seed", type=int, default=DEFAULTS["seed"])
    args = parser.parse_args()
    auc = write_synthetic_data(args.data_path, args.train_rows, args.test_rows, args.data_seed)
    print(f"wrote {args.train_rows} + {args.test_rows} Criteo-format lines to {args.data_path}; "
          f"the planted model's AUC on test.txt is {auc:.4f}")


if __name__ == "__main__":
    main()
