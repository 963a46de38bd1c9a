"""More of MindSpore's loss cells over the functional losses: ``BCELoss``, ``NLLLoss``,
``HuberLoss``, ``SmoothL1Loss``, ``SoftMarginLoss``, ``CosineEmbeddingLoss``, ``RMSELoss``,
``MAELoss``-style ``L1Loss`` lives in ``nn/loss.py``; ``FocalLoss`` and ``DiceLoss`` here too.

>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> float(nn.RMSELoss()(ms.Tensor([1.0, 3.0]), ms.Tensor([1.0, 1.0])).asnumpy())
1.4142135381698608
"""
from ... import ops
from ..loss import LossBase

__all__ = ["BCELoss", "NLLLoss", "HuberLoss", "SmoothL1Loss", "SoftMarginLoss",
           "CosineEmbeddingLoss", "RMSELoss", "FocalLoss", "DiceLoss"]


class BCELoss(LossBase):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def construct(self, logits, labels):
        return ops.binary_cross_entropy(logits, labels, self.weight, self.reduction)


class NLLLoss(LossBase):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def construct(self, logits, labels):
        return ops.nll_loss(logits, labels, self.weight, self.ignore_index, self.reduction)


class HuberLoss(LossBase):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def construct(self, logits, labels):
        return ops.huber_loss(logits, labels, self.reduction, self.delta)


class SmoothL1Loss(LossBase):
    def __init__(self, beta=1.0, reduction="none"):
        super().__init__(reduction)
        self.beta = beta

    def construct(self, logits, labels):
        return ops.smooth_l1_loss(logits, labels, self.beta, self.reduction)


class SoftMarginLoss(LossBase):
    def construct(self, logits, labels):
        return ops.soft_margin_loss(logits, labels, self.reduction)


class CosineEmbeddingLoss(LossBase):
    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def construct(self, logits_x1, logits_x2, labels):
        return ops.cosine_embedding_loss(logits_x1, logits_x2, labels, self.margin, self.reduction)


class RMSELoss(LossBase):
    def __init__(self):
        super().__init__("mean")

    def construct(self, logits, label):
        d = logits - label
        return ops.sqrt(ops.mean(d * d))


class FocalLoss(LossBase):
    """``-(1 - p_t) ** gamma * log(p_t)`` over class logits (N, C[, ...]) and int labels."""

    def __init__(self, weight=None, gamma=2.0, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.gamma = weight, float(gamma)

    def construct(self, logits, labels):
        logp = ops.log_softmax(logits, 1)
        onehot = ops.one_hot(labels, logits.shape[1], 1.0, 0.0, axis=1)
        logp_t = ops.sum(logp * onehot, 1)
        loss = -ops.pow(1 - ops.exp(logp_t), self.gamma) * logp_t
        if self.weight is not None:
            loss = loss * ops.sum(onehot * self.weight.reshape((1, -1) + (1,) * (logits.ndim - 2)), 1)
        return self.get_loss(loss)


class DiceLoss(LossBase):
    def __init__(self, smooth=1e-5):
        super().__init__("mean")
        self.smooth = smooth

    def construct(self, logits, label):
        inter = ops.sum(logits * label)
        union = ops.sum(logits * logits) + ops.sum(label * label)
        return 1 - (2 * inter + self.smooth) / (union + self.smooth)
