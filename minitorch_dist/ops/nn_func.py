"""MindSpore's neural-network functions that compose existing primitives: activations
(``elu``, ``leaky_relu``, ``hardtanh``, ``glu``, ...), losses (``cross_entropy``,
``nll_loss``, ``smooth_l1_loss``, ``kl_div``, ...), padding, 1-d and adaptive pooling,
``conv1d``, ``dense``, ``interpolate`` (nearest) and ``pixel_shuffle``.

Built from differentiable primitives, each has PyTorch's gradient without a backward of
its own.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.leaky_relu(ms.Tensor([-1.0, 2.0]), 0.1).asnumpy().tolist()
[-0.10000000149011612, 2.0]
>>> ops.pad(ms.Tensor([[1.0]]), (1, 1)).asnumpy().tolist()
[[0.0, 1.0, 0.0]]
"""
import numpy as np

from ..tensor import Tensor
from .array_func import _F, _constant, _host
from .loss import check_reduction

__all__ = ["elu", "celu", "leaky_relu", "hardtanh", "hardshrink", "softshrink", "soft_shrink",
           "prelu", "rrelu", "glu", "gumbel_softmax", "softmin", "threshold", "dropout1d",
           "dropout2d", "dropout3d", "alpha_dropout", "binary_cross_entropy", "cross_entropy",
           "nll_loss", "smooth_l1_loss", "l1_loss", "huber_loss", "kl_div", "soft_margin_loss",
           "margin_ranking_loss", "cosine_embedding_loss", "hinge_embedding_loss",
           "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multilabel_soft_margin_loss", "pad", "padding", "avg_pool1d", "max_pool1d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "conv1d", "dense", "bias_add", "lrn", "interpolate",
           "upsample", "pixel_shuffle", "pixel_unshuffle", "lp_pool1d", "lp_pool2d",
           "batch_to_space_nd", "space_to_batch_nd", "depth_to_space", "space_to_depth",
           "iou", "bounding_box_encode", "bounding_box_decode", "check_valid"]


# ---- activations ------------------------------------------------------------------------
def elu(input_x, alpha=1.0):   # noqa: A002
    return _F().select(_F().greater(input_x, 0), input_x, alpha * _F().expm1(input_x))


def celu(x, alpha=1.0):
    return _F().maximum(x, 0) + _F().minimum(alpha * _F().expm1(x / alpha), 0)


def leaky_relu(input, alpha=0.2):   # noqa: A002
    return _F().select(_F().greater(input, 0), input, input * alpha)


def hardtanh(input, min_val=-1.0, max_val=1.0):   # noqa: A002
    return _F().clamp(input, min_val, max_val)


def hardshrink(x, lambd=0.5):
    return _F().select(_F().greater(_F().abs(x), lambd), x, _F().zeros_like(x))


def softshrink(x, lambd=0.5):
    return _F().select(_F().greater(x, lambd), x - lambd,
                       _F().select(_F().less(x, -lambd), x + lambd, _F().zeros_like(x)))


soft_shrink = softshrink


def prelu(x, weight):
    w = weight.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim >= 2 and weight.ndim == 1 else weight
    return _F().select(_F().greater(x, 0), x, x * w)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3):   # noqa: A002
    """Evaluation form: the negative slope is the mean of ``lower`` and ``upper``."""
    return leaky_relu(input, (lower + upper) / 2)


def threshold(input, threshold, value):   # noqa: A002
    return _F().select(_F().greater(input, threshold), input, _F().full_like(input, value))


def glu(x, axis=-1):
    a, b = _F().chunk(x, 2, axis)
    return a * _F().sigmoid(b)


def softmin(x, axis=-1):
    return _F().softmax(-x, axis)


def gumbel_softmax(logits, tau=1.0, hard=False, dim=-1):
    from ..random import rng
    u = rng().uniform(1e-10, 1.0, size=logits.shape).astype(logits.dtype)
    y = _F().softmax((logits + _constant(-np.log(-np.log(u)), logits)) / tau, dim)
    if not hard:
        return y
    index = _host(y).argmax(dim)
    one = _constant(np.moveaxis(np.eye(logits.shape[dim], dtype=logits.dtype)[index], -1, dim), y)
    return one - _F().stop_gradient(y) + y


def _channel_dropout(x, p, training, spatial):
    if not training or p == 0:
        return x
    from ..random import rng
    if x.ndim < 2 + spatial - 1:
        raise ValueError(f"dropout{spatial}d: expected an input with channels, got shape {x.shape}")
    keep = (rng().random(x.shape[:2] + (1,) * (x.ndim - 2)) >= p).astype(x.dtype) / (1 - p)
    return x * _constant(keep, x)


def dropout1d(input, p=0.5, training=True):   # noqa: A002
    return _channel_dropout(input, p, training, 1)


def dropout2d(input, p=0.5, training=True):   # noqa: A002
    return _channel_dropout(input, p, training, 2)


def dropout3d(input, p=0.5, training=True):   # noqa: A002
    return _channel_dropout(input, p, training, 3)


def alpha_dropout(input, p=0.5, training=True):   # noqa: A002
    if training and p:
        raise ValueError("alpha_dropout: training=True is not supported here; use ops.dropout")
    return input


# ---- losses -----------------------------------------------------------------------------
def _reduce(owner, loss, reduction, weight=None):
    check_reduction(owner, reduction)
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return _F().mean(loss)
    if reduction == "sum":
        return _F().sum(loss)
    return loss


def binary_cross_entropy(logits, labels, weight=None, reduction="mean"):
    eps = 1e-12
    loss = -(labels * _F().log(_F().clamp(logits, eps, None))
             + (1 - labels) * _F().log(_F().clamp(1 - logits, eps, None)))
    return _reduce("binary_cross_entropy", loss, reduction, weight)


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction="mean",
             label_smoothing=0.0):
    """Negative log-likelihood of log-probabilities ``inputs`` (N, C[, ...]) at class
    indices ``target``; ``weight`` per class; ``ignore_index`` rows count for nothing."""
    check_reduction("nll_loss", reduction)
    logp = _F().moveaxis(inputs, 1, -1) if inputs.ndim > 2 else inputs
    labels = _host(target).astype(np.int64)
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0)
    n_class = logp.shape[-1]
    w = np.ones(n_class, logp.dtype) if weight is None else _host(weight).astype(logp.dtype)
    row_w = np.where(valid, w[safe], 0).astype(logp.dtype)
    picked = _F().gather_elements(logp, -1, Tensor(safe[..., None])).reshape(labels.shape)
    loss = -picked * _constant(row_w, picked)
    if label_smoothing:
        smooth = -_F().sum(logp * _constant(w, logp), -1) / n_class * _constant(valid.astype(logp.dtype), picked)
        loss = (1 - label_smoothing) * loss + label_smoothing * smooth
    if reduction == "mean":
        return _F().sum(loss) / float(max(row_w.sum(), 1e-12))
    return _F().sum(loss) if reduction == "sum" else loss


def cross_entropy(inputs, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits ``inputs`` against class indices or class probabilities."""
    logp = _F().log_softmax(inputs, 1 if inputs.ndim > 1 else 0)
    if isinstance(target, Tensor) and target.dtype.kind == "f":
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / inputs.shape[1]
        w = 1.0 if weight is None else weight.reshape((1, -1) + (1,) * (inputs.ndim - 2))
        return _reduce("cross_entropy", -_F().sum(logp * target * w, 1), reduction)
    return nll_loss(logp, target, weight, ignore_index, reduction, label_smoothing)


def l1_loss(input, target, reduction="mean"):   # noqa: A002
    return _reduce("l1_loss", _F().abs(input - target), reduction)


def smooth_l1_loss(input, target, beta=1.0, reduction="none"):   # noqa: A002
    d = _F().abs(input - target)
    loss = _F().select(_F().less(d, beta), 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce("smooth_l1_loss", loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):   # noqa: A002
    d = _F().abs(input - target)
    loss = _F().select(_F().less(d, delta), 0.5 * d * d, delta * (d - 0.5 * delta))
    return _reduce("huber_loss", loss, reduction)


def kl_div(logits, labels, reduction="mean", log_target=False):
    if log_target:
        loss = _F().exp(labels) * (labels - logits)
    else:
        loss = _F().xlogy(labels, labels) - labels * logits
    if reduction == "batchmean":
        return _F().sum(loss) / logits.shape[0]
    return _reduce("kl_div", loss, reduction)


def soft_margin_loss(input, target, reduction="mean"):   # noqa: A002
    return _reduce("soft_margin_loss", _F().softplus(-target * input), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    return _reduce("margin_ranking_loss", _F().relu(-target * (input1 - input2) + margin), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    cos = _F().cosine_similarity(input1, input2, 1)
    loss = _F().select(_F().equal(target, 1), 1 - cos, _F().relu(cos - margin))
    return _reduce("cosine_embedding_loss", loss, reduction)


def hinge_embedding_loss(inputs, targets, margin=1.0, reduction="mean"):
    loss = _F().select(_F().equal(targets, 1), inputs, _F().relu(margin - inputs))
    return _reduce("hinge_embedding_loss", loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction="mean"):
    d_pos = _F().vector_norm(anchor - positive + eps, p, -1)
    d_neg = _F().vector_norm(anchor - negative + eps, p, -1)
    if swap:
        d_neg = _F().minimum(d_neg, _F().vector_norm(positive - negative + eps, p, -1))
    return _reduce("triplet_margin_loss", _F().relu(d_pos - d_neg + margin), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):   # noqa: A002
    if full:
        raise ValueError("poisson_nll_loss: full=True is not supported here")
    loss = _F().exp(input) - target * input if log_input else input - target * _F().log(input + eps)
    return _reduce("poisson_nll_loss", loss, reduction)


def gaussian_nll_loss(x, target, var, full=False, eps=1e-6, reduction="mean"):
    var = _F().clamp(var, eps, None)
    loss = 0.5 * (_F().log(var) + (x - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * float(np.log(2 * np.pi))
    return _reduce("gaussian_nll_loss", loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):   # noqa: A002
    loss = -(target * _F().logsigmoid(input) + (1 - target) * _F().logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce("multilabel_soft_margin_loss", _F().mean(loss, -1), reduction)


# ---- padding, pooling, convolution, resizing ----------------------------------------------
def pad(input_x, padding, mode="constant", value=None):   # noqa: A002
    """Pad the last ``len(padding) // 2`` axes (PyTorch order: last axis first). ``constant``
    mode is a concatenation with a filled block, so the gradient is the slice back."""
    if mode != "constant":
        return _pad_host(input_x, padding, mode)
    padding = tuple(int(p) for p in padding)
    if len(padding) % 2 or len(padding) // 2 > input_x.ndim:
        raise ValueError(f"pad: padding must hold two ints per padded axis, got {padding}")
    out = input_x
    for i in range(len(padding) // 2):
        axis = out.ndim - 1 - i
        before, after = padding[2 * i], padding[2 * i + 1]
        if before < 0 or after < 0:
            out = _F().narrow(out, axis, max(-before, 0), out.shape[axis] - max(-before, 0) - max(-after, 0))
            before, after = max(before, 0), max(after, 0)
        parts = [out]
        for n, at in ((before, 0), (after, len(parts) + 1)):
            if n:
                shape = list(out.shape)
                shape[axis] = n
                block = _F().full(tuple(shape), 0 if value is None else value, out.dtype)
                parts.insert(0 if at == 0 else len(parts), block)
        out = _F().concat(tuple(parts), axis) if len(parts) > 1 else out
    return out


def _pad_host(x, padding, mode):
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    width = [(0, 0)] * x.ndim
    for i in range(len(padding) // 2):
        width[x.ndim - 1 - i] = (int(padding[2 * i]), int(padding[2 * i + 1]))
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    # as an index gather, so the gradient flows back to the source positions
    index = np.pad(np.arange(x.size).reshape(x.shape), width, mode=np_mode)
    return x.reshape(-1)[_constant(index, x)]


def padding(x, pad_dim_size=8):
    return pad(x, (0, pad_dim_size - x.shape[-1]))


def avg_pool1d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True):   # noqa: A002
    out = _F().avg_pool2d(_F().expand_dims(input_x, 2), (1, kernel_size), (1, stride), (0, padding),
                          count_include_pad)
    return _F().squeeze(out, 2)


def max_pool1d(input_x, kernel_size=1, stride=1, padding=0):   # noqa: A002
    return _F().squeeze(_F().max_pool2d(_F().expand_dims(input_x, 2), (1, kernel_size),
                                        (1, stride), (0, padding)), 2)


def lp_pool1d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    s = kernel_size if stride is None else stride
    return _F().pow(avg_pool1d(_F().pow(x, float(norm_type)), kernel_size, s) * kernel_size,
                    1.0 / norm_type)


def lp_pool2d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    s = k if stride is None else stride
    return _F().pow(_F().avg_pool2d(_F().pow(x, float(norm_type)), k, s) * (k[0] * k[1]),
                    1.0 / norm_type)


def _bins(size, out):
    return [(int(np.floor(i * size / out)), int(np.ceil((i + 1) * size / out))) for i in range(out)]


def _adaptive(x, output_size, reduce):
    spatial = x.shape[-len(output_size):]
    out = x
    for k, (size, target) in enumerate(zip(spatial, output_size)):
        axis = x.ndim - len(output_size) + k
        target = size if target is None else target
        parts = [reduce(_F().narrow(out, axis, a, b - a), axis) for a, b in _bins(size, target)]
        out = _F().stack(parts, axis)
    return out


def adaptive_avg_pool1d(input, output_size):   # noqa: A002
    return _adaptive(input, (output_size,), lambda t, a: _F().mean(t, a))


def adaptive_avg_pool2d(input, output_size):   # noqa: A002
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    return _adaptive(input, size, lambda t, a: _F().mean(t, a))


def adaptive_max_pool1d(input, output_size):   # noqa: A002
    return _adaptive(input, (output_size,), lambda t, a: _F().max(t, a))


def adaptive_max_pool2d(input, output_size, return_indices=False):   # noqa: A002
    if return_indices:
        raise ValueError("adaptive_max_pool2d: return_indices=True is not supported here")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    return _adaptive(input, size, lambda t, a: _F().max(t, a))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):   # noqa: A002
    pad = padding if isinstance(padding, str) else (0, padding)
    out = _F().conv2d(_F().expand_dims(input, 2), _F().expand_dims(weight, 2), None, (1, stride),
                      pad, (1, dilation), groups)
    out = _F().squeeze(out, 2)
    return out if bias is None else out + bias.reshape(1, -1, 1)


def dense(input, weight, bias=None):   # noqa: A002
    out = _F().matmul(input, _F().swapaxes(weight, -1, -2) if weight.ndim > 1 else weight)
    return out if bias is None else out + bias


def bias_add(input_x, bias):   # noqa: A002
    return input_x + bias.reshape((1, -1) + (1,) * (input_x.ndim - 2))


def lrn(x, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, norm_region="ACROSS_CHANNELS"):
    sq = _F().pad(x * x, (0, 0, 0, 0, depth_radius, depth_radius))
    window = sum(_F().narrow(sq, 1, i, x.shape[1]) for i in range(2 * depth_radius + 1))
    return x / _F().pow(bias + alpha * window, beta)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None):   # noqa: A002
    """Nearest-neighbour resizing of the spatial axes (an index gather)."""
    if mode != "nearest":
        raise ValueError(f"interpolate: mode={mode!r} is not supported here (only 'nearest')")
    spatial = input.shape[2:]
    if size is None:
        factors = (scale_factor,) * len(spatial) if isinstance(scale_factor, (int, float)) else scale_factor
        size = tuple(int(np.floor(n * f)) for n, f in zip(spatial, factors))
    size = (size,) * len(spatial) if isinstance(size, int) else tuple(size)
    out = input
    for k, (n, m) in enumerate(zip(spatial, size)):
        index = np.minimum((np.arange(m) * (n / m)).astype(np.int64), n - 1)
        out = _F().index_select(out, 2 + k, Tensor(index))
    return out


upsample = interpolate


def pixel_shuffle(input, upscale_factor):   # noqa: A002
    r = upscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    n = len(lead)
    x = _F().transpose(x, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):   # noqa: A002
    r = downscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    n = len(lead)
    x = _F().transpose(x, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


def depth_to_space(x, block_size):
    return pixel_shuffle(x, block_size)


def space_to_depth(x, block_size):
    return pixel_unshuffle(x, block_size)


def space_to_batch_nd(input_x, block_size, paddings):   # noqa: A002
    bh, bw = (block_size, block_size) if isinstance(block_size, int) else block_size
    x = pad(input_x, (paddings[1][0], paddings[1][1], paddings[0][0], paddings[0][1]))
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // bh, bh, w // bw, bw)
    x = _F().transpose(x, (3, 5, 0, 1, 2, 4))
    return x.reshape(n * bh * bw, c, h // bh, w // bw)


def batch_to_space_nd(input_x, block_shape, crops):   # noqa: A002
    bh, bw = (block_shape, block_shape) if isinstance(block_shape, int) else block_shape
    nb, c, h, w = input_x.shape
    n = nb // (bh * bw)
    x = input_x.reshape(bh, bw, n, c, h, w)
    x = _F().transpose(x, (2, 3, 4, 0, 5, 1)).reshape(n, c, h * bh, w * bw)
    (t, b), (left, r) = crops
    return x[:, :, t:h * bh - b, left:w * bw - r]


def one_hot_(tensor, num_classes=-1):
    n = int(_host(tensor).max()) + 1 if num_classes == -1 else num_classes
    return _F().one_hot(tensor, n, 1, 0, tensor.dtype if tensor.dtype.kind in "iu" else None)


# ---- boxes (not differentiable) ------------------------------------------------------------
def iou(anchor_boxes, gt_boxes, mode="iou"):
    a, g = _host(anchor_boxes)[:, None, :4], _host(gt_boxes)[None, :, :4]
    w = np.clip(np.minimum(a[..., 2], g[..., 2]) - np.maximum(a[..., 0], g[..., 0]) + 1, 0, None)
    h = np.clip(np.minimum(a[..., 3], g[..., 3]) - np.maximum(a[..., 1], g[..., 1]) + 1, 0, None)
    inter = w * h

    def area(b):
        return (b[..., 2] - b[..., 0] + 1) * (b[..., 3] - b[..., 1] + 1)
    denom = area(a) + area(g) - inter if mode == "iou" else area(g)
    return _constant((inter / denom).T.astype(_host(anchor_boxes).dtype), anchor_boxes)


def bounding_box_encode(anchor_box, groundtruth_box, means=(0.0, 0.0, 0.0, 0.0),
                        stds=(1.0, 1.0, 1.0, 1.0)):
    a, g = _host(anchor_box), _host(groundtruth_box)
    aw, ah = a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1
    gw, gh = g[:, 2] - g[:, 0] + 1, g[:, 3] - g[:, 1] + 1
    d = np.stack([((g[:, 0] + g[:, 2]) - (a[:, 0] + a[:, 2])) / 2 / aw,
                  ((g[:, 1] + g[:, 3]) - (a[:, 1] + a[:, 3])) / 2 / ah,
                  np.log(gw / aw), np.log(gh / ah)], 1)
    return _constant(((d - np.array(means)) / np.array(stds)).astype(a.dtype), anchor_box)


def bounding_box_decode(anchor_box, deltas, max_shape, means=(0.0, 0.0, 0.0, 0.0),
                        stds=(1.0, 1.0, 1.0, 1.0), wh_ratio_clip=0.016):
    a, d = _host(anchor_box), _host(deltas) * np.array(stds) + np.array(means)
    aw, ah = a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1
    cx, cy = (a[:, 0] + a[:, 2]) / 2 + d[:, 0] * aw, (a[:, 1] + a[:, 3]) / 2 + d[:, 1] * ah
    limit = abs(np.log(wh_ratio_clip))
    w, h = aw * np.exp(np.clip(d[:, 2], -limit, limit)), ah * np.exp(np.clip(d[:, 3], -limit, limit))
    box = np.stack([cx - (w - 1) / 2, cy - (h - 1) / 2, cx + (w - 1) / 2, cy + (h - 1) / 2], 1)
    box[:, 0::2] = np.clip(box[:, 0::2], 0, max_shape[1] - 1)
    box[:, 1::2] = np.clip(box[:, 1::2], 0, max_shape[0] - 1)
    return _constant(box.astype(a.dtype), anchor_box)


def check_valid(bboxes, img_metas):
    b, m = _host(bboxes), _host(img_metas)
    h, w = m[0] * m[2], m[1] * m[2]
    ok = (b[:, 0] >= 0) & (b[:, 1] >= 0) & (b[:, 2] <= w) & (b[:, 3] <= h)
    return _constant(ok, bboxes)
