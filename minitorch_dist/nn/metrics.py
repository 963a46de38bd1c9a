"""``mindspore.nn.metrics``: MindSpore 1.x's home of the metrics, which live in ``train``
(``minitorch_dist.train.metrics``, MindSpore 2.x's ``mindspore.train``). Names are looked up
there on use, so that ``nn`` does not depend on the training layer.

>>> from minitorch_dist.nn.metrics import Metric
>>> from minitorch_dist.train.metrics import Metric as TrainMetric
>>> Metric is TrainMetric
True
"""
import importlib


def __getattr__(name):
    metrics = importlib.import_module("minitorch_dist.train.metrics")
    try:
        return getattr(metrics, name)
    except AttributeError:
        raise AttributeError(f"module 'minitorch_dist.nn.metrics' has no attribute {name!r}") from None
