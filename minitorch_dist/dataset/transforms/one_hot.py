"""``OneHot``: integer labels -> one-hot rows (optionally smoothed)."""
import numbers

import numpy as np

from .core import Transform


class OneHot(Transform):
    """Labels in ``0..num_classes-1`` -> rows of ``num_classes`` (a 1 at the label).

    The rows keep the labels' integer dtype; with ``smoothing_rate`` r > 0 they are float32,
    ``1 - r + r / num_classes`` at the label and ``r / num_classes`` elsewhere.

    >>> import numpy as np
    >>> OneHot(3)(np.array(2)).tolist()
    [0, 0, 1]
    """

    def __init__(self, num_classes, smoothing_rate=0.0):
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) \
                or num_classes < 1:
            raise ValueError(f"OneHot: num_classes must be a positive int, got {num_classes!r}")
        if isinstance(smoothing_rate, bool) or not isinstance(smoothing_rate, numbers.Real) \
                or not 0.0 <= smoothing_rate <= 1.0:
            raise ValueError(f"OneHot: smoothing_rate must be a number in [0, 1], got {smoothing_rate!r}")
        self.num_classes = int(num_classes)
        self.smoothing_rate = float(smoothing_rate)

    def __call__(self, label):
        return self.apply_batch(np.asarray(label)[None])[0]

    def apply_batch(self, labels):
        labels = np.asarray(labels)
        if labels.dtype.kind not in "iu":
            raise TypeError(f"OneHot: expected integer labels of shape () or (K,), got dtype "
                            f"{labels.dtype}")
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ValueError(f"OneHot: labels must lie in 0..{self.num_classes - 1}, got "
                             f"{labels.min()}..{labels.max()}")
        rows = np.eye(self.num_classes, dtype=labels.dtype)[labels]
        if self.smoothing_rate == 0.0:
            return rows
        r = np.float32(self.smoothing_rate)
        return rows.astype(np.float32) * (1 - r) + r / np.float32(self.num_classes)
