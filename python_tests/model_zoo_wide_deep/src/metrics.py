"""Upstream Wide&Deep's ``AUCMetric`` without scikit-learn: the area under the ROC curve comes
from the project's exact rank-sum ``roc_auc`` (ties share their mean rank, as
``sklearn.metrics.roc_auc_score`` counts them).

>>> import numpy as np
>>> metric = AUCMetric()
>>> metric.update(None, np.array([[0.9], [0.2], [0.6]]), np.array([[1.0], [0.0], [0.0]]))
>>> round(metric.eval(), 4)  # doctest: +ELLIPSIS
===...
1.0
"""
import numpy as np

from minitorch_dist.nn.metrics import Metric
from minitorch_dist import log as logger
from minitorch_dist.train.metrics import roc_auc


def _flat(values):
    return (values.asnumpy() if hasattr(values, "asnumpy") else np.asarray(values)).flatten().tolist()


class AUCMetric(Metric):
    """Area under the ROC curve of ``PredictWithSigmoid``'s probabilities against the labels."""

    def __init__(self):
        super(AUCMetric, self).__init__()
        self.clear()

    def clear(self):
        """Forget the predictions and labels seen so far."""
        self.true_labels = []
        self.pred_probs = []

    def update(self, *inputs):
        """``inputs``: (logits, probabilities, labels), as ``PredictWithSigmoid`` returns."""
        self.pred_probs.extend(_flat(inputs[1]))
        self.true_labels.extend(_flat(inputs[2]))

    def eval(self):
        """The AUC, or None (with a warning) where it is undefined, e.g. one class only."""
        if len(self.true_labels) != len(self.pred_probs):
            raise RuntimeError('true_labels.size is not equal to pred_probs.size()')
        try:
            auc = roc_auc(np.asarray(self.pred_probs), np.asarray(self.true_labels))
        except (ValueError, RuntimeError) as err:
            auc = None
            logger.warning(str(err))
        print("====" * 20 + " auc_metric  end")
        print("====" * 20 + " auc: {}".format(auc))
        return auc
