"""Loss cells: MSELoss, L1Loss, CrossEntropyLoss, SoftmaxCrossEntropyWithLogits,
BCEWithLogitsLoss, and LossBase for writing your own.

Each cell holds its primitive (``ops.MSE``, ``ops.SparseSoftmaxCrossEntropyWithLogits``, ...)
built with the reduction, so a loss costs one primitive call in the common case.
``reduction`` is "mean" (the default), "sum" or "none" (one loss per sample or element).
"""
from .. import ops
from ..backend import dtypes
from ..tensor import Tensor
from .cell import Cell
from .layers.logical_shape import logical_shape

__all__ = ["LossBase", "MSELoss", "L1Loss", "MAELoss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits",
           "BCEWithLogitsLoss"]

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(owner, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{owner}: reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}")
    return reduction


def check_batch(owner, reduction, logits):
    """An empty batch under reduction "mean" is a ValueError (the mean of no samples is
    undefined; NaN would flow silently into the weights). "sum" (0) and "none" are fine.

    >>> import minitorch_dist as ms, numpy as np
    >>> check_batch("MSELoss", "mean", ms.Tensor(np.zeros((0, 3), np.float32)))
    Traceback (most recent call last):
    ...
    ValueError: MSELoss: the batch is empty (logits of shape (0, 3)), and the mean of no samples is undefined; check the dataset and its batching (an empty last batch, a filter that removed everything), or use reduction='sum'
    """
    if reduction == "mean" and isinstance(logits, Tensor) and 0 in logical_shape(logits):
        raise ValueError(f"{owner}: the batch is empty (logits of shape {logical_shape(logits)}), "
                         "and the mean of no samples is undefined; check the dataset and its "
                         "batching (an empty last batch, a filter that removed everything), or "
                         "use reduction='sum'")


_CAST = ops.Cast()


def float_labels(logits, labels):
    """Integer or bool labels of an elementwise loss take the logits' float dtype, so int32
    labels give a float32 loss (NumPy would promote float32 with int32 to float64)."""
    if isinstance(logits, Tensor) and isinstance(labels, Tensor) \
            and labels.dtype.kind in "iub" and logits.dtype.kind == "f":
        return _CAST(labels, logits.dtype)
    return labels


def _optional_tensor(value, owner, what):
    """``value`` (None, a Tensor, an array or a list) as a float Tensor or None."""
    if value is None or isinstance(value, Tensor):
        return value
    try:
        return Tensor(value, dtype=dtypes.float32)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{owner}: {what} must be a Tensor of weights, got {value!r}") from err


class LossBase(Cell):
    """Base of loss cells. ``get_loss(x, weights)`` weights and then reduces ``x`` as
    ``reduction`` says, which is what a custom loss's ``construct`` usually ends with.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn, ops
    >>> class AbsLoss(nn.LossBase):
    ...     def construct(self, logits, labels):
    ...         return self.get_loss(ops.abs(logits - labels))
    >>> float(AbsLoss()(ms.Tensor([1.0, 2.0]), ms.Tensor([0.0, 0.0])).asnumpy())
    1.5
    """

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(type(self).__name__, reduction)

    def get_axis(self, x):
        """Every axis of ``x`` (what "mean" and "sum" reduce over)."""
        return tuple(range(x.ndim))

    def get_loss(self, x, weights=1.0):
        if not (isinstance(weights, (int, float)) and weights == 1.0):
            x = ops.mul(weights, x)
        if self.reduction == "mean":
            return ops.mean(x)
        if self.reduction == "sum":
            return ops.sum(x)
        return x

    def construct(self, logits, labels):
        raise NotImplementedError(f"{type(self).__name__} must define construct(logits, labels)")

    def extra_repr(self):
        return f"reduction={self.reduction}"


class MSELoss(LossBase):
    """Squared error ``(logits - labels) ** 2``, reduced; the inputs broadcast.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> float(nn.MSELoss()(ms.Tensor([1.0, 3.0]), ms.Tensor([0.0, 0.0])).asnumpy())
    5.0
    """

    def __init__(self, reduction="mean"):
        super().__init__(reduction)
        self.mse = ops.MSE(reduction)

    def construct(self, logits, labels):
        check_batch("MSELoss", self.reduction, logits)
        return self.mse(logits, float_labels(logits, labels))


class L1Loss(LossBase):
    """Absolute error ``|logits - labels|``, reduced."""

    def __init__(self, reduction="mean"):
        super().__init__(reduction)
        self.sub = ops.Sub()
        self.abs = ops.Abs()

    def construct(self, logits, labels):
        check_batch(type(self).__name__, self.reduction, logits)
        return self.get_loss(self.abs(self.sub(logits, float_labels(logits, labels))))


class MAELoss(L1Loss):
    """MindSpore's mean absolute error: ``|logits - labels|``, reduced (L1Loss's formula).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> float(nn.MAELoss()(ms.Tensor([1.0, -3.0]), ms.Tensor([0.0, 0.0])).asnumpy())
    2.0
    """


class SoftmaxCrossEntropyWithLogits(LossBase):
    """Cross-entropy of ``softmax(logits)`` with (N, C) logits. MindSpore's defaults:
    ``sparse=False`` (labels are one-hot or probabilities, shape (N, C)) and
    ``reduction="none"`` (one loss per sample). With ``sparse=True`` labels are class
    indices of shape (N,), int32 or int64.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    >>> [round(v, 4) for v in loss(ms.Tensor([[0.0, 0.0], [9.0, 0.0]]), ms.Tensor([1, 0])).asnumpy().tolist()]
    [0.6931, 0.0001]
    """

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = bool(sparse)
        cls = ops.SparseSoftmaxCrossEntropyWithLogits if self.sparse else ops.SoftmaxCrossEntropyWithLogits
        self.softmax_cross_entropy = cls(reduction)

    def construct(self, logits, labels):
        check_batch("SoftmaxCrossEntropyWithLogits", self.reduction, logits)
        if not self.sparse:
            labels = float_labels(logits, labels)
        return self.softmax_cross_entropy(logits, labels)

    def extra_repr(self):
        return f"sparse={self.sparse}, reduction={self.reduction}"


class CrossEntropyLoss(LossBase):
    """Cross-entropy between ``softmax(logits, axis=1)`` and the labels (PyTorch's and
    MindSpore 2.x's ``CrossEntropyLoss``).

    * ``logits``: (N, C), or (N, C, d1, ...) for per-position classes, or (C,) unbatched.
    * ``labels``: class indices of shape (N, d1, ...) (int32/int64), or class probabilities
      of the logits' shape (float).
    * ``weight``: a rescaling weight per class, shape (C,).
    * ``ignore_index``: index labels equal to it add nothing, to the loss or to the mean's
      denominator.
    * ``label_smoothing`` in [0, 1]: the target becomes ``(1 - s) * target + s / C``.

    With "mean", index labels divide by the summed weights of the counted samples (the
    number of counted samples without ``weight``); probability labels divide by N·d1·...

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> loss = nn.CrossEntropyLoss()
    >>> round(float(loss(ms.Tensor([[0.0, 0.0], [0.0, 0.0]]), ms.Tensor([0, 1])).asnumpy()), 6)
    0.693147
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.weight = _optional_tensor(weight, "CrossEntropyLoss", "weight")
        if self.weight is not None and self.weight.ndim != 1:
            raise ValueError(f"CrossEntropyLoss: weight must have shape (C,), got {tuple(self.weight.shape)}")
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
            raise TypeError(f"CrossEntropyLoss: ignore_index must be an int, got {ignore_index!r}")
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
                or not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)
        self.sparse_ce = ops.SparseSoftmaxCrossEntropyWithLogits(reduction)
        self.dense_ce = ops.SoftmaxCrossEntropyWithLogits(reduction)
        self.log_softmax = ops.LogSoftmax(axis=1)
        self.mul = ops.Mul()
        self.reduce_sum = ops.ReduceSum()
        self.transpose = ops.Transpose()
        self.reshape = ops.Reshape()
        self._weight_on = {}   # the class weights as an array, per device

    # ---- shapes ------------------------------------------------------------------------
    def _rows(self, logits, labels):
        """Logits as (M, C) rows and labels as (M,) indices or (M, C) probabilities, plus the
        shape a "none" result takes."""
        if not isinstance(labels, Tensor):
            labels = Tensor(labels)
        kind = labels.dtype.kind
        if kind not in "iuf":
            raise TypeError(f"CrossEntropyLoss: labels must be int class indices or float class "
                            f"probabilities, got {labels.dtype}")
        shape = logical_shape(logits)     # whole, also on a rank's slice in a sharded run
        if len(shape) == 0:
            raise ValueError("CrossEntropyLoss: logits must have shape (N, C), (N, C, d1, ...) or (C,), "
                             "got a scalar")
        index = kind != "f"
        per_sample = shape[:1] + shape[2:] if len(shape) > 1 else ()
        expected = per_sample if index else shape
        if logical_shape(labels) != expected:
            what = "class indices" if index else "class probabilities"
            raise ValueError(f"CrossEntropyLoss: labels of {what} must have shape {expected} for logits "
                             f"of shape {shape}, got {logical_shape(labels)}")
        if len(shape) == 1:
            logits = self.reshape(logits, (1, shape[0]))
            labels = self.reshape(labels, (1,) if index else (1, shape[0]))
        elif len(shape) > 2:   # classes last, then one row per position
            perm = (0,) + tuple(range(2, len(shape))) + (1,)
            logits = self.reshape(self.transpose(logits, perm), (-1, shape[1]))
            labels = self.reshape(labels, (-1,)) if index else \
                self.reshape(self.transpose(labels, perm), (-1, shape[1]))
        return logits, labels, index, per_sample

    # ---- the loss ----------------------------------------------------------------------
    def construct(self, logits, labels):
        check_batch("CrossEntropyLoss", self.reduction, logits)
        logits, labels, index, none_shape = self._rows(logits, labels)
        plain = self.weight is None and self.label_smoothing == 0.0
        if plain and not index:
            loss = self.dense_ce(logits, labels)
        elif plain and not self._has_ignored(labels, logits.device):
            loss = self.sparse_ce(logits, labels)
        else:
            return self._weighted(logits, labels, index, none_shape)
        if self.reduction == "none" and logical_shape(loss) != none_shape:
            loss = self.reshape(loss, none_shape)
        return loss

    def _has_ignored(self, labels, device):
        return bool((_array_on(labels, device) == self.ignore_index).any())

    def _class_weights(self, device):
        if self.weight is None:
            return None
        array = self._weight_on.get(device)
        if array is None:
            array = self._weight_on[device] = _array_on(self.weight, device)
        return array

    def _weighted(self, logits, labels, index, none_shape):
        """The general case: ``sum(-T * log_softmax(logits))`` with a constant target matrix T
        that folds in the class weights, the smoothing, the ignored rows and the mean's divisor."""
        device = logits.device
        xp = device.xp
        rows, classes = logits.shape
        dtype = logits.dtype
        weight = self._class_weights(device)
        if weight is not None and weight.shape != (classes,):
            raise ValueError(f"CrossEntropyLoss: weight has shape {tuple(weight.shape)} but the logits "
                             f"have {classes} classes")
        smooth = self.label_smoothing
        if index:
            target, divisor = self._index_targets(_array_on(labels, device), rows, classes, weight, xp, dtype)
        else:
            target = _array_on(labels, device).astype(dtype, copy=True)
            if smooth:
                target *= 1.0 - smooth
                target += smooth / classes
            if weight is not None:
                target *= weight.astype(dtype, copy=False)
            divisor = rows
        scale = -1.0
        if self.reduction == "mean":
            scale = -1.0 / divisor if divisor else float("nan")   # the mean of nothing is NaN
        target *= scale
        weighted = self.mul(self.log_softmax(logits), Tensor._make(target, device))
        if self.reduction == "none":
            return self.reshape(self.reduce_sum(weighted, 1), none_shape)
        return self.reduce_sum(weighted, ())

    def _index_targets(self, labels, rows, classes, weight, xp, dtype):
        valid = labels != self.ignore_index
        if rows and bool(valid.any()):
            kept = labels[valid]
            low, high = int(kept.min()), int(kept.max())
            if low < 0 or high >= classes:
                bad = low if low < 0 else high
                raise ValueError(f"CrossEntropyLoss: label {bad} is out of range for {classes} classes "
                                 f"(labels must lie in [0, {classes}) or equal ignore_index="
                                 f"{self.ignore_index})")
        safe = xp.where(valid, labels, 0)
        smooth = self.label_smoothing
        target = xp.full((rows, classes), smooth / classes, dtype) if smooth else \
            xp.zeros((rows, classes), dtype)
        target[xp.arange(rows), safe] += 1.0 - smooth
        if weight is not None:
            weight = weight.astype(dtype, copy=False)
            target *= weight
            picked = weight[safe] * valid
        else:
            picked = valid.astype(dtype)
        target *= valid[:, None]
        return target, float(picked.sum())

    def extra_repr(self):
        return (f"weight={None if self.weight is None else tuple(self.weight.shape)}, "
                f"ignore_index={self.ignore_index}, reduction={self.reduction}, "
                f"label_smoothing={self.label_smoothing}")


def _array_on(tensor, device):
    """The data of ``tensor`` on ``device`` (a counted copy when it lives elsewhere)."""
    if tensor.device is device:
        return tensor.data
    return device.copy_from(tensor.data, tensor.device)


class BCEWithLogitsLoss(LossBase):
    """Binary cross-entropy on logits (numerically stable), elementwise then reduced.

    ``weight`` rescales each element's loss and ``pos_weight`` the positive term; both
    broadcast against the logits (``pos_weight`` usually has one entry per class).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> round(float(nn.BCEWithLogitsLoss()(ms.Tensor([0.0, 0.0]), ms.Tensor([1.0, 0.0])).asnumpy()), 6)
    0.693147
    """

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        self.weight = _optional_tensor(weight, "BCEWithLogitsLoss", "weight")
        self.pos_weight = _optional_tensor(pos_weight, "BCEWithLogitsLoss", "pos_weight")
        self.bce = ops.BCEWithLogits(reduction)

    def construct(self, logits, labels):
        check_batch("BCEWithLogitsLoss", self.reduction, logits)
        return self.bce(logits, float_labels(logits, labels), self.weight, self.pos_weight)
