"""Loss primitives: softmax cross-entropy (sparse and dense), BCE with logits, squared error.

Each primitive takes ``reduction`` ("none", "mean" or "sum") at construction and applies
it inside its own forward and backward, so a training step pays for one primitive call and
one tape node, not two. The classes default to ``"none"`` (one loss per sample, or per
element for BCE and MSE); the functional forms default to ``"mean"``. The ``nn`` loss cells
are thin wrappers over these.
"""
from .activation import along_dot, along_sum, shifted, sigmoid_of
from .elementwise import fresh
from .primitive import Primitive

__all__ = ["SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits",
           "SigmoidCrossEntropyWithLogits",
           "BCEWithLogits", "MSE",
           "softmax_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss"]

REDUCTIONS = ("none", "mean", "sum")


def check_reduction(owner, reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{owner}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return reduction


class _Loss(Primitive):
    """Shared reduction handling: ``reduce`` in forward, ``grad_scale`` in backward."""

    def __init__(self, reduction="none"):
        self.reduction = check_reduction(type(self).__name__, reduction)

    def reduce(self, ctx, loss):
        ctx.count = loss.size
        if self.reduction == "none":
            return loss
        total = loss.sum()
        return total / loss.size if self.reduction == "mean" else total

    def grad_scale(self, ctx, g):
        """The upstream gradient per unreduced loss element (broadcastable to the loss)."""
        if self.reduction == "mean":
            return g * (1.0 / (ctx.count or 1))
        return g

    def check_logits(self, logits, rank=None):
        if logits.dtype.kind != "f":
            raise TypeError(f"{self.name}: logits must be floating point, got {logits.dtype}")
        if rank is not None and logits.ndim != rank:
            raise ValueError(f"{self.name}: logits must have shape (N, C), got {tuple(logits.shape)}")


class SparseSoftmaxCrossEntropyWithLogits(_Loss):
    """Cross-entropy of ``softmax(logits)`` against integer class labels.

    ``logits`` is (N, C); ``labels`` is (N,) int32 or int64 in ``[0, C)``. Returns the loss
    per sample (N,), or its mean/sum with ``reduction``. One fused forward: the log-softmax
    is computed once and the probabilities it leaves behind are kept for the backward,
    ``(softmax - onehot) * g``, written without building a one-hot matrix. Labels get no
    gradient.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> loss = ops.SparseSoftmaxCrossEntropyWithLogits()(ms.Tensor([[0.0, 0.0]]), ms.Tensor([1]))
    >>> round(loss.asnumpy()[0].item(), 6)
    0.693147
    """

    def check(self, logits, labels):
        self.check_logits(logits, rank=2)
        if labels.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: labels must be integer class indices (int32 or int64), got "
                            f"{labels.dtype}; use SoftmaxCrossEntropyWithLogits (sparse=False) for "
                            "one-hot or probability labels")
        n, classes = logits.shape
        if labels.shape != (n,):
            raise ValueError(f"{self.name}: labels must have shape ({n},) to match logits of shape "
                             f"{tuple(logits.shape)}, got {tuple(labels.shape)}")
        if n:
            # One reduction checks both ends: read as unsigned, negative labels become huge.
            as_unsigned = labels if labels.dtype.kind == "u" else labels.view(f"u{labels.dtype.itemsize}")
            if int(as_unsigned.max()) >= classes:
                bad = int(labels.min()) if int(labels.min()) < 0 else int(labels.max())
                raise ValueError(f"{self.name}: label {bad} is out of range for {classes} classes "
                                 f"(labels must lie in [0, {classes}))")

    def forward(self, ctx, logits, labels):
        self.check(logits, labels)
        xp = ctx.xp
        rows = xp.arange(logits.shape[0])
        e = shifted(xp, logits, 1)
        target = e[rows, labels]              # shifted logit of the true class (a copy)
        xp.exp(e, out=e)
        total = along_sum(xp, e, 1)
        loss = xp.log(total[:, 0])
        loss -= target                        # -log softmax[label] = log(sum e) - shifted[label]
        if ctx.needs_input_grad[0]:
            e /= total                        # e becomes the softmax probabilities
            ctx.probs = e
            ctx.save_for_backward(logits, labels, rows)
        return self.reduce(ctx, loss)

    def backward(self, ctx, g):
        logits, labels, rows = ctx.saved
        xp = ctx.xp
        # The gradient is written over the saved probabilities (no N x C allocation). A second
        # backward through the same graph (retain_graph=True) finds them gone and recomputes.
        p, ctx.probs = ctx.probs, None
        if p is None:
            p = shifted(xp, logits, 1)
            xp.exp(p, out=p)
            p /= along_sum(xp, p, 1)
        scale = self.grad_scale(ctx, g)
        p *= scale[:, None] if self.reduction == "none" else scale
        p[rows, labels] -= scale              # minus the one-hot, one element per row
        return p, None


class SoftmaxCrossEntropyWithLogits(_Loss):
    """Cross-entropy of ``softmax(logits)`` against dense labels (one-hot or probabilities).

    ``logits`` and ``labels`` are both (N, C) floating point; the loss per sample is
    ``-sum(labels * log_softmax(logits), axis=1)``. MindSpore's primitive also returns the
    logits' gradient; this one returns the loss only (autograd supplies the gradient).
    Labels that require grad (e.g. soft targets) receive ``-log_softmax * g``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> loss = ops.SoftmaxCrossEntropyWithLogits()(ms.Tensor([[0.0, 0.0]]), ms.Tensor([[0.0, 1.0]]))
    >>> round(loss.asnumpy()[0].item(), 6)
    0.693147
    """

    def forward(self, ctx, logits, labels):
        self.check_logits(logits, rank=2)
        if labels.dtype.kind != "f":
            raise TypeError(f"{self.name}: labels must be floating point (one-hot or probabilities), "
                            f"got {labels.dtype}; use SparseSoftmaxCrossEntropyWithLogits (sparse=True) "
                            "for integer class labels")
        if labels.shape != logits.shape:
            raise ValueError(f"{self.name}: labels must have the shape of logits {tuple(logits.shape)}, "
                             f"got {tuple(labels.shape)}")
        xp = ctx.xp
        labels = labels.astype(logits.dtype, copy=False)   # the labels' gradient is cast back by autograd
        logp = shifted(xp, logits, 1)
        p = fresh(xp, xp.exp, logp)
        total = along_sum(xp, p, 1)
        logp -= xp.log(total)
        loss = along_dot(xp, logp, labels, 1)[:, 0]
        xp.negative(loss, out=loss)
        if ctx.needs_input_grad[0]:
            p /= total
            ctx.probs = p
            ctx.label_mass = along_sum(xp, labels, 1)
        if ctx.needs_input_grad[1]:
            ctx.logp = logp
        ctx.labels = labels
        return self.reduce(ctx, loss)

    def backward(self, ctx, g):
        xp = ctx.xp
        scale = self.grad_scale(ctx, g)
        per_row = scale[:, None] if self.reduction == "none" else scale
        g_logits = g_labels = None
        if ctx.needs_input_grad[0]:
            # d/dlogits = softmax * sum(labels) - labels (softmax - labels for normalized labels)
            g_logits = fresh(xp, xp.multiply, ctx.probs, ctx.label_mass)
            g_logits -= ctx.labels
            g_logits *= per_row
        if ctx.needs_input_grad[1]:
            g_labels = fresh(xp, xp.multiply, ctx.logp, per_row)
            xp.negative(g_labels, out=g_labels)
        return g_logits, g_labels


class BCEWithLogits(_Loss):
    """Binary cross-entropy on logits, elementwise and stable for any logit.

    ``loss = max(x, 0) - x * y + log(1 + exp(-|x|))``, multiplied by ``weight`` when given;
    ``pos_weight`` scales the positive term: ``(1 - y) x + (1 + (pos_weight - 1) y) softplus(-x)``.
    ``weight`` and ``pos_weight`` broadcast against the logits (pos_weight usually has one
    entry per class). Integer or boolean labels are taken as 0/1 floats.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> loss = ops.BCEWithLogits()(ms.Tensor([0.0]), ms.Tensor([1.0]))
    >>> round(loss.asnumpy()[0].item(), 6)
    0.693147
    """

    def forward(self, ctx, logits, labels, weight=None, pos_weight=None):
        self.check_logits(logits)
        xp = ctx.xp
        if labels.dtype.kind != "f":
            labels = labels.astype(logits.dtype)
        if labels.shape != logits.shape:
            raise ValueError(f"{self.name}: labels must have the shape of logits {tuple(logits.shape)}, "
                             f"got {tuple(labels.shape)}")
        for what, extra in (("weight", weight), ("pos_weight", pos_weight)):
            if extra is not None and not _broadcasts_to(xp, extra, logits.shape):
                raise ValueError(f"{self.name}: {what} of shape {tuple(extra.shape)} does not broadcast "
                                 f"to the logits' shape {tuple(logits.shape)}")
        x, y = logits, labels
        want = _padded(ctx.needs_input_grad, 4)
        e = fresh(xp, xp.abs, x)
        xp.negative(e, out=e)
        xp.exp(e, out=e)                                  # exp(-|x|), never overflows
        if want[0]:
            ctx.sig = sigmoid_of(xp, x, e)
        log_term = xp.log1p(e, out=e)                     # log(1 + exp(-|x|))
        if pos_weight is None:
            loss = xp.maximum(x, 0, out=xp.empty_like(log_term))
            loss -= x * y
            loss += log_term                              # max(x, 0) - x y + log(1 + exp(-|x|))
        else:
            softplus_neg = log_term
            softplus_neg -= xp.minimum(x, 0)              # softplus(-x) = -log sigmoid(x)
            coef = (pos_weight - 1) * y
            coef += 1
            loss = x - x * y
            loss += coef * softplus_neg                   # (1 - y) x + coef softplus(-x)
            ctx.coef = coef
            ctx.softplus_neg = softplus_neg
        if want[2]:
            ctx.unweighted = loss.copy()
        if weight is not None:
            loss *= weight
        ctx.save_for_backward(x, y, weight, pos_weight)
        return self.reduce(ctx, loss)

    def backward(self, ctx, g):
        x, y, weight, pos_weight = ctx.saved
        xp = ctx.xp
        want = _padded(ctx.needs_input_grad, 4)
        scale = self.grad_scale(ctx, g)
        g_w = fresh(xp, xp.multiply, ctx.unweighted, scale) if weight is not None and want[2] else None
        if weight is not None:
            scale = scale * weight
        g_x = g_y = g_pw = None
        if want[0]:
            if pos_weight is None:
                g_x = fresh(xp, xp.subtract, ctx.sig, y)                # sigmoid(x) - y
            else:
                g_x = 1 - ctx.sig                                      # (1 - y) - coef (1 - sigmoid(x))
                g_x *= -ctx.coef
                g_x += 1 - y
            g_x *= scale
        if want[1]:
            g_y = -x if pos_weight is None else (pos_weight - 1) * ctx.softplus_neg - x
            g_y *= scale
        if pos_weight is not None and want[3]:
            g_pw = y * ctx.softplus_neg
            g_pw *= scale
        return (g_x, g_y, g_w, g_pw)[:len(ctx.needs_input_grad)]


def _broadcasts_to(xp, array, shape):
    try:
        return xp.broadcast(array, xp.empty(shape, dtype=bool)).shape == tuple(shape)
    except ValueError:
        return False


def _padded(flags, n):
    """``needs_input_grad`` extended with False for optional inputs that were not passed."""
    return tuple(flags) + (False,) * (n - len(flags))


class MSE(_Loss):
    """Squared error ``(x - y) ** 2`` per element, or its mean/sum; x and y broadcast.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.MSE("mean")(ms.Tensor([1.0, 2.0]), ms.Tensor([0.0, 0.0])).asnumpy().tolist()
    2.5
    """

    def forward(self, ctx, x, y):
        xp = ctx.xp
        diff = xp.subtract(x, y)
        ctx.save_for_backward(diff)
        return self.reduce(ctx, fresh(xp, xp.square, diff))

    def backward(self, ctx, g):
        (diff,) = ctx.saved
        xp = ctx.xp
        gx = fresh(xp, xp.multiply, diff, self.grad_scale(ctx, g))
        gx *= 2
        gy = xp.negative(gx) if ctx.needs_input_grad[1] else None
        return (gx if ctx.needs_input_grad[0] else None), gy


# Functional forms share one instance per primitive and reduction.
_instances = {}


def _instance(cls, reduction):
    key = (cls, reduction)
    if key not in _instances:
        _instances[key] = cls(reduction)
    return _instances[key]


def softmax_cross_entropy(logits, labels, sparse=True, reduction="mean"):
    """Softmax cross-entropy of (N, C) logits against int labels (sparse) or dense labels.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> round(ops.softmax_cross_entropy(ms.Tensor([[0.0, 0.0]]), ms.Tensor([0])).item(), 6)
    0.693147
    """
    check_reduction("softmax_cross_entropy", reduction)
    cls = SparseSoftmaxCrossEntropyWithLogits if sparse else SoftmaxCrossEntropyWithLogits
    return _instance(cls, reduction)(logits, labels)


def binary_cross_entropy_with_logits(logits, labels, weight=None, pos_weight=None, reduction="mean"):
    """Stable binary cross-entropy on logits (see ``BCEWithLogits``)."""
    check_reduction("binary_cross_entropy_with_logits", reduction)
    return _instance(BCEWithLogits, reduction)(logits, labels, weight, pos_weight)


def mse_loss(x, y, reduction="mean"):
    """Mean (or summed, or elementwise) squared error between ``x`` and ``y``."""
    check_reduction("mse_loss", reduction)
    return _instance(MSE, reduction)(x, y)


class SigmoidCrossEntropyWithLogits(BCEWithLogits):
    """MindSpore's name for the elementwise binary cross-entropy on logits (no reduction):
    ``SigmoidCrossEntropyWithLogits()(logits, labels)``, as Wide&Deep's loss calls it.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.SigmoidCrossEntropyWithLogits()(ms.Tensor([[0.0]]), ms.Tensor([[1.0]])).shape
    (1, 1)
    """

    def __init__(self):
        super().__init__("none")
