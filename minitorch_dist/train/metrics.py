"""Metrics for ``Model.eval``: each accumulates over batches with ``update`` and reports
with ``eval``; ``clear`` starts over.

``Model(..., metrics=...)`` accepts names (``{"accuracy", "loss"}``), a dict of name ->
Metric (``{"Accuracy": Accuracy()}``) or a mix (a dict whose values are names).
Metrics compute on host NumPy copies of the batch outputs (a few numbers per batch).
"""
import numpy as np

from ..tensor import Tensor

__all__ = ["Metric", "Accuracy", "Loss", "MAE", "MSE", "TopKCategoricalAccuracy",
           "Top1CategoricalAccuracy", "Top5CategoricalAccuracy", "Auc", "get_metric_fn", "get_metrics",
           "names", "roc_auc"]


class Metric:
    """Base class: subclasses implement ``clear()``, ``update(*inputs)`` and ``eval()``."""

    def __init__(self):
        self.clear()

    def clear(self):
        raise NotImplementedError(f"{type(self).__name__} must define clear()")

    def update(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define update()")

    def eval(self):
        raise NotImplementedError(f"{type(self).__name__} must define eval()")

    @staticmethod
    def _convert_data(data):
        """A NumPy array from a Tensor, an array, a list or a number."""
        if isinstance(data, Tensor):
            return data.asnumpy()
        if isinstance(data, (np.ndarray, list, tuple, int, float, np.generic)):
            return np.asarray(data)
        raise TypeError(f"{type(data).__name__} cannot be used as metric input; "
                        "expected a Tensor, an array, a list or a number")

    def _check_count(self, total, what="samples"):
        if total == 0:
            raise RuntimeError(f"{type(self).__name__} cannot be computed: no {what} were seen; "
                               "call update() first")

    def __call__(self, *inputs):
        """Clear, update once and evaluate: the metric of a single batch."""
        self.clear()
        self.update(*inputs)
        return self.eval()


class Accuracy(Metric):
    """Fraction of correct predictions.

    ``eval_type="classification"``: ``update(y_pred, y)`` with scores ``y_pred`` of shape
    (N, C) and labels ``y`` as class indices (N,) or one-hot (N, C).
    ``eval_type="multilabel"``: ``y_pred`` holds probabilities, rounded at 0.5, and a sample
    is correct when all its labels match.

    >>> import numpy as np
    >>> from minitorch_dist.train import Accuracy
    >>> acc = Accuracy()
    >>> acc.update(np.array([[0.2, 0.8], [0.9, 0.1], [0.3, 0.7]]), np.array([1, 0, 0]))
    >>> round(acc.eval(), 4)
    0.6667
    """

    def __init__(self, eval_type="classification"):
        if eval_type not in ("classification", "multilabel"):
            raise ValueError(f"Accuracy: eval_type must be 'classification' or 'multilabel', "
                             f"got {eval_type!r}")
        self.eval_type = eval_type
        super().__init__()

    def clear(self):
        self._correct_num = 0
        self._total_num = 0

    def update(self, *inputs):
        if len(inputs) != 2:
            raise ValueError(f"Accuracy.update needs 2 inputs (y_pred, y), got {len(inputs)}")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if self.eval_type == "multilabel":
            if y_pred.shape != y.shape:
                raise ValueError(f"Accuracy (multilabel): y_pred shape {y_pred.shape} and y shape "
                                 f"{y.shape} must match")
            hits = np.all(np.equal(np.round(y_pred), y).reshape(len(y), -1), axis=1)
        else:
            if y_pred.ndim != 2 or y_pred.shape[1] < 2:
                raise ValueError(f"Accuracy: y_pred must have shape (N, C) with C >= 2 classes, "
                                 f"got {y_pred.shape}")
            if y.ndim == 2 and y.shape == y_pred.shape:
                y = y.argmax(axis=1)          # one-hot labels
            y = y.reshape(-1)
            if y.shape[0] != y_pred.shape[0]:
                raise ValueError(f"Accuracy: {y_pred.shape[0]} predictions but {y.shape[0]} labels")
            hits = np.equal(y_pred.argmax(axis=1), y)
        self._correct_num += int(hits.sum())
        self._total_num += int(hits.shape[0])

    def eval(self):
        self._check_count(self._total_num)
        return self._correct_num / self._total_num


class Loss(Metric):
    """Average of the per-batch losses: ``update(loss)`` with a scalar (or a vector, averaged).

    >>> from minitorch_dist.train import Loss
    >>> metric = Loss()
    >>> metric.update(1.0); metric.update(2.0)
    >>> metric.eval()
    1.5
    """

    def clear(self):
        self._sum_loss = 0.0
        self._total_num = 0

    def update(self, *inputs):
        if len(inputs) != 1:
            raise ValueError(f"Loss.update needs 1 input (the loss), got {len(inputs)}")
        loss = self._convert_data(inputs[0])
        if loss.ndim > 1:
            raise ValueError(f"Loss.update expects a scalar or a vector of losses, got shape {loss.shape}")
        self._sum_loss += float(loss.mean())
        self._total_num += 1

    def eval(self):
        self._check_count(self._total_num, "batches")
        return self._sum_loss / self._total_num


class _ErrorMetric(Metric):
    def clear(self):
        self._sum = 0.0
        self._total_num = 0

    def update(self, *inputs):
        if len(inputs) != 2:
            raise ValueError(f"{type(self).__name__}.update needs 2 inputs (y_pred, y), got {len(inputs)}")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.size != y.size:
            raise ValueError(f"{type(self).__name__}: y_pred shape {y_pred.shape} and y shape "
                             f"{y.shape} hold different numbers of values")
        diff = y_pred.reshape(len(y_pred), -1).astype(np.float64) - y.reshape(len(y_pred), -1)
        self._sum += float(self._error(diff).sum())
        self._total_num += len(y_pred)

    def eval(self):
        self._check_count(self._total_num)
        return self._sum / self._total_num


class MAE(_ErrorMetric):
    """Mean absolute error per sample (summed over a sample's values), averaged over samples."""

    @staticmethod
    def _error(diff):
        return np.abs(diff).sum(axis=1)


class MSE(_ErrorMetric):
    """Mean squared error per sample (summed over a sample's values), averaged over samples."""

    @staticmethod
    def _error(diff):
        return (diff * diff).sum(axis=1)


class TopKCategoricalAccuracy(Metric):
    """Fraction of samples whose label is among the ``k`` highest scores."""

    def __init__(self, k):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"TopKCategoricalAccuracy: k must be a positive int, got {k!r}")
        self.k = k
        super().__init__()

    def clear(self):
        self._correct_num = 0
        self._total_num = 0

    def update(self, *inputs):
        if len(inputs) != 2:
            raise ValueError(f"{type(self).__name__}.update needs 2 inputs (y_pred, y), got {len(inputs)}")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim != 2:
            raise ValueError(f"{type(self).__name__}: y_pred must have shape (N, C), got {y_pred.shape}")
        if y.ndim == 2 and y.shape == y_pred.shape:
            y = y.argmax(axis=1)
        y = y.reshape(-1)
        # a label is in the top k when fewer than k classes score strictly higher than it
        label_score = y_pred[np.arange(len(y)), y][:, None]
        hits = (y_pred > label_score).sum(axis=1) < self.k
        self._correct_num += int(hits.sum())
        self._total_num += len(y)

    def eval(self):
        self._check_count(self._total_num)
        return self._correct_num / self._total_num


class Top1CategoricalAccuracy(TopKCategoricalAccuracy):
    def __init__(self):
        super().__init__(1)


class Top5CategoricalAccuracy(TopKCategoricalAccuracy):
    def __init__(self):
        super().__init__(5)


def roc_auc(scores, labels):
    """Exact ROC AUC of ``scores`` for binary ``labels`` (rank sum, tied scores share their mean rank).

    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    >>> roc_auc([1.0, 1.0, 0.0], [1, 0, 0])          # a tie between classes counts one half
    0.75
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if scores.shape != labels.shape:
        raise ValueError(f"roc_auc: {scores.size} scores but {labels.size} labels")
    if np.isnan(scores).any():
        raise ValueError("roc_auc: the scores contain NaN")
    positive = labels == 1
    if not np.all(positive | (labels == 0)):
        raise ValueError(f"roc_auc: labels must be 0 or 1, got values {np.unique(labels)[:10].tolist()}")
    num_pos = int(positive.sum())
    num_neg = labels.size - num_pos
    if num_pos == 0 or num_neg == 0:
        raise RuntimeError(f"AUC is undefined with only one class: {num_pos} positive and {num_neg} "
                           "negative samples were seen")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)                          # 1-based rank of each group's last member
    mean_rank = ends - (counts - 1) / 2.0             # average rank of the tied group
    rank_sum = float(mean_rank[inverse.reshape(-1)][positive].sum())
    return (rank_sum - num_pos * (num_pos + 1) / 2.0) / (num_pos * num_neg)


class Auc(Metric):
    """Area under the ROC curve over every sample seen since ``clear()`` (exact, ties averaged).

    ``update(y_pred, y)``: ``y_pred`` holds one score per sample (logits or probabilities: any
    monotone score gives the same AUC), shape (N,) or (N, 1); two-column scores (N, 2) use
    column 1 minus column 0. ``y`` holds the 0/1 labels, any shape with N values. The
    Wide&Deep example evaluates with it as ``metrics={"auc": Auc()}`` (or ``{"auc"}``).

    >>> import numpy as np
    >>> from minitorch_dist.train import Auc
    >>> auc = Auc()
    >>> auc.update(np.array([[2.0], [-1.0]]), np.array([[1.0], [0.0]]))
    >>> auc.update(np.array([0.5, 0.5]), np.array([1, 0]))
    >>> auc.eval()
    0.875
    """

    def clear(self):
        self._scores = []
        self._labels = []

    def update(self, *inputs):
        if len(inputs) != 2:
            raise ValueError(f"Auc.update needs 2 inputs (y_pred, y), got {len(inputs)}")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim == 2 and y_pred.shape[1] == 2:
            y_pred = y_pred[:, 1].astype(np.float64) - y_pred[:, 0]
        y_pred = y_pred.reshape(-1).astype(np.float64)
        y = y.reshape(-1)
        if y_pred.size != y.size:
            raise ValueError(f"Auc: {y_pred.size} scores but {y.size} labels (y_pred must hold one "
                             "score per sample: shape (N,), (N, 1) or (N, 2))")
        if not np.all((y == 0) | (y == 1)):
            raise ValueError(f"Auc: labels must be 0 or 1, got values {np.unique(y)[:10].tolist()}")
        self._scores.append(y_pred)
        self._labels.append(y.astype(np.int8))

    def eval(self):
        total = sum(len(s) for s in self._scores)
        self._check_count(total)
        return roc_auc(np.concatenate(self._scores), np.concatenate(self._labels))


_BY_NAME = {
    "accuracy": Accuracy, "acc": Accuracy, "loss": Loss, "mae": MAE, "mse": MSE,
    "top_1_accuracy": Top1CategoricalAccuracy, "top_5_accuracy": Top5CategoricalAccuracy,
    "auc": Auc,
}


def names():
    """The metric names ``get_metric_fn`` knows."""
    return sorted(_BY_NAME)


def get_metric_fn(name, *args, **kwargs):
    """A new metric from its name (``"accuracy"``, ``"loss"``, ...), case-insensitive."""
    if not isinstance(name, str):
        raise TypeError(f"metric name must be a string, got {type(name).__name__}")
    cls = _BY_NAME.get(name.lower())
    if cls is None:
        raise ValueError(f"unknown metric {name!r}; known metrics are {names()}")
    return cls(*args, **kwargs)


def get_metrics(metrics):
    """``{name: Metric}`` from a set/list of names, or a dict of name -> Metric or name."""
    if metrics is None:
        return {}
    if isinstance(metrics, str):
        metrics = {metrics}
    if isinstance(metrics, dict):
        out = {}
        for name, metric in metrics.items():
            out[name] = get_metric_fn(metric) if isinstance(metric, str) else metric
            if not isinstance(out[name], Metric):
                raise TypeError(f"metric {name!r} must be a Metric or a metric name, "
                                f"got {type(metric).__name__}")
        return out
    if isinstance(metrics, (set, frozenset, list, tuple)):
        for name in metrics:
            if not isinstance(name, str):
                raise TypeError(f"metric names must be strings, got {name!r}; pass Metric objects "
                                "in a dict of name -> Metric")
        ordered = sorted(metrics) if isinstance(metrics, (set, frozenset)) else metrics
        return {name: get_metric_fn(name) for name in ordered}
    raise TypeError("metrics must be a set of names or a dict of name -> Metric, "
                    f"got {type(metrics).__name__}")
