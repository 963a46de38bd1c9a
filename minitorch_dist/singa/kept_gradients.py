"""The gradients of a loss, kept so that its graph can be freed by its first backward.

SINGA lets a program back-propagate the same loss twice (``autograd.backward(loss)`` to
look at the gradients, then ``opt(loss)`` to train). Keeping the whole tape for that would
hold every saved activation until the loss is dropped, so the peak of a step would be the
activations plus the gradients. Instead the first backward frees each node's saved tensors
as soon as its backward has run (the core engine's ``retain_graph=False``), and keeps a copy
of the gradient of every trainable leaf the loss reaches, with the seed it was run for.

A later request on the same loss is answered from that copy:

* the same seed: the kept gradients, copied again (callers update gradients in place);
* a seed that is the kept one times a power of two: the kept gradients times that power,
  which is exact (gradients are linear in the seed, and scaling by 2**k rounds nothing);
* any other seed: a RuntimeError, never an approximation.

The copy lives as long as the loss does (a weak reference to the loss drops it).
"""
import math
import weakref

from ..row_tensor import RowTensor

__all__ = ["keep", "kept_for", "answer"]

_kept = {}      # id(loss) -> (weak reference to the loss, KeptGradients)


class KeptGradients:
    """The seed of a loss's first backward and its leaves' gradients (copies, by id)."""

    __slots__ = ("seed", "by_id")

    def __init__(self, seed, by_id):
        self.seed, self.by_id = seed, by_id


def _copy(grad):
    if grad is None:
        return None
    if isinstance(grad, RowTensor):
        return RowTensor(grad.indices.data.copy(), grad.values.data.copy(), grad.dense_shape)
    return grad.copy()


def _scaled(grad, factor):
    if grad is None:
        return None
    if isinstance(grad, RowTensor):
        values = grad.values.data * grad.values.data.dtype.type(factor)
        return RowTensor(grad.indices.data.copy(), values, grad.dense_shape)
    return grad * grad.dtype.type(factor)


def keep(loss, seed, leaves, grads):
    """Remember copies of ``grads`` (those of ``leaves``) for ``loss`` backed by ``seed``."""
    by_id = {id(t): _copy(g) for t, g in zip(leaves, grads)}
    key = id(loss)
    _kept[key] = (weakref.ref(loss, lambda _, key=key: _kept.pop(key, None)),
                  KeptGradients(seed.copy(), by_id))


def kept_for(loss):
    """The KeptGradients of ``loss``, or None when it has not been back-propagated."""
    entry = _kept.get(id(loss))
    if entry is None or entry[0]() is not loss:
        return None
    return entry[1]


def _power_of_two_ratio(new, old):
    """``new / old`` when it is a power of two (scaling by it is exact), else None."""
    if old == 0 or not math.isfinite(old) or not math.isfinite(new) or new == 0:
        return None
    ratio = new / old
    mantissa, _ = math.frexp(ratio)
    return ratio if abs(mantissa) == 0.5 else None


def answer(kept, seed, params, call):
    """The gradients of ``params`` for ``seed``, from ``kept``; RuntimeError when they
    cannot be given exactly (``call`` names the request)."""
    old, new = float(kept.seed.reshape(-1)[0]), float(seed.reshape(-1)[0])
    missing = [p for p in params if id(p) not in kept.by_id]
    if missing:
        raise RuntimeError(f"{call}: this loss was already back-propagated and its graph "
                           "freed; the tensor "
                           f"{getattr(missing[0], 'name', None)!r} {tuple(missing[0].shape)} "
                           "is not one of its trainable leaves, so its gradient was not "
                           "kept; compute the loss again")
    if new == old:
        return [_copy(kept.by_id[id(p)]) for p in params]
    factor = _power_of_two_ratio(new, old)
    if factor is None:
        raise RuntimeError(f"{call}: this loss was already back-propagated with dy={old!r} "
                           "and its graph freed (saved activations are released during "
                           f"backward); its gradients for dy={new!r} cannot be derived "
                           "exactly from the kept ones; use the same dy (or a power-of-two "
                           "multiple of it), or compute the loss again")
    return [_scaled(kept.by_id[id(p)], factor) for p in params]
