"""Synthetic click logs in Criteo's text format, drawn from a known (planted) logistic model.

``write_synthetic_criteo(path, num_rows, seed)`` writes ``num_rows`` lines of exactly
Criteo's format (label, 13 integer fields, 26 hashed 8-hex-digit categorical fields, tab
separated, some fields empty) and returns the planted model's click probability of every
line. The model depends only on ``model_seed``, so files written with different ``seed`` s and
the same ``model_seed`` are train/test splits of one population; the AUC of the returned
probabilities on a held-out file is the best AUC any model can reach on it (the oracle AUC).

The planted model, per line:

* categorical field ``j`` has ``cardinalities[j]`` values; the value of rank ``k`` (1-based)
  is drawn with probability proportional to ``k ** -zipf_exponent``, and is written as a
  fixed random 8-hex-digit hash. A fraction ``empty_rate`` of categorical fields is empty
  (the empty string is one more value with its own weight);
* integer field ``i`` is a geometric-like count (``floor(exp(N(mu_i, 1.2))) - 1``), empty
  with probability ``empty_rate`` and, for field 1 (as in Criteo's ``I2``), occasionally -1;
* ``logit = bias + sum_i w_i * (log(max(x_i, 0) + 1) - m_i) + sum_j v_j[value_j]`` (an empty
  integer field contributes ``-w_i m_i``; ``m_i`` and the ``v_j`` are centred so each field's
  mean contribution is about 0), ``label ~ Bernoulli(sigmoid(logit))``.

This is the model family of a Wide&Deep "wide" part over ``CriteoDataset`` columns, so a
logistic regression on ``feat_ids``/``feat_vals`` can approach the oracle AUC.
"""
import numpy as np

from .criteo import NUM_CAT_FIELDS, NUM_INT_FIELDS

DEFAULT_CARDINALITIES = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150,
                         200, 250, 300, 2, 4, 7, 9)


class PlantedCriteoModel:
    """The planted model: hashes, Zipf probabilities and logistic weights (from ``model_seed``)."""

    def __init__(self, model_seed=0, cardinalities=DEFAULT_CARDINALITIES, zipf_exponent=1.1,
                 empty_rate=0.1, weight_scale=0.4, bias=-1.5):
        cardinalities = tuple(int(c) for c in cardinalities)
        if len(cardinalities) != NUM_CAT_FIELDS or min(cardinalities) < 1:
            raise ValueError(f"write_synthetic_criteo: cardinalities must be {NUM_CAT_FIELDS} "
                             f"positive integers, got {cardinalities}")
        if not 0.0 <= empty_rate < 1.0:
            raise ValueError(f"write_synthetic_criteo: empty_rate must lie in [0, 1), got {empty_rate}")
        rng = np.random.default_rng([model_seed, 0x5C1E0])
        self.cardinalities = cardinalities
        self.empty_rate = float(empty_rate)
        self.bias = float(bias)
        self.hashes, self.probs, self.cat_weights, self.empty_weights = [], [], [], []
        for card in cardinalities:
            codes = rng.choice(2 ** 32, size=card, replace=False)
            self.hashes.append(np.array([f"{c:08x}" for c in codes]))
            p = np.arange(1, card + 1, dtype=np.float64) ** -zipf_exponent
            self.probs.append(p / p.sum())
            weights = rng.normal(0.0, weight_scale, size=card)
            empty_weight = float(rng.normal(0.0, weight_scale))
            # centre each field's contribution (its mean over the population is 0), so that
            # ``bias`` sets the click rate: about sigmoid(bias) before the spread of the logits
            mean = (1.0 - empty_rate) * float(self.probs[-1] @ weights) + empty_rate * empty_weight
            self.cat_weights.append(weights - mean)
            self.empty_weights.append(empty_weight - mean)
        self.int_mu = rng.uniform(0.0, 3.0, size=NUM_INT_FIELDS)
        self.int_weights = rng.normal(0.0, 0.25, size=NUM_INT_FIELDS)
        draws = np.floor(np.exp(rng.normal(self.int_mu, 1.2, size=(4096, NUM_INT_FIELDS)))) - 1
        self.int_means = (1.0 - empty_rate) * np.log1p(np.maximum(draws, 0)).mean(axis=0)

    def sample(self, num_rows, seed):
        """``(labels, int strings (N, 13), cat strings (N, 26), oracle probabilities (N,))``."""
        rng = np.random.default_rng([seed, 0xDA7A])
        logit = np.full(num_rows, self.bias)
        ints = np.empty((num_rows, NUM_INT_FIELDS), dtype=object)
        for i in range(NUM_INT_FIELDS):
            x = np.floor(np.exp(rng.normal(self.int_mu[i], 1.2, size=num_rows))).astype(np.int64) - 1
            if i == 1:
                x[rng.random(num_rows) < 0.05] = -1
            empty = rng.random(num_rows) < self.empty_rate
            logit += np.where(empty, 0.0, self.int_weights[i] * np.log1p(np.maximum(x, 0)))
            logit -= self.int_weights[i] * self.int_means[i]
            strings = x.astype(str).astype(object)
            strings[empty] = ""
            ints[:, i] = strings
        cats = np.empty((num_rows, NUM_CAT_FIELDS), dtype=object)
        for j in range(NUM_CAT_FIELDS):
            rank = rng.choice(self.cardinalities[j], size=num_rows, p=self.probs[j])
            empty = rng.random(num_rows) < self.empty_rate
            logit += np.where(empty, self.empty_weights[j], self.cat_weights[j][rank])
            strings = self.hashes[j][rank].astype(object)
            strings[empty] = ""
            cats[:, j] = strings
        probs = 1.0 / (1.0 + np.exp(-logit))
        labels = (rng.random(num_rows) < probs).astype(np.int64)
        return labels, ints, cats, probs


def write_synthetic_criteo(path, num_rows, seed=0, model_seed=0, **model_options):
    """Write ``num_rows`` Criteo-format lines to ``path``; return the oracle probabilities (N,).

    ``seed`` draws the lines; ``model_seed`` (and ``model_options``: ``cardinalities``,
    ``zipf_exponent``, ``empty_rate``, ``weight_scale``, ``bias``; see
    :class:`PlantedCriteoModel`) fixes the planted model. Use the same ``model_seed`` and
    another ``seed`` for a held-out file.

    >>> import os, tempfile
    >>> from minitorch_dist.dataset import CriteoDataset
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "train.txt")
    >>> probs = write_synthetic_criteo(path, 100, seed=1)
    >>> probs.shape, bool(((probs > 0) & (probs < 1)).all())
    ((100,), True)
    >>> len(open(path).readline().rstrip("\\n").split("\\t"))
    40
    >>> CriteoDataset(path, threshold=5).get_dataset_size()
    100
    >>> scratch.cleanup()
    """
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
        raise ValueError(f"write_synthetic_criteo: num_rows must be a positive integer, got {num_rows!r}")
    model = PlantedCriteoModel(model_seed, **model_options)
    labels, ints, cats, probs = model.sample(int(num_rows), seed)
    table = np.concatenate([labels.astype(str).astype(object)[:, None], ints, cats], axis=1)
    with open(path, "w", newline="\n") as f:
        f.write("".join("\t".join(row) + "\n" for row in table.tolist()))
    return probs
